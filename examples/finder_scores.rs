//! Debugging aid: per case and organ, the finder's largest slab probability and whether the
//! organ has a tumor (tab-separated), for choosing or checking thresholds.
//!
//! `cargo run --release --example finder_scores -- MODEL_DIR CASES_DIR`

use keyslice::infer::embedded::TinyModel;
use keyslice::infer::embedded::grid::ModelGrid;
use keyslice::infer::embedded::organs::Reading;
use keyslice::train::tiny::{case_folders, load_case};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(model_dir), Some(cases_dir)) = (args.get(1), args.get(2)) else {
        return Err("usage: finder_scores MODEL_DIR CASES_DIR".into());
    };
    let model = TinyModel::load(std::path::Path::new(model_dir))?;
    let finder = model
        .config
        .finder
        .clone()
        .ok_or("the checkpoint has no finder")?;
    let fine_config = keyslice::infer::embedded::TinyConfig {
        grid: finder.grid,
        ..model.config.clone()
    };
    println!("case\torgan\tlargest\ttumor\tslabs_seen\ttrue_slabs");
    for folder in case_folders(std::path::Path::new(cases_dir))? {
        let case = load_case(&folder, &fine_config)?;
        let volume = keyslice::io::nifti::read_nifti(&folder.join("ct.nii.gz"))?;
        let coarse = ModelGrid::from_volume(&volume, model.config.grid);
        let probabilities = model.diagnose_grid(&coarse)?;
        let (answers, _) = model.find(&case.grid, &probabilities, Reading::Alternate)?;
        let plane = case.grid.spec.size * case.grid.spec.size;
        for organ in 0..4 {
            let mine: Vec<_> = answers.iter().filter(|a| a.organ == organ).collect();
            let largest = mine.iter().map(|a| a.probability).fold(0f32, f32::max);
            let truth = case.lesion.contains(&(organ as u8 + 1));
            let true_slabs = (0..case.grid.slabs)
                .filter(|s| {
                    case.organs[s * plane..(s + 1) * plane]
                        .iter()
                        .filter(|&&b| b & (1 << organ) != 0)
                        .count()
                        >= 4
                })
                .count();
            println!(
                "{}\t{organ}\t{largest:.5}\t{}\t{}\t{true_slabs}",
                case.case_id,
                u8::from(truth),
                mine.len()
            );
        }
    }
    Ok(())
}
