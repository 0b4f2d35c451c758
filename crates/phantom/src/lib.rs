//! Synthetic abdominal CT phantoms with masks and ground truth, for the embedded model's
//! training and for demos: deterministic from a seed, in the AbdomenAtlas layout.
//!
//! One case: [`Anatomy`] draws the organs (liver with vessels and gallbladder, spleen, kidneys
//! with cortex and medulla, pancreas, stomach and bowel, aorta, cava, spine, muscles, fat);
//! 0–3 tumors (0.5–6 cm, hypo-, iso- or hyperattenuating) are placed in liver segments,
//! pancreas head/body/tail or kidney poles; every voxel centre is classified, blurred in-plane
//! (partial volume) and given Gaussian noise. The truth ([`PhantomTruth`]) is measured on the
//! voxel grid itself: lesion slice extents, the key slice (axial slice of largest lesion
//! area), the box on it, and Findings whose sizes are the lesions' axial diameters.
//!
//! Writing the files is [`write`]'s job; this module builds volumes and truth in memory.
//! Depends on the core (`volume`, `findings`, `scoring`); knows nothing of models or UI.

pub mod anatomy;
pub mod write;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use anatomy::{Anatomy, Ellipsoid, Tissue, tissue_hu};
use keyslice_core::findings::{
    Attenuation, Evidence, Findings, KeySlice, KidneyPole, Lesion, LesionExtent, LesionSize,
    Location, Organ, PancreasPart, SliceBox, SliceRange, TumorPresence, write_report,
};
use keyslice_core::rng::{self, Rng, normal_at};
use keyslice_core::volume::{Affine, LabelVolume, Volume, VolumeInfo, Voxels};

/// Version of the generator; recorded in the manifest so datasets can be told apart.
pub const GENERATOR_VERSION: u32 = 1;

/// How phantoms are sampled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhantomOptions {
    /// In-plane matrix (512 for a clinical grid). Pixel spacing is drawn so that the field of
    /// view is that of a 512 matrix at 0.6–0.9 mm, whatever the matrix.
    pub matrix: usize,
    /// Slice spacing in mm; `None` draws one of 1, 1.25, 1.5, 2, 2.5, 3, 5 mm per case.
    pub slice_mm: Option<f64>,
}

impl Default for PhantomOptions {
    fn default() -> Self {
        Self {
            matrix: 512,
            slice_mm: None,
        }
    }
}

/// One lesion as placed, with what the grid shows of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhantomLesion {
    /// Organ it belongs to.
    pub organ: Organ,
    /// Location as a report states it.
    pub location: Location,
    /// Axial long and short diameters.
    pub size: LesionSize,
    /// Attenuation relative to the organ.
    pub attenuation: Attenuation,
    /// Mean lesion value before noise, HU.
    pub hu: f64,
    /// The organ's parenchyma value, HU.
    pub organ_hu: f64,
    /// Centre (patient LPS, mm).
    pub centre_mm: [f64; 3],
    /// Semi-axes (mm): in-plane long, in-plane short, along z.
    pub radii_mm: [f64; 3],
    /// In-plane rotation, radians.
    pub angle_rad: f64,
    /// Voxels on the grid.
    pub voxels: usize,
    /// First, last and largest axial slice.
    pub first_slice: u32,
    /// Last axial slice.
    pub last_slice: u32,
    /// Axial slice with the largest area.
    pub largest_slice: u32,
}

/// A case's ground truth, as written to `truth.json` (read back by `io::cases`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhantomTruth {
    /// Case identifier.
    pub case_id: String,
    /// The findings: presence per organ, lesions, key slice and box.
    pub findings: Findings,
    /// The structured report written from `findings`.
    pub report: String,
    /// One extent per lesion (organ, slices, largest slice).
    pub lesion_extents: Vec<LesionExtent>,
    /// Every lesion in detail.
    pub lesions: Vec<PhantomLesion>,
    /// Grid: columns, rows, slices.
    pub dims: [usize; 3],
    /// Voxel spacing, mm.
    pub spacing_mm: [f64; 3],
    /// Noise standard deviation, HU.
    pub noise_hu: f64,
    /// Seed of the set and the case's index in it.
    pub seed: u64,
    /// Index within the set.
    pub index: u32,
}

/// A generated case: CT, masks (AbdomenAtlas names, 0/1, built one at a time on request so
/// a 512×512×300 case does not hold twelve mask copies at once), and truth.
pub struct PhantomCase {
    /// The CT in HU.
    pub volume: Volume,
    /// Ground truth.
    pub truth: PhantomTruth,
    /// Structure code per voxel (see `STRUCTURES`).
    structures: Vec<u8>,
    /// Lesion number + 1 per voxel, 0 outside lesions.
    lesion_ids: Vec<u8>,
    /// Mask name of each lesion, in lesion-number order.
    lesion_masks: Vec<&'static str>,
}

impl PhantomCase {
    /// Names of the masks, as AbdomenAtlas names them: organs and vessels, then the three
    /// lesion masks (written even when empty, so a reader sees "no lesion", not "unknown").
    #[must_use]
    pub fn mask_names() -> Vec<&'static str> {
        STRUCTURES
            .iter()
            .map(|(_, name)| *name)
            .chain(["liver_lesion", "pancreatic_lesion", "kidney_lesion"])
            .collect()
    }

    /// Lesion `number`'s own mask (1 in it, 0 elsewhere) on the CT grid, in the order of
    /// [`PhantomTruth::lesions`]: the voxels of the lesion its centre lies in. `None` past the
    /// last lesion, or when another lesion covers its centre.
    #[must_use]
    pub fn lesion_mask(&self, number: usize) -> Option<Vec<u8>> {
        let lesion = self.truth.lesions.get(number)?;
        let voxel = self
            .volume
            .patient_from_voxel()
            .inverse()?
            .apply(lesion.centre_mm)
            .map(f64::round);
        let dims = self.volume.dims();
        if (0..3).any(|a| voxel[a] < 0.0 || voxel[a] >= dims[a] as f64) {
            return None;
        }
        let [x, y, z] = voxel.map(|c| c as usize);
        let id = self.lesion_ids[x + dims[0] * (y + dims[1] * z)];
        let organ = lesion_mask_name(lesion.organ);
        (id != 0 && self.lesion_masks.get(usize::from(id) - 1) == Some(&organ)).then(|| {
            self.lesion_ids
                .par_iter()
                .map(|value| u8::from(*value == id))
                .collect()
        })
    }

    /// The binary mask `name` on the CT grid; `None` for a name not in [`Self::mask_names`].
    #[must_use]
    pub fn mask(&self, name: &str) -> Option<LabelVolume> {
        let labels: Vec<u8> =
            if let Some((code, _)) = STRUCTURES.iter().find(|(_, known)| *known == name) {
                self.structures
                    .par_iter()
                    .map(|value| u8::from(value == code))
                    .collect()
            } else if ["liver_lesion", "pancreatic_lesion", "kidney_lesion"].contains(&name) {
                let ids: Vec<u8> = (1..=self.lesion_masks.len() as u8)
                    .filter(|id| self.lesion_masks[usize::from(*id) - 1] == name)
                    .collect();
                self.lesion_ids
                    .par_iter()
                    .map(|id| u8::from(*id != 0 && ids.contains(id)))
                    .collect()
            } else {
                return None;
            };
        Some(LabelVolume {
            name: name.to_string(),
            dims: self.volume.dims(),
            patient_from_voxel: *self.volume.patient_from_voxel(),
            labels,
        })
    }
}

/// Structure codes in the generator's label buffer, and their AbdomenAtlas mask names.
const STRUCTURES: [(u8, &str); 9] = [
    (1, "liver"),
    (2, "pancreas"),
    (3, "kidney_left"),
    (4, "kidney_right"),
    (5, "spleen"),
    (6, "aorta"),
    (7, "gall_bladder"),
    (8, "stomach"),
    (9, "postcava"),
];

fn structure_code(tissue: Tissue) -> u8 {
    match tissue {
        Tissue::Liver | Tissue::LiverVessel => 1,
        Tissue::Pancreas => 2,
        Tissue::KidneyLeftCortex | Tissue::KidneyLeftMedulla => 3,
        Tissue::KidneyRightCortex | Tissue::KidneyRightMedulla => 4,
        Tissue::Spleen => 5,
        Tissue::Aorta => 6,
        Tissue::Gallbladder => 7,
        Tissue::Cava => 9,
        _ => 0,
    }
}

fn organ_code(organ: Organ) -> u8 {
    match organ {
        Organ::Liver => 1,
        Organ::Pancreas => 2,
        Organ::KidneyLeft => 3,
        Organ::KidneyRight => 4,
    }
}

/// Lesion mask names (AbdomenAtlas); both kidneys share one.
fn lesion_mask_name(organ: Organ) -> &'static str {
    match organ {
        Organ::Liver => "liver_lesion",
        Organ::Pancreas => "pancreatic_lesion",
        Organ::KidneyLeft | Organ::KidneyRight => "kidney_lesion",
    }
}

/// A lesion before voxelisation.
struct Placed {
    organ: Organ,
    shape: Ellipsoid,
    /// Value at the centre, HU; `rim_hu` is added in the outer shell (iso lesions).
    hu: f64,
    rim_hu: f64,
    organ_hu: f64,
    attenuation: Attenuation,
    location: Location,
}

/// The case identifier for `index` in the set of `seed`.
#[must_use]
pub fn case_id(seed: u64, index: u32) -> String {
    format!("PHANTOM_{seed}_{index:04}")
}

/// Generates case `index` of the set with `seed`.
#[must_use]
pub fn generate(seed: u64, index: u32, options: PhantomOptions) -> PhantomCase {
    let case_seed = rng::mix(seed ^ rng::mix(u64::from(index) + 1));
    let mut rng = Rng::new(case_seed);
    let matrix = options.matrix.max(16);
    let fov_mm = 512.0 * rng.uniform(0.6, 0.9);
    let pixel_mm = fov_mm / matrix as f64;
    let slice_mm = options.slice_mm.unwrap_or_else(|| {
        [1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 5.0][rng.weighted(&[2.0, 1.0, 1.0, 1.5, 1.5, 1.5, 1.5])]
    });
    let height_mm = rng.uniform(230.0, 270.0);
    let slices = ((height_mm / slice_mm).round() as usize).max(8);
    let dims = [matrix, matrix, slices];
    let half = (matrix as f64 - 1.0) / 2.0 * pixel_mm;
    let patient_from_voxel = Affine::from_axes(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        [pixel_mm, pixel_mm, slice_mm],
        [-half, -half, 0.0],
    );
    let anatomy = Anatomy::sample(&mut rng, slices as f64 * slice_mm, fov_mm);
    let grid = Grid {
        pixel_mm,
        slice_mm,
        half,
    };
    let placed = place_lesions(&mut rng, &anatomy, &grid);
    let noise_hu = rng.uniform(6.0, 16.0);
    let noise_seed = rng.next_u64();

    let plane = matrix * matrix;
    let mut hu = vec![0i16; plane * slices];
    let mut structures = vec![0u8; plane * slices];
    let mut lesion_ids = vec![0u8; plane * slices];
    hu.par_chunks_mut(plane)
        .zip(structures.par_chunks_mut(plane))
        .zip(lesion_ids.par_chunks_mut(plane))
        .enumerate()
        .for_each(|(k, ((hu, structures), lesion_ids))| {
            let mut values = vec![0f32; plane];
            for j in 0..matrix {
                for i in 0..matrix {
                    let point = grid.point(i, j, k);
                    let tissue = anatomy.tissue_at(point);
                    let mut value = tissue_hu(tissue, anatomy.liver_hu);
                    let mut code = structure_code(tissue);
                    if matches!(tissue, Tissue::Gas | Tissue::Fluid)
                        && anatomy.stomach.contains(point)
                    {
                        code = 8;
                    }
                    let at = i + matrix * j;
                    for (n, lesion) in placed.iter().enumerate() {
                        let level = lesion.shape.level(point);
                        if level < 1.0 {
                            value = lesion.hu + if level > 0.6 { lesion.rim_hu } else { 0.0 };
                            code = organ_code(lesion.organ);
                            lesion_ids[at] = n as u8 + 1;
                            break;
                        }
                    }
                    values[at] = value as f32;
                    structures[at] = code;
                }
            }
            // A 3×3 binomial blur in the axial plane: the partial-volume softening of edges.
            keyslice_core::volume::filter::smooth_plane(&mut values, matrix, [0.25, 0.25]);
            for (at, value) in values.iter().enumerate() {
                let noisy = if *value > -990.0 {
                    f64::from(*value) + noise_hu * normal_at(noise_seed, (k * plane + at) as u64)
                } else {
                    f64::from(*value)
                };
                // Clamped to the i16 range first, so the cast is exact.
                hu[at] = noisy.round().clamp(-1024.0, 3071.0) as i16;
            }
        });

    let info = VolumeInfo {
        modality: "CT".into(),
        series_uid: String::new(),
        series_description: "Keyslice synthetic phantom (not patient data)".into(),
        display_inverted: false,
        body_part: "ABDOMEN".into(),
        burned_in_annotation: false,
        patient: None,
    };
    // The parts are built to agree: the voxel count is the product of dims, axes orthogonal.
    let volume = Volume::new(dims, patient_from_voxel, Voxels::I16(hu), Vec::new(), info)
        .unwrap_or_else(|error| unreachable!("phantom volume parts agree: {error}"));
    let truth = measure_truth(seed, index, &volume, &placed, &lesion_ids, noise_hu);
    PhantomCase {
        volume,
        truth,
        structures,
        lesion_ids,
        lesion_masks: placed
            .iter()
            .map(|lesion| lesion_mask_name(lesion.organ))
            .collect(),
    }
}

/// Voxel centre ↔ patient position.
struct Grid {
    pixel_mm: f64,
    slice_mm: f64,
    half: f64,
}

impl Grid {
    fn point(&self, i: usize, j: usize, k: usize) -> [f64; 3] {
        [
            i as f64 * self.pixel_mm - self.half,
            j as f64 * self.pixel_mm - self.half,
            k as f64 * self.slice_mm,
        ]
    }

    /// The nearest voxel centre to `point` (lesion centres sit on one, so even a 5 mm lesion
    /// on 5 mm slices shows its full diameter on one slice).
    fn snap(&self, point: [f64; 3]) -> [f64; 3] {
        [
            ((point[0] + self.half) / self.pixel_mm).round() * self.pixel_mm - self.half,
            ((point[1] + self.half) / self.pixel_mm).round() * self.pixel_mm - self.half,
            (point[2] / self.slice_mm).round().max(0.0) * self.slice_mm,
        ]
    }
}

/// Draws 0–3 lesions for a case. Fewer are placed when an organ has no room left.
fn place_lesions(rng: &mut Rng, anatomy: &Anatomy, grid: &Grid) -> Vec<Placed> {
    let count = rng.weighted(&[0.3, 0.35, 0.2, 0.15]);
    let mut placed: Vec<Placed> = Vec::new();
    for _ in 0..count {
        let organ = Organ::ALL[rng.weighted(&[0.45, 0.25, 0.15, 0.15])];
        let max_cm = match organ {
            Organ::Liver => 6.0,
            Organ::Pancreas => 4.0,
            Organ::KidneyLeft | Organ::KidneyRight => 5.0,
        };
        // Log-uniform: small tumors are common, and the hard cases.
        let diameter_mm = 10.0 * (rng.uniform(0.5f64.ln(), f64::ln(max_cm))).exp();
        for _attempt in 0..40 {
            let Some(lesion) = try_lesion(rng, anatomy, grid, organ, diameter_mm) else {
                continue;
            };
            let apart = placed.iter().all(|other| {
                let distance = (0..3)
                    .map(|axis| (other.shape.centre[axis] - lesion.shape.centre[axis]).powi(2))
                    .sum::<f64>()
                    .sqrt();
                distance > other.shape.radii[0] + lesion.shape.radii[0] + 4.0
            });
            if apart {
                placed.push(lesion);
                break;
            }
        }
    }
    placed
}

fn try_lesion(
    rng: &mut Rng,
    anatomy: &Anatomy,
    grid: &Grid,
    organ: Organ,
    diameter_mm: f64,
) -> Option<Placed> {
    let a = diameter_mm / 2.0;
    let radii = [a, a * rng.uniform(0.7, 1.0), a * rng.uniform(0.75, 1.1)];
    let angle = rng.uniform(0.0, std::f64::consts::PI);
    let (centre, organ_hu) = match organ {
        Organ::Liver => {
            let lobe = if rng.unit() < 0.75 {
                &anatomy.liver_right
            } else {
                &anatomy.liver_left
            };
            let centre = point_in(rng, lobe, 0.75);
            let clear_of_gallbladder = anatomy.gallbladder.level(centre) > 2.5;
            let inside = anatomy.in_liver(centre);
            if !(clear_of_gallbladder && inside) {
                return None;
            }
            (centre, anatomy.liver_hu)
        }
        Organ::Pancreas => {
            let spheres = &anatomy.pancreas.spheres;
            let (centre, radius) = spheres[rng.below(spheres.len())];
            let r = radius * 0.4;
            let jitter = [rng.uniform(-r, r), rng.uniform(-r, r), rng.uniform(-r, r)];
            (
                [0, 1, 2].map(|axis| centre[axis] + jitter[axis]),
                tissue_hu(Tissue::Pancreas, anatomy.liver_hu),
            )
        }
        Organ::KidneyLeft | Organ::KidneyRight => {
            let kidney = if organ == Organ::KidneyLeft {
                &anatomy.kidney_left
            } else {
                &anatomy.kidney_right
            };
            // Renal tumors arise from the cortex and often bulge out of it.
            let centre = point_in(rng, kidney, 0.9);
            if kidney.level(centre) < 0.35 {
                return None;
            }
            (
                centre,
                tissue_hu(Tissue::KidneyLeftCortex, anatomy.liver_hu),
            )
        }
    };
    let centre = grid.snap(centre);
    let attenuation =
        [Attenuation::Hypo, Attenuation::Iso, Attenuation::Hyper][rng.weighted(&[0.6, 0.12, 0.28])];
    let (hu, rim_hu) = match attenuation {
        Attenuation::Hypo => (organ_hu - rng.uniform(35.0, 80.0), 0.0),
        // An isoattenuating tumor shows only by its enhancing rim.
        Attenuation::Iso => (organ_hu + rng.uniform(-6.0, 6.0), rng.uniform(22.0, 35.0)),
        Attenuation::Hyper | Attenuation::Mixed => (organ_hu + rng.uniform(35.0, 80.0), 0.0),
    };
    let location = location_of(anatomy, organ, centre);
    Some(Placed {
        organ,
        shape: Ellipsoid {
            centre,
            radii,
            angle,
        },
        hu,
        rim_hu,
        organ_hu,
        attenuation,
        location,
    })
}

/// A point drawn uniformly inside `shape` scaled by `fraction`.
fn point_in(rng: &mut Rng, shape: &Ellipsoid, fraction: f64) -> [f64; 3] {
    loop {
        let unit = [
            rng.uniform(-1.0, 1.0),
            rng.uniform(-1.0, 1.0),
            rng.uniform(-1.0, 1.0),
        ];
        if unit.iter().map(|v| v * v).sum::<f64>() < 1.0 {
            let (sin, cos) = shape.angle.sin_cos();
            let u = unit[0] * shape.radii[0] * fraction;
            let v = unit[1] * shape.radii[1] * fraction;
            return [
                shape.centre[0] + cos * u - sin * v,
                shape.centre[1] + sin * u + cos * v,
                shape.centre[2] + unit[2] * shape.radii[2] * fraction,
            ];
        }
    }
}

/// Where a lesion centred at `centre` lies, in the words a report uses.
///
/// Liver (Couinaud, simplified): left of the falciform line (patient's left) segments II
/// (superior) and III; between it and Cantlie's line (through the gallbladder) segment IV;
/// right of Cantlie's line segments V/VIII (anterior, inferior/superior) and VI/VII
/// (posterior). Pancreas: head, body, tail by thirds along the gland. Kidneys: upper, mid,
/// lower pole by thirds of the kidney's height.
#[must_use]
pub fn location_of(anatomy: &Anatomy, organ: Organ, centre: [f64; 3]) -> Location {
    match organ {
        Organ::Liver => {
            let falciform_x = anatomy.liver_left.centre[0] - 10.0;
            let cantlie_x = anatomy.gallbladder.centre[0];
            let right = &anatomy.liver_right;
            let segment = if centre[0] > falciform_x {
                if centre[2] >= anatomy.liver_left.centre[2] {
                    2
                } else {
                    3
                }
            } else if centre[0] > cantlie_x {
                4
            } else {
                let superior = centre[2] >= right.centre[2];
                let anterior = centre[1] < right.centre[1];
                match (anterior, superior) {
                    (true, true) => 8,
                    (true, false) => 5,
                    (false, true) => 7,
                    (false, false) => 6,
                }
            };
            Location::LiverSegments(vec![segment])
        }
        Organ::Pancreas => {
            let position = anatomy.pancreas.position_of(centre);
            Location::Pancreas(if position < 0.3 {
                PancreasPart::Head
            } else if position < 0.65 {
                PancreasPart::Body
            } else {
                PancreasPart::Tail
            })
        }
        Organ::KidneyLeft | Organ::KidneyRight => {
            let kidney = if organ == Organ::KidneyLeft {
                &anatomy.kidney_left
            } else {
                &anatomy.kidney_right
            };
            let height = (centre[2] - kidney.centre[2]) / kidney.radii[2];
            Location::Kidney(if height > 1.0 / 3.0 {
                KidneyPole::Upper
            } else if height < -1.0 / 3.0 {
                KidneyPole::Lower
            } else {
                KidneyPole::Mid
            })
        }
    }
}

/// Truth from the voxelised lesions: extents, key slice, box, and findings.
fn measure_truth(
    seed: u64,
    index: u32,
    volume: &Volume,
    placed: &[Placed],
    lesion_ids: &[u8],
    noise_hu: f64,
) -> PhantomTruth {
    let [nx, ny, nz] = volume.dims();
    let plane = nx * ny;
    // Voxels per (lesion, slice).
    let mut per_slice = vec![vec![0usize; nz]; placed.len()];
    for (offset, &id) in lesion_ids.iter().enumerate() {
        if id > 0 {
            per_slice[usize::from(id) - 1][offset / plane] += 1;
        }
    }
    let mut lesions = Vec::new();
    let mut ids = Vec::new();
    for ((lesion, counts), id) in placed.iter().zip(&per_slice).zip(1u8..) {
        let Some((first, last)) = keyslice_core::volume::label::extent_of(counts) else {
            continue; // too small to reach a voxel centre: not visible, not in the truth
        };
        let largest = largest_index(counts);
        let shape = lesion.shape;
        ids.push(id);
        lesions.push(PhantomLesion {
            organ: lesion.organ,
            location: lesion.location.clone(),
            size: LesionSize {
                long_cm: round_mm_to_cm(2.0 * shape.radii[0].max(shape.radii[1])),
                short_cm: Some(round_mm_to_cm(2.0 * shape.radii[0].min(shape.radii[1]))),
            },
            attenuation: lesion.attenuation,
            hu: lesion.hu,
            organ_hu: lesion.organ_hu,
            centre_mm: shape.centre,
            radii_mm: shape.radii,
            angle_rad: shape.angle,
            voxels: counts.iter().sum(),
            first_slice: first as u32,
            last_slice: last as u32,
            largest_slice: largest as u32,
        });
    }
    // Largest first within each organ, as reports list them.
    let mut order: Vec<usize> = (0..lesions.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&lesions[a], &lesions[b]);
        a.organ
            .cmp(&b.organ)
            .then(b.size.long_cm.total_cmp(&a.size.long_cm))
    });
    let (lesions, ids): (Vec<PhantomLesion>, Vec<u8>) = order
        .into_iter()
        .map(|at| (lesions[at].clone(), ids[at]))
        .unzip();
    let mut findings = truth_findings(volume, lesion_ids, &lesions, &ids);
    // Key slice: the axial slice where all lesions together cover the largest area.
    let total: Vec<usize> = (0..nz)
        .map(|k| per_slice.iter().map(|counts| counts[k]).sum())
        .collect();
    if total.iter().any(|&count| count > 0) {
        let key = largest_index(&total);
        let z_mm = volume.patient_from_voxel().apply([0.0, 0.0, key as f64])[2];
        findings.key_slice = Some(KeySlice {
            index: key as u32,
            z_mm: Some((z_mm * 100.0).round() / 100.0),
            sop_instance_uid: None,
            span: None,
        });
        findings.slice_box = slice_box_of(volume, lesion_ids, key, |id| id != 0);
    }
    let lesion_extents = lesions
        .iter()
        .map(|lesion| LesionExtent {
            organ: lesion.organ,
            first_slice: lesion.first_slice,
            last_slice: lesion.last_slice,
            largest_slice: lesion.largest_slice,
        })
        .collect();
    PhantomTruth {
        case_id: case_id(seed, index),
        report: write_report(&findings),
        findings,
        lesion_extents,
        lesions,
        dims: volume.dims(),
        spacing_mm: volume.spacing_mm(),
        noise_hu: (noise_hu * 10.0).round() / 10.0,
        seed,
        index,
    }
}

/// The findings of `lesions` (with their lesion ids in `ids`): every organ stated, each
/// lesion with its size, location, attenuation and its own evidence (the slice it is largest
/// on, its box there, its slices).
fn truth_findings(
    volume: &Volume,
    lesion_ids: &[u8],
    lesions: &[PhantomLesion],
    ids: &[u8],
) -> Findings {
    let mut findings = Findings::default();
    for organ in Organ::ALL {
        let entry = findings.organ_mut(organ);
        entry.tumor = TumorPresence::No;
        for (lesion, &id) in lesions
            .iter()
            .zip(ids)
            .filter(|(lesion, _)| lesion.organ == organ)
        {
            entry.tumor = TumorPresence::Yes;
            // Its own evidence: the slice it is largest on, its box there, its slices.
            let key = lesion.largest_slice as usize;
            entry.lesions.push(Lesion {
                size: Some(lesion.size),
                location: Some(lesion.location.clone()),
                attenuation: Some(lesion.attenuation),
                count: None,
                evidence: Some(Evidence {
                    key_slice: lesion.largest_slice,
                    slice_box: slice_box_of(volume, lesion_ids, key, |at| at == id),
                    slices: Some(SliceRange {
                        first: lesion.first_slice,
                        last: lesion.last_slice,
                    }),
                }),
                spans: keyslice_core::findings::LesionSpans::default(),
            });
        }
    }
    findings
}

fn round_mm_to_cm(mm: f64) -> f64 {
    (mm).round() / 10.0
}

/// Index of the largest count; the first one on ties (0 when all are 0).
fn largest_index(counts: &[usize]) -> usize {
    keyslice_core::volume::label::first_largest(counts).unwrap_or(0)
}

/// Bounding box of the lesion voxels on slice `key` whose lesion id is `wanted`, in voxels
/// and millimetres.
fn slice_box_of(
    volume: &Volume,
    lesion_ids: &[u8],
    key: usize,
    wanted: impl Fn(u8) -> bool,
) -> Option<SliceBox> {
    let [nx, ny, _] = volume.dims();
    let slice = &lesion_ids[key * nx * ny..(key + 1) * nx * ny];
    let mut bounds: Option<[usize; 4]> = None;
    for (at, &id) in slice.iter().enumerate() {
        if !wanted(id) {
            continue;
        }
        let (i, j) = (at % nx, at / nx);
        bounds = Some(match bounds {
            None => [i, j, i, j],
            Some([i0, j0, i1, j1]) => [i0.min(i), j0.min(j), i1.max(i), j1.max(j)],
        });
    }
    let [i0, j0, i1, j1] = bounds?;
    let corner = |i: usize, j: usize| {
        volume
            .patient_from_voxel()
            .apply([i as f64, j as f64, key as f64])
    };
    let (low, high) = (corner(i0, j0), corner(i1, j1));
    let round = |value: f64| (value * 100.0).round() / 100.0;
    Some(SliceBox {
        voxels: [i0 as u32, j0 as u32, i1 as u32, j1 as u32],
        mm: Some([round(low[0]), round(low[1]), round(high[0]), round(high[1])]),
    })
}
