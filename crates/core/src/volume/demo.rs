//! A small synthetic abdomen for the viewer's demo when no file is given: air, fat, muscle
//! wall, liver with one hypoattenuating lesion, kidneys, aorta and spine, with mild noise.
//! Clearly labelled as synthetic; the full phantom generator (with masks and truth) is
//! `keyslice phantom`'s job.

use super::{Affine, Volume, VolumeInfo, Voxels};

/// Builds the demo volume: 192 × 160 × 80 voxels of 1.5 × 1.5 × 3 mm.
#[must_use]
pub fn demo_abdomen() -> Volume {
    let dims = [192usize, 160, 80];
    let spacing = [1.5, 1.5, 3.0];
    let mut values = Vec::with_capacity(dims.iter().product());
    let mut noise: u32 = 0x2545_F491;
    for k in 0..dims[2] {
        let z = k as f64 * spacing[2]; // 0 (inferior) … 237 mm (superior)
        for j in 0..dims[1] {
            for i in 0..dims[0] {
                // Patient coordinates relative to the centre: x to the patient's left, y posterior.
                let x = (i as f64 - 96.0) * spacing[0];
                let y = (j as f64 - 80.0) * spacing[1];
                let inside = |cx: f64, cy: f64, rx: f64, ry: f64| {
                    ((x - cx) / rx).powi(2) + ((y - cy) / ry).powi(2) < 1.0
                };
                let mut hu = -1000.0;
                if inside(0.0, 0.0, 135.0, 100.0) {
                    hu = -100.0; // fat
                }
                if inside(0.0, 0.0, 125.0, 92.0) && !inside(0.0, 0.0, 115.0, 84.0) {
                    hu = 50.0; // abdominal wall
                }
                let liver_height = (z - 120.0) / 100.0;
                if liver_height.abs() < 1.0
                    && inside(-45.0, -5.0, 70.0 * (1.0 - 0.4 * liver_height.abs()), 55.0)
                {
                    hu = 60.0; // liver (on the patient's right: negative x)
                    if ((x + 60.0).powi(2) + (y + 10.0).powi(2) + (z - 140.0).powi(2)).sqrt() < 18.0
                    {
                        hu = 20.0; // hypoattenuating lesion
                    }
                }
                let kidney_height = (z - 80.0) / 45.0;
                if kidney_height.abs() < 1.0
                    && (inside(-55.0, 45.0, 22.0, 30.0) || inside(55.0, 45.0, 22.0, 30.0))
                {
                    hu = 150.0; // enhancing kidneys
                }
                if inside(15.0, 40.0, 11.0, 11.0) {
                    hu = 180.0; // aorta, just left of the midline (+x is the patient's left)
                }
                if inside(0.0, 72.0, 20.0, 18.0) {
                    hu = 450.0; // vertebral body
                }
                noise = noise.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let jitter = f64::from(noise >> 27) - 16.0;
                let value = if hu > -900.0 { hu + jitter * 0.6 } else { hu };
                // Values lie within −1000…470 HU, so the cast is exact.
                values.push(value.round() as i16);
            }
        }
    }
    let affine = Affine::from_axes(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        spacing,
        [-144.0, -120.0, -120.0],
    );
    let info = VolumeInfo {
        modality: "CT".into(),
        series_uid: String::new(),
        series_description: "Synthetic demo abdomen (not patient data)".into(),
        display_inverted: false,
        body_part: "ABDOMEN".into(),
        burned_in_annotation: false,
        patient: None,
    };
    // The parts are built to agree: dims match the voxel count and the axes are orthogonal.
    Volume::new(dims, affine, Voxels::I16(values), Vec::new(), info)
        .unwrap_or_else(|error| unreachable!("demo volume parts agree: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_has_its_lesion_darker_than_the_liver_around_it() {
        let volume = demo_abdomen();
        // Lesion centre: x = −60 mm, y = −10 mm, z = 140 mm → i = 56, j = 73, k = 46.
        let lesion = volume.value([56, 73, 46]).unwrap_or(f32::NAN);
        let liver = volume.value([56 + 18, 73, 46]).unwrap_or(f32::NAN);
        assert!(
            lesion < 35.0 && liver > 45.0,
            "lesion {lesion}, liver {liver}"
        );
    }
}
