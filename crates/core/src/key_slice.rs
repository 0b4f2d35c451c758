//! The key slice as a verifier sees it: one axial slice cut out of a volume, in HU, with its
//! geometry and the diagnoser's box, so that a verifier cannot look elsewhere.

use crate::findings::SliceBox;
use crate::volume::Volume;

/// One axial slice of a volume, in HU, with its pixel spacing and the box the diagnoser
/// gave: all a verifier may see.
#[derive(Clone, Debug, PartialEq)]
pub struct KeySliceImage {
    /// Slice index in the volume.
    pub index: u32,
    /// Columns, rows.
    pub dims: [usize; 2],
    /// Pixel spacing (columns, rows), mm.
    pub spacing_mm: [f64; 2],
    /// Patient position of pixel (0, 0), mm (LPS).
    pub origin_mm: [f64; 3],
    /// Row-major HU values.
    pub hu: Vec<f32>,
    /// The diagnoser's box, if any.
    pub slice_box: Option<SliceBox>,
    /// Distance from the slice to the volume's last slice (along its third axis), mm: where
    /// the slice lies in the scan, for verifiers that use it.
    pub from_top_mm: f64,
}

impl KeySliceImage {
    /// Cuts slice `index` (along the volume's third axis) out of `volume`; `None` when the
    /// index is outside it.
    #[must_use]
    pub fn extract(volume: &Volume, index: u32, slice_box: Option<SliceBox>) -> Option<Self> {
        let [nx, ny, nz] = volume.dims();
        let k = index as usize;
        if k >= nz {
            return None;
        }
        let mut hu = Vec::with_capacity(nx * ny);
        for j in 0..ny {
            for i in 0..nx {
                hu.push(volume.value([i, j, k]).unwrap_or(-1000.0));
            }
        }
        let spacing = volume.spacing_mm();
        Some(Self {
            index,
            dims: [nx, ny],
            spacing_mm: [spacing[0], spacing[1]],
            origin_mm: volume.patient_from_voxel().apply([0.0, 0.0, k as f64]),
            hu,
            slice_box,
            from_top_mm: (nz - 1 - k) as f64 * spacing[2],
        })
    }
}

impl KeySliceImage {
    /// The box in words for a verifier prompt's `{box}`.
    #[must_use]
    pub fn box_words(&self) -> String {
        self.slice_box.as_ref().map_or_else(
            || "no region is marked.".to_string(),
            |b| {
                let [c0, r0, c1, r1] = b.voxels;
                format!(
                    "a white box marks the region of interest, columns {c0}-{c1}, rows {r0}-{r1}."
                )
            },
        )
    }
}
