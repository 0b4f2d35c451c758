//! Each phantom lesion's own mask, and a lesion mask grown from its box against it.

use keyslice_core::findings::Organ;
use keyslice_core::volume::lesion::{GrowOptions, VoxelBox, dice, grow_from_box, measure};
use keyslice_phantom::{PhantomOptions, generate};

#[test]
fn each_lesions_own_mask_holds_its_voxels_and_a_mask_grown_from_its_box_matches_it() {
    let mut overlaps = Vec::new();
    for index in 0..12 {
        let case = generate(11, index, PhantomOptions::default());
        let dims = case.volume.dims();
        let spacing = case.volume.spacing_mm();
        for (number, lesion) in case.truth.lesions.iter().enumerate() {
            let Some(truth) = case.lesion_mask(number) else {
                continue;
            };
            let measures = measure(&truth, dims, spacing).expect("a lesion has voxels");
            assert_eq!(
                measures.voxels, lesion.voxels,
                "{} lesion {number}",
                case.truth.case_id
            );
            if lesion.size.long_cm < 1.0 {
                continue;
            }
            let organ = match lesion.organ {
                Organ::Liver => "liver",
                Organ::Pancreas => "pancreas",
                Organ::KidneyLeft => "kidney_left",
                Organ::KidneyRight => "kidney_right",
            };
            let organ = case.mask(organ).expect("organ mask").labels;
            let extent = measures.extent;
            let bounds = VoxelBox {
                min: [extent[0][0], extent[1][0], extent[2][0]],
                max: [extent[0][1], extent[1][1], extent[2][1]],
            };
            let grown = grow_from_box(&case.volume, bounds, Some(&organ), &GrowOptions::default())
                .expect("grown");
            overlaps.push(dice(&grown.mask, &truth));
        }
    }
    assert!(overlaps.len() >= 3, "only {} lesions grown", overlaps.len());
    // The mask grown from a lesion's box with the defaults overlaps the true one: a lesion
    // darker or brighter than its organ grows to its edge, an isoattenuating one to its rim.
    let mean = overlaps.iter().sum::<f64>() / overlaps.len() as f64;
    assert!(mean > 0.8, "mean Dice {mean:.3} over {overlaps:?}");
}
