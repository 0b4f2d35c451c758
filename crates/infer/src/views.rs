//! What a model is shown, the same for every backend: the CT as frames for the diagnoser,
//! the key slice with its box drawn for the verifier, and the prompts filled in.
//!
//! The verifier sees the whole key slice with the diagnoser's box drawn on it as a white
//! one-pixel outline, not a crop of the box: naming a location (hepatic segment, kidney pole,
//! pancreatic head or tail) and an attenuation relative to the organ needs the organ around
//! the lesion, and a size needs the slice's scale; the outline says where to look, and the
//! prompt asks for one line about the region inside it.

use rayon::prelude::*;

use keyslice_core::findings::SliceBox;
use keyslice_core::key_slice::KeySliceImage;
use keyslice_core::volume::Volume;
use keyslice_io::frames::{frame_grey, sample_slices, window_grey};

use crate::InferError;

/// The CT as the diagnoser sees it: `slices[f]` is the volume slice that frame `f` shows;
/// each frame is `columns × rows` 8-bit grey pixels in the soft-tissue window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtFrames {
    /// Frame → slice index.
    pub slices: Vec<usize>,
    /// Pixels per row.
    pub columns: usize,
    /// Rows per frame.
    pub rows: usize,
    /// Row-major grey pixels per frame.
    pub grey: Vec<Vec<u8>>,
}

/// Samples `count` axial slices of `volume` evenly from inferior to superior.
pub fn ct_frames(volume: &Volume, count: usize) -> Result<CtFrames, InferError> {
    let [columns, rows, slices] = volume.dims();
    let slices = sample_slices(slices, count, None);
    if slices.is_empty() {
        return Err(InferError::Volume("the volume has no slices".into()));
    }
    let grey = slices.par_iter().map(|&s| frame_grey(volume, s)).collect();
    Ok(CtFrames {
        slices,
        columns,
        rows,
        grey,
    })
}

/// The diagnosis prompt: `{frames}` (the frame → slice table), `{columns}` and `{rows}`
/// filled in.
#[must_use]
pub fn diagnose_prompt(template: &str, frames: &CtFrames) -> String {
    let table: Vec<String> = frames.slices.iter().map(ToString::to_string).collect();
    template
        .replace("{frames}", &format!("[{}]", table.join(", ")))
        .replace("{columns}", &frames.columns.to_string())
        .replace("{rows}", &frames.rows.to_string())
}

/// The key slice as the verifier sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifierView {
    /// Pixels per row.
    pub columns: usize,
    /// Rows.
    pub rows: usize,
    /// Row-major grey pixels, the box outlined in white.
    pub grey: Vec<u8>,
    /// The verification prompt, `{slice}` and `{box}` filled in.
    pub prompt: String,
}

/// The key slice in the soft-tissue window with its box drawn, and the prompt.
#[must_use]
pub fn verifier_view(slice: &KeySliceImage, template: &str) -> VerifierView {
    let [columns, rows] = slice.dims;
    let mut grey: Vec<u8> = slice.hu.iter().map(|&hu| window_grey(hu)).collect();
    if let Some(slice_box) = &slice.slice_box {
        outline(&mut grey, columns, rows, slice_box);
    }
    let prompt = template
        .replace("{slice}", &slice.index.to_string())
        .replace("{box}", &slice.box_words());
    VerifierView {
        columns,
        rows,
        grey,
        prompt,
    }
}

/// Draws the border pixels of `slice_box` (clipped to the image) in white.
fn outline(grey: &mut [u8], columns: usize, rows: usize, slice_box: &SliceBox) {
    if columns == 0 || rows == 0 {
        return;
    }
    let [c0, r0, c1, r1] = slice_box.voxels.map(|value| value as usize);
    if c0 > c1 || r0 > r1 || c0 >= columns || r0 >= rows {
        return;
    }
    let (c1, r1) = (c1.min(columns - 1), r1.min(rows - 1));
    for column in c0..=c1 {
        grey[r0 * columns + column] = 255;
        grey[r1 * columns + column] = 255;
    }
    for row in r0..=r1 {
        grey[row * columns + c0] = 255;
        grey[row * columns + c1] = 255;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_box_is_outlined_and_its_inside_kept() {
        let slice = KeySliceImage {
            index: 7,
            dims: [6, 5],
            spacing_mm: [1.0, 1.0],
            origin_mm: [0.0; 3],
            hu: vec![40.0; 30],
            slice_box: Some(SliceBox {
                voxels: [1, 1, 4, 3],
                mm: None,
            }),
            from_top_mm: 0.0,
        };
        let view = verifier_view(&slice, "slice {slice}; {box}");
        let at = |column: usize, row: usize| view.grey[row * 6 + column];
        assert_eq!(
            (at(1, 1), at(4, 3), at(2, 1), at(1, 2)),
            (255, 255, 255, 255)
        );
        assert_eq!(
            at(2, 2),
            window_grey(40.0),
            "the inside is the slice itself"
        );
        assert_eq!(at(0, 0), window_grey(40.0));
        assert!(
            view.prompt.starts_with("slice 7; a white box"),
            "{}",
            view.prompt
        );
    }
}
