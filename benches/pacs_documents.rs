//! Criterion benchmark: writing one case's AI result as a TID 1500 Comprehensive 3D SR plus
//! its Key Object Selection (target: under 50 ms per case), and reading the SR back.
//! The retrieve benchmark against Orthanc's own archive download is `benches/pacs_retrieve.sh`.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use keyslice::findings::{
    Attenuation, Findings, KeySlice, Lesion, LesionSize, LesionSpans, Location, Organ, SliceBox,
    TumorPresence,
};
use keyslice::pacs::sr::read::read_bytes;
use keyslice::pacs::sr::write::{key_object_selection, result_sr};
use keyslice::pacs::sr::{CaseResult, Observer, StudyContext};
use keyslice::prediction::ModelId;
use keyslice::scoring::Consistency;

/// A result with a lesion in every organ, a key slice and a box: the largest document Keyslice
/// writes for one case.
fn result() -> CaseResult {
    let mut findings = Findings::default();
    for organ in Organ::ALL {
        let entry = findings.organ_mut(organ);
        entry.tumor = TumorPresence::Yes;
        entry.lesions.push(Lesion {
            size: Some(LesionSize {
                long_cm: 3.2,
                short_cm: Some(2.1),
            }),
            location: (organ == Organ::Liver).then(|| Location::LiverSegments(vec![6, 7])),
            attenuation: Some(Attenuation::Hypo),
            count: None,
            evidence: None,
            spans: LesionSpans::default(),
        });
    }
    findings.key_slice = Some(KeySlice {
        index: 120,
        z_mm: Some(240.0),
        sop_instance_uid: Some("1.2.826.0.1.3680043.8.498.1234567890".into()),
        span: None,
    });
    findings.slice_box = Some(SliceBox {
        voxels: [200, 180, 260, 240],
        mm: None,
    });
    let model = ModelId {
        id: "keyslice-tiny".into(),
        version: "6".into(),
    };
    CaseResult {
        observer: Observer::Device {
            model: model.clone(),
        },
        algorithm: model.clone(),
        verifier: Some(model),
        findings,
        report: Some("Liver: a 3.2 x 2.1 cm hypoattenuating lesion in segments 6/7. ".repeat(8)),
        local_description: Some("Slice 120: a hypoattenuating liver lesion, 3.1 cm.".into()),
        consistency: Some(Consistency {
            score: 0.8,
            organ: 1.0,
            location: Some(1.0),
            attenuation: Some(1.0),
            size: Some(0.0),
            region: None,
            findings: Vec::new(),
        }),
        out_of_domain: None,
        lesion_images: Vec::new(),
    }
}

fn bench(c: &mut Criterion) {
    let study = StudyContext::from_file(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dicom/CT_small.dcm"),
    )
    .expect("the committed CT sample");
    let case = result();
    c.bench_function("pacs/write_sr_and_kos", |b| {
        b.iter(|| {
            let sr = result_sr(black_box(&study), black_box(&case)).expect("SR");
            let kos = key_object_selection(&study, &case).expect("KOS");
            black_box((sr.bytes.len(), kos.bytes.len()))
        });
    });
    let sr = result_sr(&study, &case).expect("SR");
    c.bench_function("pacs/read_sr", |b| {
        b.iter(|| black_box(read_bytes(black_box(&sr.bytes)).expect("reads")));
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
