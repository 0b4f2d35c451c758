//! The phantom's anatomy: analytic shapes in patient millimetres (LPS: +x the patient's left,
//! +y posterior, +z superior; the body axis at x = y = 0, z = 0 at the lowest slice) with
//! portal-venous-phase attenuation, varied per case.
//!
//! Shapes are ellipsoids (rotated about z), tubes along z, and a chain of spheres along a
//! polyline for the pancreas. [`Anatomy::tissue_at`] answers "what is here" for one point; the
//! generator asks it once per voxel centre.

use keyslice_core::rng::Rng;

/// An ellipsoid turned by `angle` (radians) about the z axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ellipsoid {
    /// Centre, mm.
    pub centre: [f64; 3],
    /// Semi-axes along its own x, y and z, mm.
    pub radii: [f64; 3],
    /// Rotation about z, radians.
    pub angle: f64,
}

impl Ellipsoid {
    /// Squared normalised radius of `point`: below 1 inside.
    #[must_use]
    pub fn level(&self, point: [f64; 3]) -> f64 {
        let dx = point[0] - self.centre[0];
        let dy = point[1] - self.centre[1];
        let (sin, cos) = self.angle.sin_cos();
        let u = cos * dx + sin * dy;
        let v = -sin * dx + cos * dy;
        let w = point[2] - self.centre[2];
        (u / self.radii[0]).powi(2) + (v / self.radii[1]).powi(2) + (w / self.radii[2]).powi(2)
    }

    /// Whether `point` is inside.
    #[must_use]
    pub fn contains(&self, point: [f64; 3]) -> bool {
        self.level(point) < 1.0
    }

    /// Lowest and highest z it reaches.
    #[must_use]
    pub fn z_range(&self) -> (f64, f64) {
        (
            self.centre[2] - self.radii[2],
            self.centre[2] + self.radii[2],
        )
    }
}

/// An elliptic cylinder along z between two heights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tube {
    /// Centre in the axial plane, mm.
    pub centre: [f64; 2],
    /// Semi-axes in x and y, mm.
    pub radii: [f64; 2],
    /// Lowest and highest z, mm.
    pub z: (f64, f64),
}

impl Tube {
    /// Whether `point` is inside.
    #[must_use]
    pub fn contains(&self, point: [f64; 3]) -> bool {
        point[2] >= self.z.0
            && point[2] <= self.z.1
            && ((point[0] - self.centre[0]) / self.radii[0]).powi(2)
                + ((point[1] - self.centre[1]) / self.radii[1]).powi(2)
                < 1.0
    }
}

/// The pancreas: spheres along a polyline from the head (patient right, by the duodenum)
/// through the body to the tail (at the splenic hilum).
#[derive(Clone, Debug, PartialEq)]
pub struct Pancreas {
    /// Sphere centres (mm) and radii (mm), head first.
    pub spheres: Vec<([f64; 3], f64)>,
}

impl Pancreas {
    fn new(control: [[f64; 3]; 4], radii: [f64; 4]) -> Self {
        let samples = 48usize;
        let spheres = (0..=samples)
            .map(|n| {
                let t = n as f64 / samples as f64 * 3.0;
                let segment = (t.floor() as usize).min(2);
                let f = t - segment as f64;
                let a = control[segment];
                let b = control[segment + 1];
                let centre = [0, 1, 2].map(|axis| a[axis] + (b[axis] - a[axis]) * f);
                let radius = radii[segment] + (radii[segment + 1] - radii[segment]) * f;
                (centre, radius)
            })
            .collect();
        Self { spheres }
    }

    /// Whether `point` is inside (flattened front to back, as the gland is).
    #[must_use]
    pub fn contains(&self, point: [f64; 3]) -> bool {
        self.spheres.iter().any(|(centre, radius)| {
            let dx = point[0] - centre[0];
            let dy = (point[1] - centre[1]) / 0.75;
            let dz = point[2] - centre[2];
            dx * dx + dy * dy + dz * dz < radius * radius
        })
    }

    /// Position along the gland (0 head … 1 tail) of the sphere nearest `point`.
    #[must_use]
    pub fn position_of(&self, point: [f64; 3]) -> f64 {
        let nearest = self
            .spheres
            .iter()
            .enumerate()
            .min_by(|(_, (a, _)), (_, (b, _))| {
                distance2(*a, point).total_cmp(&distance2(*b, point))
            })
            .map_or(0, |(index, _)| index);
        nearest as f64 / (self.spheres.len().max(2) - 1) as f64
    }
}

fn distance2(a: [f64; 3], b: [f64; 3]) -> f64 {
    (0..3).map(|axis| (a[axis] - b[axis]).powi(2)).sum()
}

/// What a point is made of: the structure (for masks) and its attenuation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tissue {
    /// Outside the patient.
    Air,
    /// Subcutaneous and visceral fat.
    Fat,
    /// Abdominal wall, psoas and paraspinal muscles.
    Muscle,
    /// Cortical bone of the vertebra.
    BoneCortex,
    /// Cancellous bone of the vertebral body.
    BoneMarrow,
    /// Spinal canal.
    Canal,
    /// Intervertebral disc.
    Disc,
    /// Aorta.
    Aorta,
    /// Inferior vena cava.
    Cava,
    /// Bowel wall.
    BowelWall,
    /// Bowel or stomach fluid.
    Fluid,
    /// Bowel or stomach gas.
    Gas,
    /// Gallbladder (fluid: a hypodense structure that is not a tumor).
    Gallbladder,
    /// Liver parenchyma.
    Liver,
    /// Hepatic/portal vessel inside the liver.
    LiverVessel,
    /// Spleen.
    Spleen,
    /// Renal cortex, left kidney.
    KidneyLeftCortex,
    /// Renal medulla, left kidney.
    KidneyLeftMedulla,
    /// Renal cortex, right kidney.
    KidneyRightCortex,
    /// Renal medulla, right kidney.
    KidneyRightMedulla,
    /// Pancreas.
    Pancreas,
}

/// One case's anatomy and attenuation values, drawn from the case's random source.
#[derive(Clone, Debug, PartialEq)]
pub struct Anatomy {
    /// Outer body outline (skin).
    pub body: Tube,
    /// Inner edge of the subcutaneous fat (outer edge of the muscle wall).
    pub wall_outer: Tube,
    /// Inner edge of the muscle wall.
    pub wall_inner: Tube,
    /// Right lobe of the liver.
    pub liver_right: Ellipsoid,
    /// Left lobe of the liver.
    pub liver_left: Ellipsoid,
    /// Vessels inside the liver.
    pub liver_vessels: Vec<Ellipsoid>,
    /// Gallbladder.
    pub gallbladder: Ellipsoid,
    /// Spleen.
    pub spleen: Ellipsoid,
    /// Left kidney.
    pub kidney_left: Ellipsoid,
    /// Right kidney.
    pub kidney_right: Ellipsoid,
    /// Pancreas.
    pub pancreas: Pancreas,
    /// Stomach.
    pub stomach: Ellipsoid,
    /// Bowel loops: shape and whether gas-filled.
    pub bowel: Vec<(Ellipsoid, bool)>,
    /// Aorta.
    pub aorta: Tube,
    /// Inferior vena cava.
    pub cava: Tube,
    /// Vertebral column (body).
    pub vertebra: Tube,
    /// Spinal canal.
    pub canal: Tube,
    /// Psoas muscles.
    pub psoas: [Ellipsoid; 2],
    /// Paraspinal muscles.
    pub paraspinal: [Tube; 2],
    /// Height of the first disc and the vertebral pitch, mm.
    pub discs: (f64, f64),
    /// Attenuation of liver parenchyma, HU (spleen, pancreas and kidneys follow from it).
    pub liver_hu: f64,
}

/// Attenuation of each tissue for a case, HU.
#[must_use]
pub fn tissue_hu(tissue: Tissue, liver_hu: f64) -> f64 {
    match tissue {
        Tissue::Air => -1000.0,
        Tissue::Fat => -95.0,
        Tissue::Muscle => 50.0,
        Tissue::BoneCortex => 750.0,
        Tissue::BoneMarrow => 230.0,
        Tissue::Canal => 20.0,
        Tissue::Disc => 85.0,
        Tissue::Aorta => 165.0,
        Tissue::Cava => 135.0,
        Tissue::BowelWall => 45.0,
        Tissue::Fluid => 12.0,
        Tissue::Gas => -900.0,
        Tissue::Gallbladder => 8.0,
        Tissue::Liver => liver_hu,
        Tissue::LiverVessel => liver_hu + 60.0,
        Tissue::Spleen => liver_hu + 12.0,
        Tissue::KidneyLeftCortex | Tissue::KidneyRightCortex => 175.0,
        Tissue::KidneyLeftMedulla | Tissue::KidneyRightMedulla => 130.0,
        Tissue::Pancreas => liver_hu - 10.0,
    }
}

impl Anatomy {
    /// Draws one case's anatomy for a scan `height_mm` tall and at most `fov_mm` wide.
    #[must_use]
    // One table of the anatomy, read top to bottom; splitting it would scatter the layout.
    #[expect(
        clippy::too_many_lines,
        reason = "one organ after another, in anatomical order"
    )]
    pub fn sample(rng: &mut Rng, height_mm: f64, fov_mm: f64) -> Self {
        let top = height_mm;
        let scale = rng.uniform(0.88, 1.12);
        let body_rx = (rng.uniform(150.0, 175.0) * scale).min(fov_mm * 0.47);
        let body_ry = body_rx * rng.uniform(0.66, 0.78);
        let fat = rng.uniform(12.0, 30.0);
        let body = Tube {
            centre: [0.0, 0.0],
            radii: [body_rx, body_ry],
            z: (-1.0, top + 1.0),
        };
        let wall_outer = Tube {
            radii: [body_rx - fat, body_ry - fat],
            ..body
        };
        let wall_inner = Tube {
            radii: [body_rx - fat - 10.0, body_ry - fat - 9.0],
            ..body
        };
        let s = (body_rx - fat) / 140.0; // organ scale follows the inner abdomen
        let jitter = |rng: &mut Rng, mm: f64| rng.uniform(-mm, mm);
        // The liver dome sits near the top of the scan; kidneys and pancreas below it.
        let liver_z = top - rng.uniform(70.0, 85.0);
        let liver_right = Ellipsoid {
            centre: [
                -62.0 * s + jitter(rng, 6.0),
                2.0 * s + jitter(rng, 5.0),
                liver_z,
            ],
            radii: [
                68.0 * s * rng.uniform(0.92, 1.08),
                78.0 * s * rng.uniform(0.92, 1.08),
                rng.uniform(62.0, 72.0),
            ],
            angle: jitter(rng, 0.12),
        };
        let liver_left = Ellipsoid {
            centre: [8.0 * s + jitter(rng, 5.0), -38.0 * s, liver_z + 14.0],
            radii: [
                52.0 * s * rng.uniform(0.85, 1.1),
                30.0 * s,
                rng.uniform(38.0, 46.0),
            ],
            angle: 0.35 + jitter(rng, 0.1),
        };
        let liver_vessels = (0..4u8)
            .map(|n| Ellipsoid {
                centre: [
                    liver_right.centre[0] + 18.0 - 12.0 * f64::from(n),
                    liver_right.centre[1] + jitter(rng, 12.0),
                    liver_z + jitter(rng, 20.0),
                ],
                radii: [4.0, 4.0, 28.0],
                angle: 0.0,
            })
            .collect();
        let gallbladder = Ellipsoid {
            centre: [
                liver_right.centre[0] + 30.0 * s,
                -35.0 * s,
                liver_z - 42.0 + jitter(rng, 6.0),
            ],
            radii: [14.0, 16.0, 26.0].map(|r| r * rng.uniform(0.8, 1.15)),
            angle: 0.5,
        };
        let spleen = Ellipsoid {
            centre: [78.0 * s, 52.0 * s, liver_z + jitter(rng, 10.0)],
            radii: [
                30.0 * s * rng.uniform(0.85, 1.15),
                42.0 * s,
                rng.uniform(45.0, 55.0),
            ],
            angle: -0.6,
        };
        let kidney_z = liver_z - rng.uniform(75.0, 90.0);
        let kidney_size = rng.uniform(0.92, 1.08);
        let kidney = |x: f64, z: f64, angle: f64| Ellipsoid {
            centre: [x, 58.0 * s, z],
            radii: [27.0 * kidney_size, 24.0 * kidney_size, 55.0 * kidney_size],
            angle,
        };
        let kidney_left = kidney(72.0 * s, kidney_z + 8.0, -0.45);
        let kidney_right = kidney(-72.0 * s, kidney_z - 8.0, 0.45);
        let pancreas_z = kidney_z + rng.uniform(25.0, 40.0);
        let pancreas = Pancreas::new(
            [
                [-32.0 * s, -2.0 * s, pancreas_z - 8.0],
                [-6.0 * s, -22.0 * s, pancreas_z],
                [28.0 * s, -8.0 * s, pancreas_z + 6.0],
                [62.0 * s, 24.0 * s, pancreas_z + 14.0],
            ],
            [16.0, 11.0, 11.0, 9.0].map(|r| r * rng.uniform(0.9, 1.1)),
        );
        let stomach = Ellipsoid {
            centre: [48.0 * s, -42.0 * s, liver_z + 5.0],
            radii: [38.0 * s, 26.0 * s, 40.0],
            angle: -0.3,
        };
        let bowel_count = 6 + rng.below(7);
        let bowel = (0..bowel_count)
            .map(|_| {
                let shape = Ellipsoid {
                    centre: [
                        rng.uniform(-80.0, 80.0) * s,
                        rng.uniform(-70.0, -10.0) * s,
                        rng.uniform(5.0, pancreas_z - 10.0),
                    ],
                    radii: [
                        rng.uniform(12.0, 22.0),
                        rng.uniform(10.0, 18.0),
                        rng.uniform(20.0, 45.0),
                    ],
                    angle: rng.uniform(0.0, std::f64::consts::PI),
                };
                (shape, rng.unit() < 0.35)
            })
            .collect();
        let spine_y = body_ry - fat - 55.0 * s;
        let aorta = Tube {
            centre: [12.0 * s, spine_y - 30.0],
            radii: [11.0, 11.0],
            z: (-1.0, top + 1.0),
        };
        let cava = Tube {
            centre: [-24.0 * s, spine_y - 28.0],
            radii: [13.0, 9.0],
            z: (-1.0, top + 1.0),
        };
        let vertebra = Tube {
            centre: [0.0, spine_y],
            radii: [21.0, 17.0],
            z: (-1.0, top + 1.0),
        };
        let canal = Tube {
            centre: [0.0, spine_y + 27.0],
            radii: [8.0, 8.0],
            z: (-1.0, top + 1.0),
        };
        let psoas = [-1.0, 1.0].map(|side| Ellipsoid {
            centre: [side * 38.0 * s, spine_y + 2.0, -10.0],
            radii: [20.0 * s, 18.0 * s, kidney_z + 40.0],
            angle: 0.0,
        });
        let paraspinal = [-1.0, 1.0].map(|side| Tube {
            centre: [side * 34.0 * s, spine_y + 45.0],
            radii: [24.0 * s, 17.0 * s],
            z: (-1.0, top + 1.0),
        });
        Self {
            body,
            wall_outer,
            wall_inner,
            liver_right,
            liver_left,
            liver_vessels,
            gallbladder,
            spleen,
            kidney_left,
            kidney_right,
            pancreas,
            stomach,
            bowel,
            aorta,
            cava,
            vertebra,
            canal,
            psoas,
            paraspinal,
            discs: (rng.uniform(0.0, 32.0), 32.0),
            liver_hu: rng.uniform(95.0, 120.0),
        }
    }

    /// Whether `point` lies in the liver (either lobe).
    #[must_use]
    pub fn in_liver(&self, point: [f64; 3]) -> bool {
        self.liver_right.contains(point) || self.liver_left.contains(point)
    }

    /// What is at `point`; later structures win over earlier ones, organs over gut and fat.
    #[must_use]
    pub fn tissue_at(&self, point: [f64; 3]) -> Tissue {
        if !self.body.contains(point) {
            return Tissue::Air;
        }
        if !self.wall_outer.contains(point) {
            return Tissue::Fat;
        }
        if !self.wall_inner.contains(point) {
            return Tissue::Muscle;
        }
        if let Some(tissue) = self.spine_at(point) {
            return tissue;
        }
        if self.aorta.contains(point) {
            return Tissue::Aorta;
        }
        if self.cava.contains(point) {
            return Tissue::Cava;
        }
        if let Some(tissue) = self.organ_at(point) {
            return tissue;
        }
        if self.stomach.contains(point) {
            // Gas rises to the front (smaller y) in a patient lying on the back.
            let gas_level = self.stomach.centre[1] - 0.55 * self.stomach.radii[1];
            return if point[1] < gas_level {
                Tissue::Gas
            } else {
                Tissue::Fluid
            };
        }
        for (loop_shape, gas) in &self.bowel {
            let level = loop_shape.level(point);
            if level < 1.0 {
                return if level > 0.7 {
                    Tissue::BowelWall
                } else if *gas {
                    Tissue::Gas
                } else {
                    Tissue::Fluid
                };
            }
        }
        if self.psoas.iter().any(|muscle| muscle.contains(point))
            || self.paraspinal.iter().any(|muscle| muscle.contains(point))
        {
            return Tissue::Muscle;
        }
        Tissue::Fat
    }

    fn spine_at(&self, point: [f64; 3]) -> Option<Tissue> {
        if self.canal.contains(point) {
            return Some(Tissue::Canal);
        }
        let centre = self.vertebra.centre;
        // Posterior elements: a bony arch around the canal.
        let arch = Tube {
            centre: [centre[0], centre[1] + 27.0],
            radii: [15.0, 14.0],
            ..self.vertebra
        };
        if self.vertebra.contains(point) {
            let (first, pitch) = self.discs;
            let phase = (point[2] - first).rem_euclid(pitch);
            if phase < 6.0 {
                return Some(Tissue::Disc);
            }
            let inner = Tube {
                radii: [self.vertebra.radii[0] - 3.0, self.vertebra.radii[1] - 3.0],
                ..self.vertebra
            };
            return Some(if inner.contains(point) {
                Tissue::BoneMarrow
            } else {
                Tissue::BoneCortex
            });
        }
        arch.contains(point).then_some(Tissue::BoneCortex)
    }

    /// Organs in order of precedence where the simple shapes overlap: kidneys first (the
    /// liver shows a renal impression, as it does in patients), then gallbladder, pancreas
    /// (kept whole where the liver's lower edge reaches it), liver, spleen.
    fn organ_at(&self, point: [f64; 3]) -> Option<Tissue> {
        for (kidney, cortex, medulla) in [
            (
                &self.kidney_left,
                Tissue::KidneyLeftCortex,
                Tissue::KidneyLeftMedulla,
            ),
            (
                &self.kidney_right,
                Tissue::KidneyRightCortex,
                Tissue::KidneyRightMedulla,
            ),
        ] {
            let level = kidney.level(point);
            if level < 1.0 {
                return Some(if level > 0.45 { cortex } else { medulla });
            }
        }
        if self.gallbladder.contains(point) {
            return Some(Tissue::Gallbladder);
        }
        if self.pancreas.contains(point) {
            return Some(Tissue::Pancreas);
        }
        if self.in_liver(point) {
            if self
                .liver_vessels
                .iter()
                .any(|vessel| vessel.contains(point))
            {
                return Some(Tissue::LiverVessel);
            }
            return Some(Tissue::Liver);
        }
        if self.spleen.contains(point) {
            return Some(Tissue::Spleen);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn organs_sit_where_the_anatomy_says() {
        let mut rng = Rng::new(11);
        let anatomy = Anatomy::sample(&mut rng, 260.0, 400.0);
        // The liver is on the patient's right (negative x), the spleen on the left.
        assert_eq!(anatomy.tissue_at(anatomy.liver_right.centre), Tissue::Liver);
        assert!(anatomy.liver_right.centre[0] < 0.0 && anatomy.spleen.centre[0] > 0.0);
        assert_eq!(anatomy.tissue_at(anatomy.spleen.centre), Tissue::Spleen);
        assert_eq!(
            anatomy.tissue_at(anatomy.kidney_left.centre),
            Tissue::KidneyLeftMedulla
        );
        // The right kidney sits lower than the left, as usual.
        assert!(anatomy.kidney_right.centre[2] < anatomy.kidney_left.centre[2]);
        let head = anatomy.pancreas.spheres[0].0;
        assert_eq!(anatomy.tissue_at(head), Tissue::Pancreas);
        assert!(anatomy.pancreas.position_of(head) < 0.05);
        assert_eq!(anatomy.tissue_at([0.0, 0.0, -500.0]), Tissue::Air);
        assert_eq!(
            anatomy.tissue_at([anatomy.body.radii[0] - 2.0, 0.0, 100.0]),
            Tissue::Fat
        );
    }

    #[test]
    fn ellipsoid_rotation_turns_its_long_axis() {
        let ellipsoid = Ellipsoid {
            centre: [0.0; 3],
            radii: [20.0, 5.0, 5.0],
            angle: std::f64::consts::FRAC_PI_2,
        };
        assert!(ellipsoid.contains([0.0, 15.0, 0.0]));
        assert!(!ellipsoid.contains([15.0, 0.0, 0.0]));
        assert_eq!(ellipsoid.z_range(), (-5.0, 5.0));
    }
}
