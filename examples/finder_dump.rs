//! Debugging aid: per case, organ and slab, the finder's probability through the model's
//! organ masks (`p_pred`) and through the true masks (`p_true`), the lesion pixels on that
//! slab and how many of them the model's mask covers, the mask sizes, and the lesion grown
//! from the answer (pixels, contrast in HU); tab-separated. `eval/finder_masks.py` reads
//! it.
//!
//! `cargo run --release --example finder_dump -- MODEL_DIR CASES_DIR > dump.tsv`

use keyslice::infer::embedded::TinyModel;
use keyslice::infer::embedded::grid::ModelGrid;
use keyslice::infer::embedded::organs::Reading;
use keyslice::train::tiny::{case_folders, load_case};

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(model_dir), Some(cases_dir)) = (args.get(1), args.get(2)) else {
        return Err("usage: finder_dump MODEL_DIR CASES_DIR".into());
    };
    let model = TinyModel::load(std::path::Path::new(model_dir))?;
    let finder = model.config.finder.clone().ok_or("no finder")?;
    let fine_config = keyslice::infer::embedded::TinyConfig {
        grid: finder.grid,
        ..model.config.clone()
    };
    println!(
        "case\torgan\tslab\tp_pred\tp_true\tlesion_px\tcovered_px\tpred_px\ttrue_px\tgrown_px\tcontrast"
    );
    for folder in case_folders(std::path::Path::new(cases_dir))? {
        let case = load_case(&folder, &fine_config)?;
        let volume = keyslice::io::nifti::read_nifti(&folder.join("ct.nii.gz"))?;
        let coarse = ModelGrid::from_volume(&volume, model.config.grid);
        let probabilities = model.diagnose_grid(&coarse)?;
        let (answers, masks) = model.find(&case.grid, &probabilities, Reading::Alternate)?;
        let plane = case.grid.spec.size * case.grid.spec.size;
        let true_masks: Vec<Vec<bool>> = (0..case.grid.slabs * 4)
            .map(|i| {
                let (s, o) = (i / 4, i % 4);
                case.organs[s * plane..(s + 1) * plane]
                    .iter()
                    .map(|&b| b & (1 << o) != 0)
                    .collect()
            })
            .collect();
        let true_answers = model.answers(&case.grid, &true_masks)?;
        let references =
            keyslice::infer::embedded::organ_references(&case.grid, &masks, [true; 4], &[]);
        for slab in 0..case.grid.slabs {
            for organ in 0..4 {
                let p = |list: &[keyslice::infer::embedded::finder::SlabAnswer]| {
                    list.iter()
                        .find(|a| a.slab == slab && a.organ == organ)
                        .map_or(-1.0, |a| a.probability)
                };
                let lesion: Vec<usize> = (0..plane)
                    .filter(|&px| case.lesion[slab * plane + px] == organ as u8 + 1)
                    .collect();
                let mask = &masks[slab * 4 + organ];
                let covered = lesion.iter().filter(|&&px| mask[px]).count();
                let (grown_px, contrast) = answers
                    .iter()
                    .find(|a| a.slab == slab && a.organ == organ)
                    .map_or((0, 0.0), |a| {
                        let (px, c) = keyslice::infer::embedded::finder::grow_lesion(
                            &case.grid,
                            &masks[slab * 4 + organ],
                            a,
                            references[slab * 4 + organ],
                        );
                        (px.len(), c)
                    });
                let pred_px = mask.iter().filter(|&&m| m).count();
                let true_px = true_masks[slab * 4 + organ].iter().filter(|&&m| m).count();
                if pred_px == 0 && true_px == 0 {
                    continue;
                }
                println!(
                    "{}\t{organ}\t{slab}\t{:.5}\t{:.5}\t{}\t{covered}\t{pred_px}\t{true_px}\t{grown_px}\t{contrast:.1}",
                    case.case_id,
                    p(&answers),
                    p(&true_answers),
                    lesion.len()
                );
            }
        }
    }
    Ok(())
}
