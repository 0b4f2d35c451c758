//! Debugging aid for keyslice-tiny: prints, as text, the slab of a case with the most lesion
//! voxels: `T` target lesion missed, `P` predicted lesion where there is none, `#` both,
//! `o` organ, `b` bone, `.` soft tissue.
//!
//!     cargo run --release --example tiny_slab_map -- MODEL_DIR CASE_DIR
use keyslice::infer::embedded::TinyModel;
use keyslice::train::tiny::load_case;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = TinyModel::load(std::path::Path::new(&args[1])).expect("well-formed example input");
    let case = load_case(std::path::Path::new(&args[2]), &model.config)
        .expect("well-formed example input");
    let n = case.grid.spec.size;
    let plane = n * n;
    let slab = (0..case.grid.slabs)
        .max_by_key(|s| {
            case.lesion[s * plane..(s + 1) * plane]
                .iter()
                .filter(|&&v| v > 0)
                .count()
        })
        .expect("well-formed example input");
    println!("slab {slab} of {}", case.grid.slabs);
    let p = model
        .diagnose_grid(&case.grid)
        .expect("well-formed example input");
    let on_slab = |keep: &dyn Fn(usize) -> bool| {
        let values: Vec<f32> = (0..plane)
            .filter(|&q| keep(slab * plane + q))
            .map(|q| case.grid.hu[slab * plane + q])
            .collect();
        (
            values.iter().sum::<f32>() / values.len().max(1) as f32,
            values.len(),
        )
    };
    let predicted_organ = (0..plane)
        .filter(|&q| (0..4).any(|o| p.values[slab][o][q] > 0.5))
        .count();
    let target_organ = (0..plane)
        .filter(|&q| case.organs[slab * plane + q] != 0)
        .count();
    let both = (0..plane)
        .filter(|&q| {
            case.organs[slab * plane + q] != 0 && (0..4).any(|o| p.values[slab][o][q] > 0.5)
        })
        .count();
    let max_lesion = (0..plane)
        .map(|q| {
            (0..4)
                .map(|o| p.values[slab][4 + o][q])
                .fold(0f32, f32::max)
        })
        .fold(0f32, f32::max);
    println!(
        "organ pixels: target {target_organ}, predicted {predicted_organ}, overlap {both}; max lesion probability {max_lesion:.3}"
    );
    println!(
        "lesion target HU {:?}, organ (not lesion) HU {:?}",
        on_slab(&|at| case.lesion[at] > 0),
        on_slab(&|at| case.lesion[at] == 0 && case.organs[at] != 0)
    );
    for row in 0..n {
        let mut line = String::new();
        for column in 0..n {
            let at = slab * plane + column + n * row;
            let t = case.lesion[at];
            let hu = case.grid.hu[at];
            let pred = (0..4)
                .map(|o| p.values[slab][4 + o][column + n * row])
                .fold(0f32, f32::max);
            let organ = case.organs[at];
            line.push(if t > 0 && pred > 0.5 {
                '#'
            } else if t > 0 {
                'T'
            } else if pred > 0.5 {
                'P'
            } else if organ != 0 {
                'o'
            } else if hu > 150.0 {
                'b'
            } else if hu > -500.0 {
                '.'
            } else {
                ' '
            });
        }
        println!("{line}");
    }
}
