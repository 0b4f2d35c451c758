//! Test fixtures shared by the crates' tests and the end-to-end tests: paths to the committed
//! fixtures in `tests/data`, the reference values recorded by `tests/data/make_fixtures.py`,
//! and a writer for synthetic CT series (written through dicom-object, so the reader sees
//! real DICOM files). A dev-dependency only; never part of the product.
#![allow(
    clippy::missing_panics_doc,
    reason = "test fixtures: a fixture that cannot be made fails the test"
)]

pub mod mutate;
pub mod validators;

use std::path::{Path, PathBuf};

use dicom_core::value::PrimitiveValue;
use dicom_core::{DataElement, VR};
use dicom_dictionary_std::tags;
use dicom_object::{FileMetaTableBuilder, InMemDicomObject};

/// `tests/data/<relative>`.
#[must_use]
pub fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(relative)
}

/// The reference values in `tests/data/expected.json`.
#[must_use]
pub fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(data("expected.json")).expect("expected.json is committed");
    serde_json::from_str(&text).expect("expected.json is valid JSON")
}

/// One synthetic CT slice to write.
#[derive(Clone, Debug)]
pub struct SliceSpec {
    pub series_uid: String,
    pub sop_uid: String,
    pub instance_number: i32,
    pub position: [f64; 3],
    pub orientation: [f64; 6],
    pub rows: u16,
    pub columns: u16,
    pub pixel_spacing: [f64; 2],
    pub slope: f64,
    pub intercept: f64,
    pub image_type: &'static str,
    pub description: &'static str,
    pub photometric: &'static str,
    /// Stored values, row by row.
    pub stored: Vec<i16>,
}

impl SliceSpec {
    /// An axial 1 mm-pixel slice at height `z_mm` whose stored values encode `marker`
    /// (every pixel = marker + column index).
    #[must_use]
    pub fn axial(series: &str, index: usize, z_mm: f64, marker: i16) -> Self {
        let rows = 6;
        let columns = 8;
        Self {
            series_uid: series.to_string(),
            sop_uid: format!("{series}.{index}"),
            instance_number: index as i32 + 1,
            position: [-4.0, -3.0, z_mm],
            orientation: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
            rows,
            columns,
            pixel_spacing: [1.0, 1.0],
            slope: 1.0,
            intercept: -1024.0,
            image_type: "ORIGINAL\\PRIMARY\\AXIAL",
            description: "SYNTHETIC",
            photometric: "MONOCHROME2",
            stored: (0..rows as i16 * columns as i16)
                .map(|n| marker + n % columns as i16)
                .collect(),
        }
    }

    /// Writes the slice as Explicit VR Little Endian CT Image Storage.
    pub fn write(&self, path: &Path) {
        let mut object = InMemDicomObject::new_empty();
        let text = |tag, vr, value: &str| DataElement::new(tag, vr, PrimitiveValue::from(value));
        object.put(text(
            tags::SOP_CLASS_UID,
            VR::UI,
            "1.2.840.10008.5.1.4.1.1.2",
        ));
        object.put(text(tags::SOP_INSTANCE_UID, VR::UI, &self.sop_uid));
        object.put(text(tags::STUDY_INSTANCE_UID, VR::UI, "1.2.3.4.5"));
        object.put(text(tags::SERIES_INSTANCE_UID, VR::UI, &self.series_uid));
        object.put(text(tags::MODALITY, VR::CS, "CT"));
        object.put(text(tags::SERIES_DESCRIPTION, VR::LO, self.description));
        object.put(text(tags::IMAGE_TYPE, VR::CS, self.image_type));
        object.put(text(
            tags::INSTANCE_NUMBER,
            VR::IS,
            &self.instance_number.to_string(),
        ));
        object.put(text(
            tags::IMAGE_POSITION_PATIENT,
            VR::DS,
            &decimals(&self.position),
        ));
        object.put(text(
            tags::IMAGE_ORIENTATION_PATIENT,
            VR::DS,
            &decimals(&self.orientation),
        ));
        object.put(text(
            tags::PIXEL_SPACING,
            VR::DS,
            &decimals(&self.pixel_spacing),
        ));
        object.put(text(tags::RESCALE_SLOPE, VR::DS, &self.slope.to_string()));
        object.put(text(
            tags::RESCALE_INTERCEPT,
            VR::DS,
            &self.intercept.to_string(),
        ));
        object.put(text(
            tags::PHOTOMETRIC_INTERPRETATION,
            VR::CS,
            self.photometric,
        ));
        let short = |tag, value: u16| DataElement::new(tag, VR::US, PrimitiveValue::from(value));
        object.put(short(tags::SAMPLES_PER_PIXEL, 1));
        object.put(short(tags::ROWS, self.rows));
        object.put(short(tags::COLUMNS, self.columns));
        object.put(short(tags::BITS_ALLOCATED, 16));
        object.put(short(tags::BITS_STORED, 16));
        object.put(short(tags::HIGH_BIT, 15));
        object.put(short(tags::PIXEL_REPRESENTATION, 1));
        let bytes: Vec<u8> = self
            .stored
            .iter()
            .flat_map(|value| value.to_le_bytes())
            .collect();
        object.put(DataElement::new(
            tags::PIXEL_DATA,
            VR::OW,
            PrimitiveValue::from(bytes),
        ));
        let meta = FileMetaTableBuilder::new()
            .media_storage_sop_class_uid("1.2.840.10008.5.1.4.1.1.2")
            .media_storage_sop_instance_uid(self.sop_uid.as_str())
            .transfer_syntax("1.2.840.10008.1.2.1")
            .build()
            .expect("complete meta table");
        object
            .with_exact_meta(meta)
            .write_to_file(path)
            .expect("test folder is writable");
    }
}

fn decimals(values: &[f64]) -> String {
    values
        .iter()
        .map(|value| format!("{value}"))
        .collect::<Vec<_>>()
        .join("\\")
}

/// Writes `slices` into `folder` under the given file names.
pub fn write_series(folder: &Path, slices: &[(String, SliceSpec)]) {
    std::fs::create_dir_all(folder).expect("test folder is writable");
    for (name, slice) in slices {
        slice.write(&folder.join(name));
    }
}

/// Copies `source` to `target`, keeping only the first `keep` bytes.
pub fn truncated_copy(source: &Path, target: &Path, keep: usize) {
    let bytes = std::fs::read(source).expect("source exists");
    std::fs::write(target, &bytes[..keep.min(bytes.len())]).expect("target is writable");
}
