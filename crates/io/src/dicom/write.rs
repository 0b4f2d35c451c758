//! [`Volume`] → a DICOM CT series: one CT Image Storage file per axial slice (Explicit VR
//! Little Endian, 16-bit signed, rescale 1/0 so stored values are Hounsfield units).
//!
//! For loading phantoms and converted NIfTI studies into a PACS; the identity written is the
//! one the caller gives (a synthetic one for phantoms), never invented from elsewhere. UIDs
//! are derived from that identity and the geometry, so writing the same volume again gives
//! the same UIDs (a PACS that receives it twice keeps one copy).

use std::path::{Path, PathBuf};

use dicom_core::{DataElement, PrimitiveValue, VR};
use dicom_dictionary_std::{tags, uids};
use dicom_object::InMemDicomObject;
use dicom_object::meta::FileMetaTableBuilder;
use keyslice_core::volume::{Volume, Voxels};

use super::DicomError;

/// Who and what the series is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeriesIdentity {
    /// Patient's Name (`Family^Given`).
    pub patient_name: String,
    /// Patient ID.
    pub patient_id: String,
    /// Accession Number.
    pub accession: String,
    /// Study Date (`YYYYMMDD`).
    pub study_date: String,
    /// Study Description.
    pub study_description: String,
    /// Series Description.
    pub series_description: String,
}

/// A UID under `2.25` from a hash of `parts` (the same parts, the same UID).
#[must_use]
pub fn derived_uid(parts: &[&str]) -> String {
    content_uid(&parts.join("\u{1f}"))
}

/// A UID under `2.25` (a UUID-derived UID, PS3.5 B.2) of 128 bits from a SHA-256 of `seed`:
/// the same seed always gives the same UID. Keyslice's documents seed their UIDs with what
/// they say, so storing the same result again is recognised (by a PACS, which keeps one
/// instance per SOP Instance UID, and by `pacs publish`, which asks first) and never makes a
/// second copy; a converted series seeds them with the patient, accession and slice.
#[must_use]
pub fn content_uid(seed: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(seed.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    // A UUID's variant and version bits (version 8, custom), as PS3.5 asks.
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    format!("2.25.{}", u128::from_be_bytes(bytes))
}

/// A text element (any string VR), its value made valid for the VR by [`clean_text`]: text
/// from a model, a server or a user never writes a character the VR forbids.
#[must_use]
pub fn text(tag: dicom_core::Tag, vr: VR, value: &str) -> DataElement<InMemDicomObject> {
    DataElement::new(
        tag,
        vr,
        PrimitiveValue::from(clean_text(vr, value).as_ref()),
    )
}

/// The longest value, in characters, of the text VRs that have one (PS3.5 table 6.2-1; a
/// person name's limit is per component group).
#[must_use]
pub fn max_chars(vr: VR) -> Option<usize> {
    match vr {
        VR::SH => Some(16),
        VR::LO | VR::PN => Some(64),
        VR::ST => Some(1024),
        VR::LT => Some(10240),
        _ => None,
    }
}

/// `value` made valid for `vr`, the one place Keyslice does it:
/// - a control character (ESC, BEL, NUL, …) becomes U+FFFD, except that the free-text VRs
///   (ST, LT, UT) keep tab, line feed, form feed and carriage return;
/// - in a single-valued text VR (SH, LO) a `\` (the value delimiter) becomes `/`, so one value
///   never reads as two;
/// - SH, LO, ST and LT are cut to their length, ending in `…` when cut.
///
/// Person names are checked before they get here ([`check_person_name`] names the field);
/// a name that was not keeps its components but loses control characters.
#[must_use]
pub fn clean_text(vr: VR, value: &str) -> std::borrow::Cow<'_, str> {
    let free_text = matches!(vr, VR::ST | VR::LT | VR::UT);
    let single_valued = matches!(vr, VR::SH | VR::LO);
    let limit = if vr == VR::PN { None } else { max_chars(vr) };
    let bad = |c: char| {
        (c.is_control() && !(free_text && matches!(c, '\t' | '\n' | '\r' | '\u{c}')))
            || (single_valued && c == '\\')
    };
    let too_long = limit.is_some_and(|limit| value.chars().count() > limit);
    if !too_long && !value.chars().any(bad) {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut out: String = value
        .chars()
        .map(|c| match c {
            '\\' if single_valued => '/',
            c if bad(c) => '\u{fffd}',
            c => c,
        })
        .collect();
    if let Some(limit) = limit
        && out.chars().count() > limit
    {
        out = out.chars().take(limit - 1).collect();
        out.push('…');
    }
    std::borrow::Cow::Owned(out)
}

/// Why a person's name cannot be written as a DICOM person name (PN).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PersonNameError {
    /// Empty or blank.
    #[error("{field} is empty")]
    Empty {
        /// The field or flag that holds the name.
        field: String,
    },
    /// It holds `\`, which DICOM reads as the start of a second name.
    #[error(
        "{field} holds a backslash (\\), which DICOM reads as a second person; write the name without it"
    )]
    Backslash {
        /// The field or flag that holds the name.
        field: String,
    },
    /// It holds a control character.
    #[error("{field} holds a control character (such as a tab or an escape); type the name again")]
    Control {
        /// The field or flag that holds the name.
        field: String,
    },
    /// A component group is longer than DICOM allows.
    #[error("{field} is {chars} characters long; a DICOM person name holds at most 64 per group")]
    TooLong {
        /// The field or flag that holds the name.
        field: String,
        /// Its length.
        chars: usize,
    },
}

/// Checks that `name` can be written as one DICOM person name (PN): not blank, no `\`, no
/// control character, at most 64 characters per component group (`=` separates the groups,
/// `^` the components). `field` names where the name came from (`--reviewer`).
pub fn check_person_name(field: &str, name: &str) -> Result<(), PersonNameError> {
    let field = field.to_string();
    if name.trim().is_empty() {
        return Err(PersonNameError::Empty { field });
    }
    if name.contains('\\') {
        return Err(PersonNameError::Backslash { field });
    }
    if name.chars().any(char::is_control) {
        return Err(PersonNameError::Control { field });
    }
    if let Some(chars) = name
        .split('=')
        .map(|group| group.chars().count())
        .find(|&chars| chars > 64)
    {
        return Err(PersonNameError::TooLong { field, chars });
    }
    Ok(())
}

/// Decimal strings (DS) of `values`, backslash-separated, without trailing zeros.
#[must_use]
pub fn decimals(values: &[f64]) -> String {
    values
        .iter()
        .map(|value| {
            let text = format!("{value:.6}");
            let text = text.trim_end_matches('0').trim_end_matches('.');
            if text == "-0" {
                "0".to_string()
            } else {
                text.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\\")
}

/// Writes `volume` as a CT series into `folder` (created; it must not exist), one file per
/// slice named `slice_NNNN.dcm`. The files go into a temporary sibling folder renamed into
/// place at the end, so `folder` is either complete or absent. Returns the file count.
pub fn write_ct_series(
    volume: &Volume,
    folder: &Path,
    identity: &SeriesIdentity,
) -> Result<usize, DicomError> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source: std::io::Error| DicomError::Write {
            path,
            reason: source.to_string(),
        }
    };
    if folder.exists() {
        return Err(DicomError::Write {
            path: folder.to_path_buf(),
            reason: "the output folder exists; a series is written into a new one".into(),
        });
    }
    let [columns, rows, slices] = volume.dims();
    let (Ok(columns_u16), Ok(rows_u16)) = (u16::try_from(columns), u16::try_from(rows)) else {
        return Err(DicomError::Write {
            path: folder.to_path_buf(),
            reason: "a slice larger than 65535 pixels".into(),
        });
    };
    if identity.accession.len() > 16 || identity.patient_id.len() > 64 {
        return Err(DicomError::Write {
            path: folder.to_path_buf(),
            reason: format!(
                "the accession number `{}` has more than 16 characters or the patient ID more than 64 (DICOM SH, LO)",
                identity.accession
            ),
        });
    }
    let affine = volume.patient_from_voxel();
    let geometry = format!("{columns}x{rows}x{slices}@{:?}", affine.translation);
    let study_uid = derived_uid(&[&identity.patient_id, &identity.accession, "study"]);
    let series_uid = derived_uid(&[
        &identity.patient_id,
        &identity.accession,
        &geometry,
        "series",
    ]);
    let frame_uid = derived_uid(&[&series_uid, "frame"]);
    let plan = SeriesPlan {
        study_uid,
        series_uid,
        frame_uid,
        columns_u16,
        rows_u16,
    };
    let parent = folder.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io_error(parent))?;
    let name = folder.file_name().map_or_else(
        || "series".to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    let temporary: PathBuf = parent.join(format!(".{name}.partial-{}", std::process::id()));
    let result = (|| {
        std::fs::create_dir_all(&temporary).map_err(io_error(&temporary))?;
        for k in 0..slices {
            let (sop_uid, object) = slice_object(volume, &plan, identity, k);
            let meta = FileMetaTableBuilder::new()
                .media_storage_sop_class_uid(uids::CT_IMAGE_STORAGE)
                .media_storage_sop_instance_uid(sop_uid.as_str())
                .transfer_syntax(uids::EXPLICIT_VR_LITTLE_ENDIAN)
                .build()
                .map_err(|error| DicomError::Write {
                    path: temporary.clone(),
                    reason: error.to_string(),
                })?;
            let path = temporary.join(format!("slice_{:04}.dcm", k + 1));
            object
                .with_exact_meta(meta)
                .write_to_file(&path)
                .map_err(|error| DicomError::Write {
                    path: path.clone(),
                    reason: error.to_string(),
                })?;
        }
        std::fs::rename(&temporary, folder).map_err(io_error(folder))
    })();
    if result.is_err() {
        // Best effort: the temporary folder is ours and incomplete.
        let _ = std::fs::remove_dir_all(&temporary);
    }
    result.map(|()| slices)
}

/// The geometry and UIDs every slice of one series shares.
struct SeriesPlan {
    study_uid: String,
    series_uid: String,
    frame_uid: String,
    columns_u16: u16,
    rows_u16: u16,
}

/// Slice `k` as a CT Image Storage data set; returns its SOP Instance UID too.
fn slice_object(
    volume: &Volume,
    plan: &SeriesPlan,
    identity: &SeriesIdentity,
    k: usize,
) -> (String, InMemDicomObject) {
    let SeriesPlan {
        study_uid,
        series_uid,
        frame_uid,
        ..
    } = plan;
    let affine = volume.patient_from_voxel();
    let [x, y, _] = volume.directions_lps();
    let spacing = volume.spacing_mm();
    let position = affine.apply([0.0, 0.0, k as f64]);
    let sop_uid = derived_uid(&[series_uid, &k.to_string()]);
    let mut object = InMemDicomObject::new_empty();
    object.put(text(tags::SPECIFIC_CHARACTER_SET, VR::CS, "ISO_IR 192"));
    object.put(text(tags::IMAGE_TYPE, VR::CS, "ORIGINAL\\PRIMARY\\AXIAL"));
    object.put(text(tags::SOP_CLASS_UID, VR::UI, uids::CT_IMAGE_STORAGE));
    object.put(text(tags::SOP_INSTANCE_UID, VR::UI, &sop_uid));
    object.put(text(tags::STUDY_DATE, VR::DA, &identity.study_date));
    object.put(text(tags::STUDY_TIME, VR::TM, "120000"));
    object.put(text(tags::ACCESSION_NUMBER, VR::SH, &identity.accession));
    object.put(text(tags::MODALITY, VR::CS, "CT"));
    object.put(text(tags::BODY_PART_EXAMINED, VR::CS, "ABDOMEN"));
    object.put(text(tags::LATERALITY, VR::CS, ""));
    object.put(text(tags::ACQUISITION_NUMBER, VR::IS, "1"));
    object.put(text(tags::MANUFACTURER, VR::LO, "Keyslice"));
    object.put(text(tags::REFERRING_PHYSICIAN_NAME, VR::PN, ""));
    object.put(text(
        tags::STUDY_DESCRIPTION,
        VR::LO,
        &identity.study_description,
    ));
    object.put(text(
        tags::SERIES_DESCRIPTION,
        VR::LO,
        &identity.series_description,
    ));
    object.put(text(tags::PATIENT_NAME, VR::PN, &identity.patient_name));
    object.put(text(tags::PATIENT_ID, VR::LO, &identity.patient_id));
    object.put(text(tags::PATIENT_BIRTH_DATE, VR::DA, ""));
    object.put(text(tags::PATIENT_SEX, VR::CS, "O"));
    object.put(text(
        tags::SLICE_THICKNESS,
        VR::DS,
        &decimals(&[spacing[2]]),
    ));
    object.put(text(tags::KVP, VR::DS, "120"));
    object.put(text(tags::PATIENT_POSITION, VR::CS, "FFS"));
    object.put(text(tags::STUDY_INSTANCE_UID, VR::UI, study_uid));
    object.put(text(tags::SERIES_INSTANCE_UID, VR::UI, series_uid));
    object.put(text(tags::STUDY_ID, VR::SH, "1"));
    object.put(text(tags::SERIES_NUMBER, VR::IS, "1"));
    object.put(text(tags::INSTANCE_NUMBER, VR::IS, &(k + 1).to_string()));
    object.put(text(
        tags::IMAGE_POSITION_PATIENT,
        VR::DS,
        &decimals(&position),
    ));
    object.put(text(
        tags::IMAGE_ORIENTATION_PATIENT,
        VR::DS,
        &decimals(&[x[0], x[1], x[2], y[0], y[1], y[2]]),
    ));
    object.put(text(tags::FRAME_OF_REFERENCE_UID, VR::UI, frame_uid));
    object.put(text(tags::POSITION_REFERENCE_INDICATOR, VR::LO, ""));
    object.put(text(
        tags::SLICE_LOCATION,
        VR::DS,
        &decimals(&[position[2]]),
    ));
    put_pixels(&mut object, volume, plan, k);
    (sop_uid, object)
}

/// The image pixel attributes and the pixel data of slice `k` (stored values = HU).
fn put_pixels(object: &mut InMemDicomObject, volume: &Volume, plan: &SeriesPlan, k: usize) {
    let [columns, rows, _] = volume.dims();
    let plane = columns * rows;
    let spacing = volume.spacing_mm();
    let (columns_u16, rows_u16) = (plan.columns_u16, plan.rows_u16);
    let stored: Vec<u8> = (0..plane)
        .flat_map(|n| {
            let index = k * plane + n;
            let value = match volume.voxels() {
                Voxels::I16(values) => values[index],
                Voxels::F32(values) => values[index].round().clamp(-32768.0, 32767.0) as i16,
            };
            value.to_le_bytes()
        })
        .collect();
    let short = |tag, value: u16| DataElement::new(tag, VR::US, PrimitiveValue::from(value));
    object.put(short(tags::SAMPLES_PER_PIXEL, 1));
    object.put(text(
        tags::PHOTOMETRIC_INTERPRETATION,
        VR::CS,
        "MONOCHROME2",
    ));
    object.put(short(tags::ROWS, rows_u16));
    object.put(short(tags::COLUMNS, columns_u16));
    object.put(text(
        tags::PIXEL_SPACING,
        VR::DS,
        &decimals(&[spacing[1], spacing[0]]),
    ));
    object.put(short(tags::BITS_ALLOCATED, 16));
    object.put(short(tags::BITS_STORED, 16));
    object.put(short(tags::HIGH_BIT, 15));
    object.put(short(tags::PIXEL_REPRESENTATION, 1));
    object.put(text(tags::WINDOW_CENTER, VR::DS, "40"));
    object.put(text(tags::WINDOW_WIDTH, VR::DS, "400"));
    object.put(text(tags::RESCALE_INTERCEPT, VR::DS, "0"));
    object.put(text(tags::RESCALE_SLOPE, VR::DS, "1"));
    object.put(text(tags::RESCALE_TYPE, VR::LO, "HU"));
    object.put(DataElement::new(
        tags::PIXEL_DATA,
        VR::OW,
        PrimitiveValue::from(stored),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_values_never_carry_what_their_vr_forbids() {
        // A model's text with ESC, BEL and NUL: free text keeps its lines, loses the rest.
        assert_eq!(
            clean_text(VR::UT, "Liver\u{1b}[2J lesion\u{7}\u{0}\nline two\ttab"),
            "Liver\u{fffd}[2J lesion\u{fffd}\u{fffd}\nline two\ttab"
        );
        // A single value never reads as two, and never holds a line break.
        assert_eq!(clean_text(VR::LO, "model\\v2\nx"), "model/v2\u{fffd}x");
        // Multi-valued code strings keep their delimiter.
        assert_eq!(
            clean_text(VR::CS, "ORIGINAL\\PRIMARY\\AXIAL"),
            "ORIGINAL\\PRIMARY\\AXIAL"
        );
        // Cut to the VR's length, and marked.
        let long = "x".repeat(100);
        let cut = clean_text(VR::LO, &long);
        assert_eq!(cut.chars().count(), 64);
        assert!(cut.ends_with('…'));
        assert_eq!(clean_text(VR::SH, &long).chars().count(), 16);
        // Clean text is not copied.
        assert!(matches!(
            clean_text(VR::LO, "Keyslice review"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn person_names_that_dicom_would_misread_are_refused_naming_the_field() {
        assert!(check_person_name("--reviewer", "Ana^Lopez").is_ok());
        assert!(check_person_name("--reviewer", "Ana Lopez").is_ok());
        let error = check_person_name("--reviewer", "Ana\\Evil^Q").unwrap_err();
        assert!(matches!(error, PersonNameError::Backslash { .. }));
        assert!(
            error
                .to_string()
                .starts_with("--reviewer holds a backslash")
        );
        assert!(matches!(
            check_person_name("--reviewer", "Ana\u{1b}"),
            Err(PersonNameError::Control { .. })
        ));
        assert!(matches!(
            check_person_name("--reviewer", "  "),
            Err(PersonNameError::Empty { .. })
        ));
        let error = check_person_name("--patient-name", &"A".repeat(65)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--patient-name is 65 characters long; a DICOM person name holds at most 64 per group"
        );
        // Each component group has its own limit.
        let groups = format!("{}={}", "A".repeat(60), "B".repeat(60));
        assert!(check_person_name("--reviewer", &groups).is_ok());
    }
}
