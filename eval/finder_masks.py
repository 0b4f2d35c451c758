#!/usr/bin/env python3
"""How much the organ masks limit keyslice-tiny's finder (an experiment whose
outcome the model card's table of variants summarises).

    cargo run --release --example finder_dump -- MODEL_DIR CASES_DIR > dump.tsv
    python3 eval/finder_masks.py dump.tsv

Prints, per organ: the share of lesion pixels inside the model's organ mask (the finder
looks only there), and the separability (AUC) of the finder's largest slab probability per
case through the model's masks and through the true masks. Standard library only.
"""

import collections
import csv
import sys

ORGANS = ["liver", "pancreas", "kidney_left", "kidney_right"]


def auc(positives, negatives):
    if not positives or not negatives:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / len(positives) / len(negatives)


def main():
    rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
    by_case = collections.defaultdict(list)
    lesion = collections.Counter()
    covered = collections.Counter()
    for row in rows:
        organ = int(row["organ"])
        by_case[(row["case"], organ)].append(row)
        lesion[organ] += int(row["lesion_px"])
        covered[organ] += int(row["covered_px"])
    print(f"{len({case for case, _ in by_case})} cases")
    for organ, name in enumerate(ORGANS):
        scores = {"p_pred": ([], []), "p_true": ([], [])}
        for (_, o), case_rows in by_case.items():
            if o != organ:
                continue
            tumor = any(int(r["lesion_px"]) > 0 for r in case_rows)
            for key, (positives, negatives) in scores.items():
                largest = max(max(float(r[key]), 0.0) for r in case_rows)
                (positives if tumor else negatives).append(largest)
        share = covered[organ] / lesion[organ] if lesion[organ] else float("nan")
        print(f"  {name:13s} lesion pixels inside the mask {share:.3f}; "
              f"AUC model's masks {auc(*scores['p_pred']):.3f}, "
              f"true masks {auc(*scores['p_true']):.3f} "
              f"({len(scores['p_pred'][0])} with a tumor, {len(scores['p_pred'][1])} without)")


if __name__ == "__main__":
    main()
