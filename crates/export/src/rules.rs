//! The one rule set every exported answer satisfies, whatever the format: training data
//! must not contradict itself.
//!
//! [`reconcile`] first brings a reviewed answer into agreement with what the reviewer said:
//! an organ set to no tumor (or not mentioned) keeps no lesion; the model's evidence box is
//! dropped when the reviewer moved the key slice or changed which organs have a tumor and did
//! not draw a box of their own (the box was the model's, on the model's slice), and the
//! model's lesion slice range when it does not hold the reviewer's key slice. [`check`]
//! then tests the rules against the CT the answer describes; a case that fails is left out
//! of the export with the rule it broke:
//!
//! 1. an organ with lesions is reported with a tumor (present or uncertain);
//! 2. the key slice is an axial slice of the volume (0-based index below the slice count);
//! 3. a box needs a key slice, and lies inside that slice, its corners in order;
//! 4. the lesion's slice range lies in the volume, in order, and holds the key slice.

use keyslice_core::findings::{Findings, evidence_problems};

/// The correction field of the evidence box.
const BOX_FIELD: &str = "box";

/// Makes the reviewed `findings` agree with themselves (see the module documentation).
/// `model` is the model's answer before review; `changed` the fields the reviewer changed.
pub fn reconcile(findings: &mut Findings, model: Option<&Findings>, changed: &[String]) {
    findings.drop_contradictions();
    // A slice range that no longer holds the key slice the reviewer chose was the model's.
    let range_set = changed.iter().any(|field| field == "lesion_slices");
    if !range_set
        && let (Some(range), Some(key)) = (findings.lesion_slices, &findings.key_slice)
        && !range.contains(key.index)
    {
        findings.lesion_slices = None;
    }
    let reviewer_drew_box = changed
        .iter()
        .any(|field| field == BOX_FIELD || field.starts_with("box."));
    if reviewer_drew_box || findings.slice_box.is_none() {
        return;
    }
    let Some(model) = model else {
        return;
    };
    let key_index = |findings: &Findings| findings.key_slice.as_ref().map(|key| key.index);
    let positive = |findings: &Findings| {
        findings
            .organs
            .iter()
            .filter(|(_, organ)| organ.tumor.as_positive())
            .map(|(organ, _)| *organ)
            .collect::<Vec<_>>()
    };
    if key_index(findings) != key_index(model) || positive(findings) != positive(model) {
        findings.slice_box = None;
    }
}

/// `Ok` when `findings` keep every rule on a CT of `dims` (columns, rows, slices); otherwise
/// the first rule broken, as a sentence.
pub(crate) fn check(findings: &Findings, dims: [usize; 3]) -> Result<(), String> {
    for (organ, organ_findings) in &findings.organs {
        if !organ_findings.lesions.is_empty() && !organ_findings.tumor.as_positive() {
            return Err(format!(
                "{} lists {} lesion(s) but is reported without a tumor",
                organ.key(),
                organ_findings.lesions.len()
            ));
        }
    }
    // Rules 2 to 4: the evidence checks every prediction also passes.
    match evidence_problems(findings, dims).into_iter().next() {
        Some(problem) => Err(problem),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyslice_core::findings::{KeySlice, Lesion, Organ, SliceBox, SliceRange, TumorPresence};

    fn key(index: u32) -> KeySlice {
        KeySlice {
            index,
            z_mm: None,
            sop_instance_uid: None,
            span: None,
        }
    }

    #[test]
    fn every_rule_names_what_it_found() {
        let dims = [64, 48, 20];
        let mut findings = Findings::default();
        assert_eq!(check(&findings, dims), Ok(()));
        findings
            .organ_mut(Organ::Liver)
            .lesions
            .push(Lesion::default());
        assert!(check(&findings, dims).is_err_and(|rule| rule.contains("liver lists 1 lesion")));
        findings.organ_mut(Organ::Liver).tumor = TumorPresence::Yes;
        findings.key_slice = Some(key(20));
        assert!(check(&findings, dims).is_err_and(|rule| rule.contains("key slice 20")));
        findings.key_slice = Some(key(19));
        findings.slice_box = Some(SliceBox {
            voxels: [10, 10, 64, 20],
            mm: None,
        });
        assert!(check(&findings, dims).is_err_and(|rule| rule.contains("outside the 64 × 48")));
        findings.slice_box = Some(SliceBox {
            voxels: [30, 10, 20, 20],
            mm: None,
        });
        assert!(check(&findings, dims).is_err_and(|rule| rule.contains("out of order")));
        findings.slice_box = Some(SliceBox {
            voxels: [10, 10, 20, 20],
            mm: None,
        });
        assert_eq!(check(&findings, dims), Ok(()));
        findings.lesion_slices = Some(SliceRange { first: 2, last: 9 });
        assert!(
            check(&findings, dims)
                .is_err_and(|rule| rule.contains("does not hold the key slice 19"))
        );
    }

    #[test]
    fn a_negative_answer_carries_no_box_and_no_lesion_slice_range() {
        let mut findings = Findings {
            key_slice: Some(key(30)),
            lesion_slices: Some(SliceRange {
                first: 23,
                last: 54,
            }),
            slice_box: Some(SliceBox {
                voxels: [10, 10, 20, 20],
                mm: None,
            }),
            ..Findings::default()
        };
        reconcile(&mut findings, None, &[]);
        assert_eq!(findings.lesion_slices, None);
        assert_eq!(findings.slice_box, None);
        assert_eq!(findings.key_slice, Some(key(30)));
    }

    #[test]
    fn a_reviewers_no_tumor_drops_the_lesion_and_a_moved_key_slice_the_models_box() {
        let mut model = Findings::default();
        model.organ_mut(Organ::Liver).tumor = TumorPresence::Yes;
        model
            .organ_mut(Organ::Liver)
            .lesions
            .push(Lesion::default());
        model.key_slice = Some(key(5));
        model.slice_box = Some(SliceBox {
            voxels: [1, 1, 4, 4],
            mm: None,
        });
        let mut reviewed = model.clone();
        reviewed.organ_mut(Organ::Liver).tumor = TumorPresence::No;
        reviewed.key_slice = Some(key(9));
        reconcile(
            &mut reviewed,
            Some(&model),
            &["key_slice".into(), "liver.tumor".into()],
        );
        assert!(reviewed.organ(Organ::Liver).lesions.is_empty());
        assert_eq!(reviewed.slice_box, None);
        // The reviewer's own box stays.
        let mut drawn = model.clone();
        drawn.key_slice = Some(key(9));
        reconcile(
            &mut drawn,
            Some(&model),
            &["box".into(), "key_slice".into()],
        );
        assert!(drawn.slice_box.is_some());
    }
}
