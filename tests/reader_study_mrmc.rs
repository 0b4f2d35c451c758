//! The MRMC analysis against the FDA's iMRMC software: its own example study (5 readers, 40 +
//! 40 cases, two modalities) and the tables iMRMC 2.1.2 computes for it; then designs that
//! are not fully crossed, where the analysis must still hold together.

mod common;

use common::data;
use keyslice::mrmc::{Reads, parse_imrmc, reader_table, to_csv, ustat_table};
use keyslice::rng::Rng;

/// A CSV of iMRMC's as rows of (column → cell).
fn table(path: &str) -> Vec<Vec<(String, String)>> {
    let text = std::fs::read_to_string(data(path)).expect("reference table");
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .expect("header")
        .split(',')
        .map(|cell| cell.trim_matches('"').to_string())
        .collect();
    lines
        .map(|line| {
            header
                .iter()
                .cloned()
                .zip(
                    line.split(',')
                        .map(|cell| cell.trim_matches('"').to_string()),
                )
                .collect()
        })
        .collect()
}

/// Whether `ours` matches iMRMC's `theirs` for `column`: AUCs to 1e-9, the rest to 1e-6
/// relative.
fn assert_close(column: &str, ours: &str, theirs: &str, row: usize) {
    if theirs == "NA" || ours == "NA" {
        assert_eq!(ours, theirs, "row {row} {column}");
        return;
    }
    let (Ok(a), Ok(b)) = (ours.parse::<f64>(), theirs.parse::<f64>()) else {
        assert_eq!(ours, theirs, "row {row} {column}");
        return;
    };
    let tolerance = if column.starts_with("AUC") {
        1e-9
    } else {
        1e-6 * b.abs().max(1e-12)
    };
    assert!(
        (a - b).abs() <= tolerance,
        "row {row} {column}: ours {a}, iMRMC {b} (off by {:.3e})",
        (a - b).abs()
    );
}

/// Every cell of `ours` (a CSV of ours) against `reference`.
fn assert_tables_agree(ours: &str, reference: &str) {
    let theirs = table(reference);
    let mut lines = ours.lines();
    let header: Vec<String> = lines
        .next()
        .expect("header")
        .split(',')
        .map(|cell| cell.trim_matches('"').to_string())
        .collect();
    let rows: Vec<Vec<String>> = lines
        .map(|line| {
            line.split(',')
                .map(|cell| cell.trim_matches('"').to_string())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), theirs.len(), "{ours}");
    for (n, (row, reference_row)) in rows.iter().zip(&theirs).enumerate() {
        for (column, theirs) in reference_row {
            let at = header
                .iter()
                .position(|name| name == column)
                .unwrap_or_else(|| panic!("column {column} is missing"));
            assert_close(column, &row[at], theirs, n + 1);
        }
    }
}

#[test]
fn the_u_statistic_table_of_imrmcs_example_is_reproduced() {
    let text = std::fs::read_to_string(data("imrmc/example.imrmc")).expect("example");
    let reads = parse_imrmc(&text).expect("parses");
    assert_eq!(
        (
            reads.readers.len(),
            reads.negatives.len(),
            reads.positives.len()
        ),
        (5, 40, 40)
    );
    let rows = ustat_table(&reads).expect("analysis");
    assert_tables_agree(&to_csv(&rows), "imrmc/example_Ustat.csv");
    let per_reader = reader_table(&reads).expect("per reader");
    assert_tables_agree(&to_csv(&per_reader), "imrmc/example_perReader.csv");
}

#[test]
fn reads_written_in_imrmcs_format_read_back_the_same() {
    let text = std::fs::read_to_string(data("imrmc/example.imrmc")).expect("example");
    let reads = parse_imrmc(&text).expect("parses");
    let again = parse_imrmc(&reads.to_imrmc(&["written by Keyslice"])).expect("parses again");
    assert_eq!(
        to_csv(&ustat_table(&again).expect("analysis")),
        to_csv(&ustat_table(&reads).expect("analysis"))
    );
}

#[test]
fn bad_files_say_which_line_and_what_is_wrong() {
    let cases = [
        ("no marker\n", "BEGIN DATA"),
        (
            "BEGIN DATA:\ntruth,c1,truth,2\n",
            "line 2: truth `2` is neither 0 nor 1",
        ),
        (
            "BEGIN DATA:\ntruth,c1,truth,0\nr1,c1,A\n",
            "line 3: 3 fields",
        ),
        (
            "BEGIN DATA:\ntruth,c1,truth,0\nr1,c1,A,high\n",
            "the score `high` is not a number",
        ),
        (
            "BEGIN DATA:\nr1,c9,A,0.5\n",
            "case `c9` has scores but no truth row",
        ),
        (
            "BEGIN DATA:\ntruth,c1,truth,0\nr\u{1b}[2J,c1,A,1\n",
            "line 3: a control character in a reader, case or modality name",
        ),
        (
            "BEGIN DATA:\ntruth,c1,truth,0\nr1,c1,A,1\nr1,c1,A,2\n",
            "line 4: reader `r1` scored case `c1` twice in modality `A`",
        ),
    ];
    for (text, expected) in cases {
        let error = parse_imrmc(text).expect_err(text).to_string();
        assert!(error.contains(expected), "{text:?}: {error}");
    }
    // One reader is not a random sample of readers.
    let one = Reads::from_rows(
        [("n1", false), ("n2", false), ("p1", true), ("p2", true)],
        [
            ("r1", "n1", "A", 0.1),
            ("r1", "n2", "A", 0.2),
            ("r1", "p1", "A", 0.9),
            ("r1", "p2", "A", 0.3),
        ],
    )
    .expect("reads");
    let error = ustat_table(&one).expect_err("one reader").to_string();
    assert!(error.contains("at least two"), "{error}");
    // A study of more case pairs than any matrix would hold (5,001 × 5,001, both readers
    // reading everything) is analysed in memory linear in the cases.
    let mut huge = String::from("BEGIN DATA:\n");
    huge.extend((0..5_001).map(|k| format!("truth,n{k},truth,0\ntruth,p{k},truth,1\n")));
    for reader in ["r1", "r2"] {
        huge.extend((0..5_001).map(|k| {
            let score = f64::from(k % 100) / 100.0;
            format!(
                "{reader},n{k},A,{score}\n{reader},p{k},A,{}\n",
                score + 0.995
            )
        }));
    }
    let rows = ustat_table(&parse_imrmc(&huge).expect("parses")).expect("analysed");
    let csv = to_csv(&rows);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let row: Vec<&str> = lines.next().expect("a row").split(',').collect();
    let column = |name: &str| {
        let at = header
            .iter()
            .position(|column| column.trim_matches('"') == name)
            .expect("a column");
        row[at].parse::<f64>().expect("a number")
    };
    // Every positive scored above every negative by both readers.
    assert!((column("AUCA") - 1.0).abs() < 1e-12, "{csv}");
    assert!(column("varAUCA").abs() < 1e-12, "{csv}");
}

/// A standard normal draw from `rng` (Box–Muller).
fn normal(rng: &mut Rng) -> f64 {
    let u = rng.unit().max(1e-300);
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * rng.unit()).cos()
}

#[test]
fn with_reads_missing_the_variance_estimate_is_unbiased() {
    // Roe–Metz studies: score = separation·truth + reader + case + reader×case + noise, each
    // effect its own per modality and shared in part between them. The design leaves out a
    // fixed 30 % of (reader, case) reads in modality B. Over many studies, the mean of the
    // estimated variance of AUC_A − AUC_B must match the spread of the estimates themselves.
    let (readers, negatives, positives, studies) = (6, 20, 20, 500_i32);
    let mut design = Rng::new(7);
    let missing: Vec<bool> = (0..readers * (negatives + positives))
        .map(|_| design.unit() < 0.3)
        .collect();
    let mut rng = Rng::new(11);
    let (mut differences, mut estimates) = (Vec::new(), Vec::new());
    for _ in 0..studies {
        let reader_effect: Vec<[f64; 2]> = (0..readers)
            .map(|_| {
                let shared = 0.3 * normal(&mut rng);
                [
                    shared + 0.2 * normal(&mut rng),
                    shared + 0.2 * normal(&mut rng),
                ]
            })
            .collect();
        let mut truth = Vec::new();
        let mut rows = Vec::new();
        let names: Vec<String> = (0..negatives + positives)
            .map(|k| format!("c{k}"))
            .collect();
        let reader_names: Vec<String> = (0..readers).map(|r| format!("r{r}")).collect();
        for (k, case) in names.iter().enumerate() {
            let positive = k >= negatives;
            truth.push((case.as_str(), positive));
            let shared = normal(&mut rng);
            let case_effect = [
                shared + 0.5 * normal(&mut rng),
                shared + 0.5 * normal(&mut rng),
            ];
            for (r, reader) in reader_names.iter().enumerate() {
                for (m, modality) in ["A", "B"].into_iter().enumerate() {
                    if m == 1 && missing[r * (negatives + positives) + k] {
                        continue;
                    }
                    let separation = if m == 0 { 1.2 } else { 1.5 };
                    let score = separation * f64::from(u8::from(positive))
                        + reader_effect[r][m]
                        + case_effect[m]
                        + 0.7 * normal(&mut rng);
                    rows.push((reader.as_str(), case.as_str(), modality, score));
                }
            }
        }
        let reads = Reads::from_rows(truth, rows).expect("reads");
        let table = ustat_table(&reads).expect("analysis");
        let row = &table[2];
        differences.push(row.AUCAminusAUCB.expect("a difference"));
        estimates.push(row.varAUCAminusAUCB.expect("a difference"));
    }
    let mean = differences.iter().sum::<f64>() / f64::from(studies);
    let spread =
        differences.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / f64::from(studies - 1);
    let estimated = estimates.iter().sum::<f64>() / f64::from(studies);
    // 500 studies: the spread itself is known to about ±6 % (one standard error).
    let ratio = estimated / spread;
    eprintln!(
        "mean estimate {estimated:.4e}, spread of the estimates {spread:.4e}, ratio {ratio:.3}"
    );
    assert!(
        (0.82..1.18).contains(&ratio),
        "mean estimate {estimated:.3e}, spread {spread:.3e}, ratio {ratio:.3}"
    );
}

fn write_lines(path: &std::path::Path, lines: &[serde_json::Value]) {
    let body: Vec<String> = lines.iter().map(ToString::to_string).collect();
    std::fs::write(path, body.join("\n") + "\n").expect("write");
}

#[test]
fn hallucinated_claims_are_named_and_the_consistency_ranks_them() {
    let folder = tempfile::tempdir().expect("temp dir");
    let truth = folder.path().join("truth.jsonl");
    write_lines(
        &truth,
        &[
            serde_json::json!({"case_id": "a", "report": "Liver: 3.0 cm hypoattenuating mass."}),
            serde_json::json!({"case_id": "b", "report": "Liver: 2.0 cm mass."}),
            serde_json::json!({"case_id": "c", "report": "No tumor in the liver, pancreas or kidneys."}),
            serde_json::json!({"case_id": "d", "report": "No tumor in the liver, pancreas or kidneys."}),
            serde_json::json!({"case_id": "e", "report": "Pancreas: 2.5 cm mass in the head."}),
            serde_json::json!({"case_id": "f", "report": "No tumor in the liver, pancreas or kidneys."}),
        ],
    );
    let pred = folder.path().join("pred.jsonl");
    write_lines(
        &pred,
        &[
            serde_json::json!({"case_id": "a", "report": "Liver: 3.0 cm hypoattenuating mass. Key slice: 40.", "local_description": "Slice 40: a 3.0 cm hypoattenuating lesion in the liver."}),
            serde_json::json!({"case_id": "b", "report": "Liver: 2.0 cm mass. Key slice: 12.", "local_description": "Slice 12: a 2.1 cm lesion in the liver."}),
            serde_json::json!({"case_id": "c", "report": "Liver: 2.5 cm mass. Key slice: 30.", "local_description": "Slice 30: no lesion is seen."}),
            serde_json::json!({"case_id": "d", "report": "Pancreas: 2.0 cm mass in the tail. Key slice: 20.", "local_description": "Slice 20: a 1.5 cm lesion in the left kidney."}),
            serde_json::json!({"case_id": "e", "report": "Pancreas: 2.5 cm mass in the head. Key slice: 18.", "local_description": "Slice 18: a 2.4 cm lesion in the pancreas."}),
            serde_json::json!({"case_id": "f", "report": "No tumor in the liver, pancreas or kidneys."}),
        ],
    );
    let imrmc = folder.path().join("claims.imrmc");
    let output = common::keyslice(&[
        "study",
        "hallucinations",
        "--pred",
        pred.to_str().expect("utf-8"),
        "--truth",
        truth.to_str().expect("utf-8"),
        "--json",
        "--imrmc",
        imrmc.to_str().expect("utf-8"),
    ]);
    assert!(output.status.success(), "{}", common::text(&output.stderr));
    let analysis: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(analysis["claims"], 5, "{analysis:#}");
    assert_eq!(analysis["hallucinated"], 2, "{analysis:#}");
    assert_eq!(analysis["grounded"], 3, "{analysis:#}");
    let named: Vec<(&str, &str)> = analysis["cases"]
        .as_array()
        .expect("claims")
        .iter()
        .filter_map(|claim| {
            let organ = claim["hallucinated"].as_array()?.first()?.as_str()?;
            Some((claim["case_id"].as_str()?, organ))
        })
        .collect();
    assert_eq!(named, [("c", "liver"), ("d", "pancreas")]);
    // Every hallucinated claim is less consistent than every grounded one here.
    assert_eq!(analysis["auroc"], 1.0, "{analysis:#}");
    // Per finding: the denied liver claim (c) and the unverified pancreas claim (d), whose
    // organ is not on its key slice, are the made-up ones; none is shown as agreeing.
    let findings = &analysis["findings"];
    assert_eq!(
        (findings["made_up"].as_u64(), findings["real"].as_u64()),
        (Some(2), Some(3)),
        "{findings:#}"
    );
    assert_eq!(findings["auroc"], 1.0, "{findings:#}");
    assert_eq!(findings["made_up_shown_agreeing"], 0.0, "{findings:#}");
    assert_eq!(findings["real_flagged"], 0.0, "{findings:#}");
    let standings: Vec<(&str, &str)> = findings["claims"]
        .as_array()
        .expect("claims")
        .iter()
        .filter(|claim| claim["made_up"] == true)
        .filter_map(|claim| Some((claim["case_id"].as_str()?, claim["standing"].as_str()?)))
        .collect();
    assert_eq!(standings, [("c", "denied"), ("d", "unverified")]);
    let high = analysis["mean_consistency_grounded"]
        .as_f64()
        .expect("a mean");
    let low = analysis["mean_consistency_hallucinated"]
        .as_f64()
        .expect("a mean");
    assert!(low < high, "{low} vs {high}");
    // The same AUROC from the reads written for iMRMC.
    let reads = parse_imrmc(&std::fs::read_to_string(&imrmc).expect("written")).expect("parses");
    let auroc = reader_table(&reads).expect("per reader")[0].AUCA;
    assert!((auroc - 1.0).abs() < 1e-12, "{auroc}");
}

/// A study with reads missing at random (iMRMC's own simulation, 40 of 440 reads removed):
/// every cell of iMRMC's U-statistic and per-reader tables, the BDG degrees of freedom with
/// their lower bound included.
#[test]
fn imrmcs_tables_of_a_study_with_missing_reads_are_reproduced() {
    let text = std::fs::read_to_string(data("imrmc/missing_reads.imrmc")).expect("reference");
    let reads = parse_imrmc(&text).expect("parses");
    let rows = ustat_table(&reads).expect("analysis");
    assert_tables_agree(&to_csv(&rows), "imrmc/missing_reads_Ustat.csv");
    let per_reader = reader_table(&reads).expect("per reader");
    assert_tables_agree(&to_csv(&per_reader), "imrmc/missing_reads_perReader.csv");
}

/// Studies made with the iMRMC R package (`tests/data/imrmc/make_reference.R`): a split-plot
/// design (each reader reads only their block's cases) and a sparse one (30 % of the reads
/// missing, where the variance of the difference comes out negative and iMRMC makes no test).
#[test]
fn imrmcs_tables_of_split_plot_and_sparse_studies_are_reproduced() {
    for name in ["split_plot", "sparse"] {
        let text = std::fs::read_to_string(data(&format!("imrmc/{name}.imrmc"))).expect("study");
        let reads = parse_imrmc(&text).expect("parses");
        let rows = ustat_table(&reads).expect("analysis");
        assert_tables_agree(&to_csv(&rows), &format!("imrmc/{name}_Ustat.csv"));
        let per_reader = reader_table(&reads).expect("per reader");
        assert_tables_agree(&to_csv(&per_reader), &format!("imrmc/{name}_perReader.csv"));
    }
}
