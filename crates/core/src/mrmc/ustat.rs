//! The U-statistic moments of the reader-averaged AUC and their coefficients (Gallas 2006,
//! 2009), for a design where any reader may have read any case in any modality.
//!
//! For modalities A and B (the same one for a variance, two for a covariance) and reader r,
//! `s_A(r, i, j)` is 1 when r scored positive case j above negative case i in A, ½ on a tie,
//! 0 below; `d_A(r, i, j)` is 1 when r read both in A. The eight moments M1…M8 average
//! `s_A · s_B` over pairs of (reader, negative, positive) that share the reader, the negative
//! and the positive (M1), … , or none of them (M8); each is a ratio of sums of `d_A·s_A·d_B·s_B`
//! over those pairs to sums of `d_A·d_B`, the pairs that share more taken out of the sums of
//! those that share less (the "bias to unbiased" differences). The covariance is
//! `Σ c_k M_k` with `c_k` the denominators over the product of the pair counts, and 1 taken
//! from `c_8`.

use super::Reads;

/// The analysis of one modality, or of two and their difference.
pub(super) struct Stats {
    pub auc_a: f64,
    pub var_a: f64,
    pub auc_b: Option<f64>,
    pub var_b: Option<f64>,
    pub var_difference: Option<f64>,
    /// The BDG degrees of freedom of A's AUC, or of the difference when there is a B.
    pub df: f64,
}

/// What the BDG degrees of freedom are made of, as iMRMC makes them (`doAUCmrmcCov`): the
/// negative-case, positive-case and reader degrees of freedom read from the moment
/// coefficients (`round(1 / coefficient − 1)`: with reads missing, the effective counts), and
/// the biased BCK components of the same three.
#[derive(Clone, Copy)]
struct DfParts {
    /// Degrees of freedom of negatives, positives and readers.
    df: [f64; 3],
    /// The biased BCK components N, D and R.
    bck: [f64; 3],
}

/// The moments M1…M8 and coefficients c1…c8 of the covariance of the reader-averaged AUCs of
/// modalities `a` and `b` over `readers`, and the AUC of `a`.
struct Moments {
    m: [f64; 8],
    /// The biased moments: each sum over pairs sharing at least …, over its own count.
    m_biased: [f64; 8],
    c: [f64; 8],
    auc_a: f64,
}

impl Moments {
    fn covariance(&self) -> f64 {
        self.m.iter().zip(&self.c).map(|(m, c)| m * c).sum()
    }

    /// The degrees of freedom and biased BCK components behind the BDG degrees of freedom.
    /// A component whose coefficient is zero (a design that pairs nothing of its kind) is
    /// zero, as in iMRMC.
    fn df_parts(&self) -> DfParts {
        let c = &self.c;
        let coefficients = [
            c[0] + c[2] + c[4] + c[6],
            c[0] + c[1] + c[4] + c[5],
            c[0] + c[1] + c[2] + c[3],
        ];
        let biased = bck_of(&self.m_biased);
        let components = [biased[0], biased[1], biased[3]];
        let mut bck = [0.0; 3];
        let mut df = [0.0; 3];
        for k in 0..3 {
            if coefficients[k] != 0.0 {
                bck[k] = components[k];
            }
            // R's round(): halves to even.
            df[k] = (1.0 / coefficients[k] - 1.0).round_ties_even();
        }
        DfParts { df, bck }
    }
}

/// The BDG (Satterthwaite) degrees of freedom as iMRMC computes them: the variance squared
/// over Σ component² ÷ df³ of negatives, positives and readers, bounded below by the smallest
/// of those degrees of freedom (Gaylor 1969); not a number when the variance is negative.
fn bdg(variance: f64, parts: &DfParts) -> f64 {
    if variance < 0.0 {
        return f64::NAN;
    }
    let spread: f64 = (0..3)
        .map(|k| parts.bck[k] * parts.bck[k] / parts.df[k].powi(3))
        .sum();
    let least = parts.df.iter().copied().fold(f64::INFINITY, f64::min);
    let df = variance * variance / spread;
    if df < least { least } else { df }
}

/// BCK components from moments (Gallas 2009, the map iMRMC applies).
fn bck_of(m: &[f64; 8]) -> [f64; 7] {
    [
        m[6] - m[7],
        m[5] - m[7],
        m[4] - m[5] - m[6] + m[7],
        m[3] - m[7],
        m[2] - m[3] - m[6] + m[7],
        m[1] - m[3] - m[5] + m[7],
        m[0] - m[1] - m[2] + m[3] - m[4] + m[5] + m[6] - m[7],
    ]
}

/// One reader's scores in one modality: negatives then positives, `None` where not read.
fn scores(reads: &Reads, reader: usize, modality: usize) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    let n0 = reads.negatives.len();
    let negatives = (0..n0).map(|i| reads.score(reader, i, modality)).collect();
    let positives = (0..reads.positives.len())
        .map(|j| reads.score(reader, n0 + j, modality))
        .collect();
    (negatives, positives)
}

/// A reader's `d·s` and `d` matrices (negatives × positives, row-major) in one modality.
fn kernel(negatives: &[Option<f64>], positives: &[Option<f64>]) -> (Vec<f64>, Vec<f64>) {
    let mut success = Vec::with_capacity(negatives.len() * positives.len());
    let mut design = Vec::with_capacity(negatives.len() * positives.len());
    for negative in negatives {
        for positive in positives {
            if let (Some(negative), Some(positive)) = (negative, positive) {
                design.push(1.0);
                success.push(match positive.partial_cmp(negative) {
                    Some(std::cmp::Ordering::Greater) => 1.0,
                    Some(std::cmp::Ordering::Equal) => 0.5,
                    _ => 0.0,
                });
            } else {
                design.push(0.0);
                success.push(0.0);
            }
        }
    }
    (success, design)
}

/// Sums over a negatives × positives matrix: over negatives for each positive (columns),
/// over positives for each negative (rows), and in all.
struct Margins {
    columns: Vec<f64>,
    rows: Vec<f64>,
    total: f64,
}

fn margins(matrix: &[f64], n0: usize, n1: usize) -> Margins {
    let mut columns = vec![0.0; n1];
    let mut rows = vec![0.0; n0];
    for i in 0..n0 {
        for j in 0..n1 {
            let value = matrix[i * n1 + j];
            columns[j] += value;
            rows[i] += value;
        }
    }
    Margins {
        total: rows.iter().sum(),
        columns,
        rows,
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn add(into: &mut [f64], from: &[f64]) {
    for (to, value) in into.iter_mut().zip(from) {
        *to += value;
    }
}

/// Sums over readers of one matrix kind (`d` or `d·s`) for A and for B.
struct Totals {
    matrix: [Vec<f64>; 2],
    columns: [Vec<f64>; 2],
    rows: [Vec<f64>; 2],
    total: [f64; 2],
}

impl Totals {
    fn new(n0: usize, n1: usize) -> Self {
        Self {
            matrix: [vec![0.0; n0 * n1], vec![0.0; n0 * n1]],
            columns: [vec![0.0; n1], vec![0.0; n1]],
            rows: [vec![0.0; n0], vec![0.0; n0]],
            total: [0.0; 2],
        }
    }

    /// Adds one reader's A and B matrices; returns that reader's four within-reader sums.
    fn add_reader(&mut self, a: &[f64], b: &[f64], n0: usize, n1: usize) -> [f64; 4] {
        let (margin_a, margin_b) = (margins(a, n0, n1), margins(b, n0, n1));
        let within = [
            dot(a, b),
            dot(&margin_a.columns, &margin_b.columns),
            dot(&margin_a.rows, &margin_b.rows),
            margin_a.total * margin_b.total,
        ];
        for (k, (matrix, margin)) in [(a, &margin_a), (b, &margin_b)].into_iter().enumerate() {
            add(&mut self.matrix[k], matrix);
            add(&mut self.columns[k], &margin.columns);
            add(&mut self.rows[k], &margin.rows);
            self.total[k] += margin.total;
        }
        within
    }

    /// The four across-reader sums.
    fn across(&self) -> [f64; 4] {
        [
            dot(&self.matrix[0], &self.matrix[1]),
            dot(&self.columns[0], &self.columns[1]),
            dot(&self.rows[0], &self.rows[1]),
            self.total[0] * self.total[1],
        ]
    }
}

/// From sums over pairs that share at least … to sums over pairs that share exactly ….
fn unbiased(biased: &[f64; 8]) -> [f64; 8] {
    let b = biased;
    [
        b[0],
        b[1] - b[0],
        b[2] - b[0],
        b[0] - b[1] - b[2] + b[3],
        b[4] - b[0],
        b[0] - b[1] - b[4] + b[5],
        b[0] - b[2] - b[4] + b[6],
        -b[0] + b[1] + b[2] - b[3] + b[4] - b[5] - b[6] + b[7],
    ]
}

fn moments(reads: &Reads, readers: &[usize], a: usize, b: usize) -> Moments {
    let (n0, n1) = (reads.negatives.len(), reads.positives.len());
    let mut numerator = [0.0; 8];
    let mut denominator = [0.0; 8];
    let mut success = Totals::new(n0, n1);
    let mut design = Totals::new(n0, n1);
    for &reader in readers {
        let (negatives_a, positives_a) = scores(reads, reader, a);
        let (negatives_b, positives_b) = scores(reads, reader, b);
        let (s_a, d_a) = kernel(&negatives_a, &positives_a);
        let (s_b, d_b) = kernel(&negatives_b, &positives_b);
        let within_s = success.add_reader(&s_a, &s_b, n0, n1);
        let within_d = design.add_reader(&d_a, &d_b, n0, n1);
        for k in 0..4 {
            numerator[k] += within_s[k];
            denominator[k] += within_d[k];
        }
    }
    numerator[4..].copy_from_slice(&success.across());
    denominator[4..].copy_from_slice(&design.across());
    let mut m_biased = numerator;
    for k in 0..8 {
        if denominator[k] != 0.0 {
            m_biased[k] = numerator[k] / denominator[k];
        }
    }
    let (numerator, denominator) = (unbiased(&numerator), unbiased(&denominator));
    let pairs = design.total[0] * design.total[1];
    let mut m = [0.0; 8];
    let mut c = [0.0; 8];
    for k in 0..8 {
        // No pair of this kind (one reader has no other reader, say): the moment is not
        // estimated, and its coefficient is zero.
        if denominator[k] > 0.5 {
            m[k] = numerator[k] / denominator[k];
        }
        c[k] = denominator[k] / pairs;
    }
    // The square of the mean comes off the moment of pairs that share nothing: with one
    // reader (a per-reader analysis, cases random) that is M4, pairs of the same reader.
    if readers.len() == 1 {
        c[3] -= 1.0;
    } else {
        c[7] -= 1.0;
    }
    Moments {
        m,
        m_biased,
        c,
        auc_a: success.total[0] / design.total[0],
    }
}

/// AUCs, variances and BCK components of modality `a` (and `b` and the difference).
pub(super) fn analyse(reads: &Reads, readers: &[usize], a: usize, b: Option<usize>) -> Stats {
    let aa = moments(reads, readers, a, a);
    let parts_a = aa.df_parts();
    let Some(b) = b else {
        return Stats {
            auc_a: aa.auc_a,
            var_a: aa.covariance(),
            auc_b: None,
            var_b: None,
            var_difference: None,
            df: bdg(aa.covariance(), &parts_a),
        };
    };
    let bb = moments(reads, readers, b, b);
    let ab = moments(reads, readers, a, b);
    let (parts_b, parts_ab) = (bb.df_parts(), ab.df_parts());
    // The difference (iMRMC's `doDFdifference`): each degree of freedom the smaller of A's
    // and B's, each component A's and B's less twice their covariance's.
    let mut difference = DfParts {
        df: [0.0; 3],
        bck: [0.0; 3],
    };
    for k in 0..3 {
        difference.df[k] = parts_a.df[k].min(parts_b.df[k]);
        difference.bck[k] = parts_a.bck[k] + parts_b.bck[k] - 2.0 * parts_ab.bck[k];
    }
    let var_difference = aa.covariance() + bb.covariance() - 2.0 * ab.covariance();
    Stats {
        auc_a: aa.auc_a,
        var_a: aa.covariance(),
        auc_b: Some(bb.auc_a),
        var_b: Some(bb.covariance()),
        var_difference: Some(var_difference),
        df: bdg(var_difference, &difference),
    }
}
