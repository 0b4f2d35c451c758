//! The evidence reader: keyslice-tiny's own verifier, with weights of its own that share
//! nothing with the diagnoser's networks.
//!
//! It reads one claim at a time in three planes through the centre of the claim's box: the
//! axial key slice, and the coronal and sagittal reformats through the box centre, each
//! resampled to a square of [`EvidenceConfig::side`] pixels of [`EvidenceConfig::pixel_mm`]
//! (a field of about 10 cm, wide enough for a 6 cm tumor and the organ around it). The
//! reformats show the lesion's extent along the body axis: a vessel that looks round on one
//! axial slice is a tube in them. A network of the diagnoser's shape ([`SliceNet`]) reads
//! the stacked views and draws, on the axial view, organ and lesion masks and the lesion's
//! attenuation; the decoding measures each lesion as a ruler would. A lesion counts as
//! inside the box when it holds the box centre or a third of its section lies in the box.
//!
//! The description names what is inside the box (the lesion's organ, attenuation and size,
//! never its segment or pole: one view of 10 cm cannot tell those), the organ under the box
//! as clean when no lesion is there, and says whether the box holds a lesion.

use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};

use keyslice_core::findings::{Findings, Organ, SliceBox, TumorPresence};
use keyslice_core::volume::Volume;

use super::decode::{DecodeRule, FoundLesion, Probabilities, find_lesions};
use super::input::window;
use super::net::{ORGAN, SliceNet, probabilities_of};

/// The evidence reader's settings, saved in `config.json` as `"evidence"`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvidenceConfig {
    /// Pixels per side of each view (a multiple of 8).
    pub side: usize,
    /// Pixel size of the views, mm.
    pub pixel_mm: f64,
    /// Channel widths of its network at full, ½, ¼, ⅛ resolution.
    pub widths: [usize; 4],
    /// Lesion probability from which a view pixel is lesion.
    pub threshold: f32,
}

impl EvidenceConfig {
    /// The settings a fresh training run starts from.
    #[must_use]
    pub fn initial() -> Self {
        Self {
            side: 48,
            pixel_mm: 2.0,
            widths: [8, 16, 24, 32],
            threshold: 0.5,
        }
    }

    /// Input channels for `windows` windows: three views in each, then the box centre's
    /// left–right and front–back place in the scan.
    #[must_use]
    pub fn inputs(windows: usize) -> usize {
        3 * windows + 2
    }

    /// Why these settings cannot run, if they cannot.
    #[must_use]
    pub fn problem(&self) -> Option<String> {
        if self.side == 0 || !self.side.is_multiple_of(8) || self.side > 256 {
            return Some(format!(
                "the evidence views' side ({}) must be a multiple of 8 up to 256",
                self.side
            ));
        }
        if !(self.pixel_mm.is_finite() && (0.25..=10.0).contains(&self.pixel_mm)) {
            return Some(format!(
                "the evidence views' pixel ({} mm) must be 0.25–10 mm",
                self.pixel_mm
            ));
        }
        None
    }
}

/// Where a claim is read: the box centre (fractional voxel column and row) on the key
/// slice, and the box in view pixels when there is one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClaimPlace {
    /// Voxel column of the centre.
    pub column: f64,
    /// Voxel row of the centre.
    pub row: f64,
    /// The key slice.
    pub slice: usize,
    /// The box's voxel corners, when given.
    pub corners: Option<[f64; 4]>,
}

impl ClaimPlace {
    /// The place of a claim on slice `index` with `slice_box` (the slice's centre without
    /// one).
    #[must_use]
    pub fn of(volume: &Volume, index: u32, slice_box: Option<&SliceBox>) -> Self {
        let [nx, ny, _] = volume.dims();
        let corners = slice_box.map(|b| b.voxels.map(f64::from));
        let (column, row) = corners.map_or(
            ((nx as f64 - 1.0) / 2.0, (ny as f64 - 1.0) / 2.0),
            |[c0, r0, c1, r1]| (f64::midpoint(c0, c1), f64::midpoint(r0, r1)),
        );
        Self {
            column,
            row,
            slice: index as usize,
            corners,
        }
    }
}

/// The volume's value at fractional voxel `at` (trilinear), air outside it.
fn sample(volume: &Volume, at: [f64; 3]) -> f32 {
    let dims = volume.dims();
    let mut low = [0usize; 3];
    let mut weight = [0f64; 3];
    for axis in 0..3 {
        let value = at[axis];
        if !value.is_finite() || value < -0.5 || value > dims[axis] as f64 - 0.5 {
            return -1000.0;
        }
        let clamped = value.clamp(0.0, (dims[axis] - 1) as f64);
        let floor = clamped.floor();
        low[axis] = floor as usize;
        weight[axis] = clamped - floor;
    }
    let mut total = 0f64;
    for corner in 0..8usize {
        let mut voxel = low;
        let mut share = 1.0;
        for axis in 0..3 {
            let high = corner >> axis & 1 == 1;
            if high {
                voxel[axis] = (voxel[axis] + 1).min(dims[axis] - 1);
                share *= weight[axis];
            } else {
                share *= 1.0 - weight[axis];
            }
        }
        if share > 0.0 {
            total += share * f64::from(volume.value(voxel).unwrap_or(-1000.0));
        }
    }
    total as f32
}

/// The fractional voxel each pixel of the three views shows: `[view][row * side + column]`,
/// views axial (columns left–right, rows front–back), coronal (columns left–right, rows
/// along the body axis) and sagittal (columns along the body axis, rows front–back), all
/// centred on `place`.
#[must_use]
pub fn view_voxels(
    volume: &Volume,
    place: &ClaimPlace,
    config: &EvidenceConfig,
) -> [Vec<[f64; 3]>; 3] {
    let spacing = volume.spacing_mm();
    let side = config.side;
    let step = |axis: usize| config.pixel_mm / spacing[axis].abs().max(1e-6);
    let offset = |pixel: usize| pixel as f64 - side as f64 / 2.0 + 0.5;
    let centre = [place.column, place.row, place.slice as f64];
    let mut views: [Vec<[f64; 3]>; 3] = Default::default();
    for row in 0..side {
        for column in 0..side {
            let (a, b) = (offset(column), offset(row));
            views[0].push([centre[0] + a * step(0), centre[1] + b * step(1), centre[2]]);
            views[1].push([centre[0] + a * step(0), centre[1], centre[2] + b * step(2)]);
            views[2].push([centre[0], centre[1] + b * step(1), centre[2] + a * step(2)]);
        }
    }
    views
}

/// The network's input for one claim: each view in each window, then two planes holding the
/// box centre's distance from the scan's middle (left–right, front–back) in units of 20 cm.
#[must_use]
pub fn evidence_input(
    volume: &Volume,
    place: &ClaimPlace,
    config: &EvidenceConfig,
    windows: &[[f32; 2]],
) -> Vec<f32> {
    let plane = config.side * config.side;
    let views = view_voxels(volume, place, config);
    let mut input = Vec::with_capacity(EvidenceConfig::inputs(windows.len()) * plane);
    for view in &views {
        let hu: Vec<f32> = view.iter().map(|&at| sample(volume, at)).collect();
        for &w in windows {
            input.extend(hu.iter().map(|&value| window(value, w)));
        }
    }
    let [nx, ny, _] = volume.dims();
    let spacing = volume.spacing_mm();
    let x = (place.column - (nx as f64 - 1.0) / 2.0) * spacing[0] / 200.0;
    let y = (place.row - (ny as f64 - 1.0) / 2.0) * spacing[1] / 200.0;
    input.extend(std::iter::repeat_n(x as f32, plane));
    input.extend(std::iter::repeat_n(y as f32, plane));
    input
}

/// What the evidence reader says of one claim: the local findings (organ, attenuation and
/// size of a lesion inside the box; `inside_box` answered when there is a box).
pub fn read_claim(
    network: &SliceNet,
    config: &EvidenceConfig,
    windows: &[[f32; 2]],
    volume: &Volume,
    place: &ClaimPlace,
    device: &Device,
) -> candle_core::Result<Findings> {
    let side = config.side;
    let input = evidence_input(volume, place, config, windows);
    let x = Tensor::from_vec(
        input,
        (1, EvidenceConfig::inputs(windows.len()), side, side),
        device,
    )?;
    let values = probabilities_of(&network.forward(&x)?)?
        .into_iter()
        .next()
        .unwrap_or_default();
    Ok(findings_in_box(values, config, volume, place))
}

/// The findings the axial view's probabilities (`values[channel][pixel]`) give for the claim
/// at `place`.
#[must_use]
pub fn findings_in_box(
    values: Vec<Vec<f32>>,
    config: &EvidenceConfig,
    volume: &Volume,
    place: &ClaimPlace,
) -> Findings {
    let side = config.side;
    let spacing = volume.spacing_mm();
    let organ_at_centre = {
        let centre = (side / 2) * side + side / 2;
        let around = [centre, centre - 1, centre - side, centre - side - 1];
        Organ::ALL
            .into_iter()
            .enumerate()
            .map(|(n, organ)| {
                let channel = &values[ORGAN.start + n];
                let mean = around.iter().map(|&p| channel[p]).sum::<f32>() / 4.0;
                (organ, mean)
            })
            .filter(|(_, mean)| *mean >= 0.5)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(organ, _)| organ)
    };
    let probabilities = Probabilities {
        size: side,
        pixel_mm: config.pixel_mm,
        slab_mm: spacing[2].abs(),
        values: vec![values],
    };
    let rule = DecodeRule {
        threshold: config.threshold,
        min_voxels: 2,
        link_slabs: 1,
        link_pixels: 0,
    };
    let found = find_lesions(&probabilities, rule);
    // The box in view pixels (pixel centres inside it), at least the centre pixel.
    let to_view = |voxel: f64, centre: f64, axis: usize| {
        (voxel - centre) * spacing[axis].abs() / config.pixel_mm + side as f64 / 2.0 - 0.5
    };
    let (low, high) = place.corners.map_or(
        ([side as f64 / 2.0 - 1.0; 2], [side as f64 / 2.0; 2]),
        |[c0, r0, c1, r1]| {
            (
                [
                    to_view(c0 - 0.5, place.column, 0),
                    to_view(r0 - 0.5, place.row, 1),
                ],
                [
                    to_view(c1 + 0.5, place.column, 0),
                    to_view(r1 + 0.5, place.row, 1),
                ],
            )
        },
    );
    let centre_pixels = [
        (side / 2) * side + side / 2,
        (side / 2) * side + side / 2 - 1,
        (side / 2 - 1) * side + side / 2,
        (side / 2 - 1) * side + side / 2 - 1,
    ];
    let inside = |found: &FoundLesion| {
        let pixels = found.voxels.len().max(1) as f64;
        let within = found
            .voxels
            .iter()
            .filter(|(_, pixel)| {
                let (column, row) = ((pixel % side) as f64, (pixel / side) as f64);
                (low[0] - 0.5..=high[0] + 0.5).contains(&column)
                    && (low[1] - 0.5..=high[1] + 0.5).contains(&row)
            })
            .count() as f64;
        within / pixels >= 1.0 / 3.0
            || found
                .voxels
                .iter()
                .any(|(_, pixel)| centre_pixels.contains(pixel))
    };
    let mut findings = Findings::default();
    for organ in Organ::ALL {
        findings.organ_mut(organ).tumor = TumorPresence::NotMentioned;
    }
    let mut any = false;
    for lesion in found.iter().filter(|found| inside(found)) {
        any = true;
        let entry = findings.organ_mut(lesion.organ);
        entry.tumor = TumorPresence::Yes;
        let mut described = lesion.lesion.clone();
        described.location = None;
        entry.lesions.push(described);
    }
    if !any && let Some(organ) = organ_at_centre {
        findings.organ_mut(organ).tumor = TumorPresence::No;
    }
    findings.inside_box = place.corners.map(|_| {
        if any {
            TumorPresence::Yes
        } else {
            TumorPresence::No
        }
    });
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyslice_core::volume::{Affine, VolumeInfo, Voxels};

    fn volume(dims: [usize; 3], spacing: [f64; 3], value: impl Fn([usize; 3]) -> f32) -> Volume {
        let mut hu = Vec::new();
        for k in 0..dims[2] {
            for j in 0..dims[1] {
                for i in 0..dims[0] {
                    hu.push(value([i, j, k]));
                }
            }
        }
        Volume::new(
            dims,
            Affine::from_axes(
                [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                spacing,
                [0.0; 3],
            ),
            Voxels::F32(hu),
            Vec::new(),
            VolumeInfo::default(),
        )
        .expect("volume")
    }

    #[test]
    fn the_three_views_cross_at_the_box_centre_and_follow_the_body_axis() {
        // A column of bright voxels along z at (10, 12), everything else water.
        let ct = volume([24, 24, 30], [2.0, 2.0, 4.0], |[i, j, _]| {
            if (i, j) == (10, 12) { 500.0 } else { 0.0 }
        });
        let config = EvidenceConfig {
            side: 8,
            pixel_mm: 2.0,
            ..EvidenceConfig::initial()
        };
        let place = ClaimPlace::of(
            &ct,
            15,
            Some(&SliceBox {
                voxels: [9, 11, 11, 13],
                mm: None,
            }),
        );
        assert_eq!((place.column, place.row, place.slice), (10.0, 12.0, 15));
        let views = view_voxels(&ct, &place, &config);
        // Pixel (4, 4) of each view is half a pixel past the centre in both directions.
        let at = |view: usize, column: usize, row: usize| views[view][row * 8 + column];
        let close = |a: [f64; 3], b: [f64; 3]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9);
        assert!(close(at(0, 4, 4), [10.5, 12.5, 15.0]));
        assert!(close(at(1, 4, 4), [10.5, 12.0, 15.25]));
        assert!(close(at(2, 4, 4), [10.0, 12.5, 15.25]));
        // The column is a line down the coronal view's rows and across the sagittal's columns.
        let input = evidence_input(&ct, &place, &config, &[[0.0, 1000.0]]);
        let coronal = &input[64..128];
        let sagittal = &input[128..192];
        for n in 0..8 {
            assert!(
                coronal[n * 8 + 3] > 0.6 && coronal[n * 8 + 3] < 0.8,
                "{coronal:?}"
            );
            assert!(sagittal[3 * 8 + n] > 0.6, "{sagittal:?}");
            assert!((coronal[n * 8] - 0.5).abs() < 1e-6);
        }
        // Outside the volume the views show air.
        assert!((sample(&ct, [-3.0, 0.0, 0.0]) + 1000.0).abs() < 1e-6);
        // The position planes say where the box centre is, in units of 20 cm.
        let x = input[3 * 64];
        assert!((x - ((10.0 - 11.5) * 2.0 / 200.0) as f32).abs() < 1e-6);
    }

    #[test]
    fn a_lesion_counts_inside_the_box_by_its_share_or_the_centre() {
        let ct = volume([40, 40, 10], [2.0, 2.0, 2.0], |_| 0.0);
        let config = EvidenceConfig {
            side: 16,
            pixel_mm: 2.0,
            ..EvidenceConfig::initial()
        };
        let channels = super::super::net::OUTPUTS;
        let blank = || vec![vec![0f32; 256]; channels];
        // Liver under the whole view; a liver lesion of 3 × 3 pixels at (2..5, 2..5), far
        // from the centre (8, 8).
        let mut values = blank();
        values[ORGAN.start] = vec![0.9; 256];
        for row in 2..5 {
            for column in 2..5 {
                values[super::super::net::LESION.start][row * 16 + column] = 0.9;
                values[super::super::net::ATTENUATION.start][row * 16 + column] = 0.9;
            }
        }
        let small_box = SliceBox {
            voxels: [19, 19, 20, 20],
            mm: None,
        };
        let place = ClaimPlace::of(&ct, 5, Some(&small_box));
        let clean = findings_in_box(values.clone(), &config, &ct, &place);
        assert_eq!(clean.inside_box, Some(TumorPresence::No));
        assert_eq!(clean.organ(Organ::Liver).tumor, TumorPresence::No);
        assert_eq!(
            clean.organ(Organ::Pancreas).tumor,
            TumorPresence::NotMentioned
        );
        // A box reaching over the lesion holds it.
        let wide_box = SliceBox {
            voxels: [12, 12, 27, 27],
            mm: None,
        };
        let place = ClaimPlace::of(&ct, 5, Some(&wide_box));
        let seen = findings_in_box(values, &config, &ct, &place);
        assert_eq!(seen.inside_box, Some(TumorPresence::Yes));
        let liver = seen.organ(Organ::Liver);
        assert_eq!(liver.tumor, TumorPresence::Yes);
        let lesion = &liver.lesions[0];
        assert_eq!(lesion.location, None, "one view names no segment");
        assert_eq!(lesion.size.map(|size| size.long_cm), Some(0.8));
        assert_eq!(
            lesion.attenuation,
            Some(keyslice_core::findings::Attenuation::Hypo)
        );
    }
}
