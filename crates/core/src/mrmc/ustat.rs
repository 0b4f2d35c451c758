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
struct Scores {
    negatives: Vec<Option<f64>>,
    positives: Vec<Option<f64>>,
}

fn scores(reads: &Reads, reader: usize, modality: usize) -> Scores {
    let n0 = reads.negatives.len();
    Scores {
        negatives: (0..n0).map(|i| reads.score(reader, i, modality)).collect(),
        positives: (0..reads.positives.len())
            .map(|j| reads.score(reader, n0 + j, modality))
            .collect(),
    }
}

/// What the analyses of one study share: each reading's scores and margins, and each pair of
/// readings' products, computed once however many tables and modality pairs use them.
pub(super) struct Cache<'a> {
    reads: &'a Reads,
    readings: std::collections::HashMap<(usize, usize), std::rc::Rc<Reading>>,
    products: std::collections::HashMap<[(usize, usize); 2], (f64, f64)>,
}

/// One reader's scores in one modality, with their margins.
struct Reading {
    scores: Scores,
    success: Margins,
    design: Margins,
}

impl<'a> Cache<'a> {
    /// The reads analysed.
    pub(super) fn reads(&self) -> &'a Reads {
        self.reads
    }

    pub(super) fn new(reads: &'a Reads) -> Self {
        Self {
            reads,
            readings: std::collections::HashMap::new(),
            products: std::collections::HashMap::new(),
        }
    }

    fn reading(&mut self, reader: usize, modality: usize) -> std::rc::Rc<Reading> {
        let reads = self.reads;
        std::rc::Rc::clone(self.readings.entry((reader, modality)).or_insert_with(|| {
            let scores = scores(reads, reader, modality);
            std::rc::Rc::new(Reading {
                success: Margins::success(&scores),
                design: Margins::design(&scores),
                scores,
            })
        }))
    }

    /// `(Σ s_A s_B, Σ d_A d_B)` of reader `r` in `a` and reader `q` in `b` (symmetric).
    fn product(&mut self, (r, a): (usize, usize), (q, b): (usize, usize)) -> (f64, f64) {
        let key = if (r, a) <= (q, b) {
            [(r, a), (q, b)]
        } else {
            [(q, b), (r, a)]
        };
        if let Some(&known) = self.products.get(&key) {
            return known;
        }
        let (first, second) = (self.reading(r, a), self.reading(q, b));
        let product = (
            success_product(&first.scores, &second.scores),
            design_product(&first.scores, &second.scores),
        );
        self.products.insert(key, product);
        product
    }
}

/// Sums of one reader's `d·s` (or `d`) matrix, negatives × positives, without the matrix:
/// over negatives for each positive (columns), over positives for each negative (rows), and
/// in all. Memory is linear in the cases, never their product.
struct Margins {
    columns: Vec<f64>,
    rows: Vec<f64>,
    total: f64,
}

impl Margins {
    fn zero(n0: usize, n1: usize) -> Self {
        Self {
            columns: vec![0.0; n1],
            rows: vec![0.0; n0],
            total: 0.0,
        }
    }

    /// The margins of `s`: a positive's column sums ½ for each read negative it ties and 1
    /// for each it is above; a negative's row, the same from the other side. By sorting:
    /// O(N log N).
    fn success(scores: &Scores) -> Self {
        let mut negatives: Vec<f64> = scores.negatives.iter().flatten().copied().collect();
        let mut positives: Vec<f64> = scores.positives.iter().flatten().copied().collect();
        negatives.sort_by(f64::total_cmp);
        positives.sort_by(f64::total_cmp);
        // ½ (#{v < x} + #{v ≤ x}) among `sorted`: the kernel summed against x.
        let half_ranks = |sorted: &[f64], x: f64| {
            let below = sorted.partition_point(|v| *v < x);
            let up_to = sorted.partition_point(|v| *v <= x);
            0.5 * (below + up_to) as f64
        };
        let columns: Vec<f64> = scores
            .positives
            .iter()
            .map(|y| y.map_or(0.0, |y| half_ranks(&negatives, y)))
            .collect();
        let rows: Vec<f64> = scores
            .negatives
            .iter()
            .map(|x| {
                x.map_or(0.0, |x| {
                    // Positives above x, and half of those equal.
                    positives.len() as f64 - half_ranks(&positives, x)
                })
            })
            .collect();
        Self {
            total: columns.iter().sum(),
            columns,
            rows,
        }
    }

    /// The margins of `d` (1 where both cases were read).
    fn design(scores: &Scores) -> Self {
        let read_negatives = scores.negatives.iter().flatten().count() as f64;
        let read_positives = scores.positives.iter().flatten().count() as f64;
        Self {
            columns: scores
                .positives
                .iter()
                .map(|y| if y.is_some() { read_negatives } else { 0.0 })
                .collect(),
            rows: scores
                .negatives
                .iter()
                .map(|x| if x.is_some() { read_positives } else { 0.0 })
                .collect(),
            total: read_negatives * read_positives,
        }
    }

    fn add(&mut self, other: &Self) {
        add(&mut self.columns, &other.columns);
        add(&mut self.rows, &other.rows);
        self.total += other.total;
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

/// `Σ_ij d_A(i, j) d_B(i, j)` of two readings (a reader's in A, a reader's in B): the pairs of
/// a negative read in both and a positive read in both.
fn design_product(a: &Scores, b: &Scores) -> f64 {
    let both = |x: &[Option<f64>], y: &[Option<f64>]| {
        x.iter()
            .zip(y)
            .filter(|(x, y)| x.is_some() && y.is_some())
            .count() as f64
    };
    both(&a.negatives, &b.negatives) * both(&a.positives, &b.positives)
}

/// `Σ_ij s_A(i, j) s_B(i, j)` of two readings, over the pairs [`design_product`] counts,
/// without the negatives × positives matrix: `s = (1[y > x] + 1[y ≥ x]) / 2`, so the product
/// is a quarter of four two-dimensional dominance counts (how many (negative, positive)
/// pairs have the positive above, or not below, in both readings), each a sweep over one
/// reading's scores with a Fenwick tree over the other's: O(N log N).
fn success_product(a: &Scores, b: &Scores) -> f64 {
    let pairs = |x: &[Option<f64>], y: &[Option<f64>]| -> Vec<(f64, f64)> {
        x.iter()
            .zip(y)
            .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
            .collect()
    };
    let mut negatives = pairs(&a.negatives, &b.negatives);
    let mut positives = pairs(&a.positives, &b.positives);
    if negatives.is_empty() || positives.is_empty() {
        return 0.0;
    }
    negatives.sort_by(|p, q| p.0.total_cmp(&q.0));
    positives.sort_by(|p, q| p.0.total_cmp(&q.0));
    let mut b_values: Vec<f64> = negatives.iter().map(|p| p.1).collect();
    b_values.sort_by(f64::total_cmp);
    b_values.dedup();
    let rank = |value: f64| b_values.partition_point(|v| *v < value);
    let negative_ranks: Vec<usize> = negatives.iter().map(|p| rank(p.1)).collect();
    // For each positive: how many distinct negative B-values lie below it, and up to it.
    let below: Vec<[usize; 2]> = positives
        .iter()
        .map(|p| {
            [
                b_values.partition_point(|v| *v < p.1),
                b_values.partition_point(|v| *v <= p.1),
            ]
        })
        .collect();
    let mut counted: u64 = 0;
    for strict_a in [true, false] {
        for strict_b in [true, false] {
            let mut tree = Fenwick::new(b_values.len());
            let mut inserted = 0;
            for (&(y_a, _), below) in positives.iter().zip(&below) {
                while inserted < negatives.len()
                    && if strict_a {
                        negatives[inserted].0 < y_a
                    } else {
                        negatives[inserted].0 <= y_a
                    }
                {
                    tree.add(negative_ranks[inserted]);
                    inserted += 1;
                }
                counted += tree.prefix(below[usize::from(!strict_b)]);
            }
        }
    }
    counted as f64 / 4.0
}

/// A Fenwick (binary indexed) tree of counts.
struct Fenwick {
    counts: Vec<u64>,
}

impl Fenwick {
    fn new(size: usize) -> Self {
        Self {
            counts: vec![0; size + 1],
        }
    }

    /// Counts one at `index` (from 0).
    fn add(&mut self, index: usize) {
        let mut at = index + 1;
        while at < self.counts.len() {
            self.counts[at] += 1;
            at += at & at.wrapping_neg();
        }
    }

    /// The count at indices below `end`.
    fn prefix(&self, end: usize) -> u64 {
        let mut at = end;
        let mut sum = 0;
        while at > 0 {
            sum += self.counts[at];
            at -= at & at.wrapping_neg();
        }
        sum
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

fn moments(cache: &mut Cache<'_>, readers: &[usize], a: usize, b: usize) -> Moments {
    let (n0, n1) = (cache.reads.negatives.len(), cache.reads.positives.len());
    let mut numerator = [0.0; 8];
    let mut denominator = [0.0; 8];
    // Summed over readers, for A and for B: the margins of `d·s` and of `d`.
    let mut success = [Margins::zero(n0, n1), Margins::zero(n0, n1)];
    let mut design = [Margins::zero(n0, n1), Margins::zero(n0, n1)];
    for &reader in readers {
        let (reading_a, reading_b) = (cache.reading(reader, a), cache.reading(reader, b));
        let (s_a, s_b) = (&reading_a.success, &reading_b.success);
        let (d_a, d_b) = (&reading_a.design, &reading_b.design);
        let (product_s, product_d) = cache.product((reader, a), (reader, b));
        let within_s = [
            product_s,
            dot(&s_a.columns, &s_b.columns),
            dot(&s_a.rows, &s_b.rows),
            s_a.total * s_b.total,
        ];
        let within_d = [
            product_d,
            dot(&d_a.columns, &d_b.columns),
            dot(&d_a.rows, &d_b.rows),
            d_a.total * d_b.total,
        ];
        for k in 0..4 {
            numerator[k] += within_s[k];
            denominator[k] += within_d[k];
        }
        success[0].add(s_a);
        success[1].add(s_b);
        design[0].add(d_a);
        design[1].add(d_b);
    }
    // Across readers: the matrices summed over readers, multiplied cell by cell, is the sum
    // over every pair of readers (a reader with itself included) of their cell products.
    let (mut across_s, mut across_d) = (0.0, 0.0);
    for &first in readers {
        for &second in readers {
            let (product_s, product_d) = cache.product((first, a), (second, b));
            across_s += product_s;
            across_d += product_d;
        }
    }
    numerator[4..].copy_from_slice(&[
        across_s,
        dot(&success[0].columns, &success[1].columns),
        dot(&success[0].rows, &success[1].rows),
        success[0].total * success[1].total,
    ]);
    denominator[4..].copy_from_slice(&[
        across_d,
        dot(&design[0].columns, &design[1].columns),
        dot(&design[0].rows, &design[1].rows),
        design[0].total * design[1].total,
    ]);
    let mut m_biased = numerator;
    for k in 0..8 {
        if denominator[k] != 0.0 {
            m_biased[k] = numerator[k] / denominator[k];
        }
    }
    let (numerator, denominator) = (unbiased(&numerator), unbiased(&denominator));
    let pairs = design[0].total * design[1].total;
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
        auc_a: success[0].total / design[0].total,
    }
}

/// AUCs, variances and BCK components of modality `a` (and `b` and the difference).
pub(super) fn analyse(
    cache: &mut Cache<'_>,
    readers: &[usize],
    a: usize,
    b: Option<usize>,
) -> Stats {
    let aa = moments(cache, readers, a, a);
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
    let bb = moments(cache, readers, b, b);
    let ab = moments(cache, readers, a, b);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The matrices the sums stand for, built cell by cell.
    fn kernel(x: Option<f64>, y: Option<f64>) -> (f64, f64) {
        match (x, y) {
            (Some(x), Some(y)) => match y.total_cmp(&x) {
                std::cmp::Ordering::Greater => (1.0, 1.0),
                std::cmp::Ordering::Equal => (0.5, 1.0),
                std::cmp::Ordering::Less => (0.0, 1.0),
            },
            _ => (0.0, 0.0),
        }
    }

    #[test]
    #[expect(
        clippy::float_cmp,
        reason = "sums of halves and quarters of small counts are exact"
    )]
    fn the_sums_without_matrices_equal_the_sums_over_the_matrices() {
        let mut rng = crate::rng::Rng::new(11);
        for _ in 0..50 {
            // Scores on a coarse grid (many ties), some not read.
            let mut draw = |n: usize| -> Vec<Option<f64>> {
                (0..n)
                    .map(|_| (rng.unit() > 0.2).then(|| (rng.unit() * 6.0).floor()))
                    .collect()
            };
            let (n0, n1) = (9, 7);
            let a = Scores {
                negatives: draw(n0),
                positives: draw(n1),
            };
            let b = Scores {
                negatives: draw(n0),
                positives: draw(n1),
            };
            let mut product = (0.0, 0.0);
            let mut columns = vec![0.0; n1];
            let mut rows = vec![0.0; n0];
            for i in 0..n0 {
                for j in 0..n1 {
                    let (s_a, d_a) = kernel(a.negatives[i], a.positives[j]);
                    let (s_b, d_b) = kernel(b.negatives[i], b.positives[j]);
                    product.0 += s_a * s_b;
                    product.1 += d_a * d_b;
                    columns[j] += s_a;
                    rows[i] += s_a;
                }
            }
            assert_eq!(success_product(&a, &b), product.0);
            assert_eq!(design_product(&a, &b), product.1);
            let margins = Margins::success(&a);
            assert_eq!(margins.columns, columns);
            assert_eq!(margins.rows, rows);
            assert_eq!(margins.total, columns.iter().sum::<f64>());
        }
    }
}
