#!/usr/bin/env python3
"""Paired bootstrap of two models' held-out predictions (the model card's intervals).

    python3 eval/paired_bootstrap.py --cases eval-data/heldout-seed999-matrix128 \
        --base BASE.jsonl --new NEW.jsonl [--resamples 2000] [--seed 1]

BASE and NEW are `keyslice analyze --json` outputs on the same held-out cases (the
`pred.jsonl` that `eval/eval_tiny.py` writes). Resamples the cases with replacement
(the same draw for both models) and prints, for the mean balanced accuracy of the four
organs, each organ's balanced accuracy, the key-slice hit rate (the key slice inside a
true lesion's slice extent, as `keyslice score` counts it) and the attributes (the score's
attribute term, and size, location and attenuation right over all true lesions, matched as
`keyslice score` matches them: best pairs first within each organ), NEW − BASE on all cases
with its 95 % percentile interval. Standard library only.
"""

import argparse
import json
import pathlib
import random

from common import fail

ORGANS = ["liver", "pancreas", "kidney_left", "kidney_right"]


def read_json(path, text=None):
    """One JSON value from `path` (or from `text`, a line of it); a clear error otherwise."""
    try:
        return json.loads(pathlib.Path(path).read_text() if text is None else text)
    except OSError as error:
        fail(f"{path}: {error.strerror}")
    except json.JSONDecodeError as error:
        fail(f"{path}: not JSON ({error.msg}); expected `keyslice analyze --json` output "
             "and a phantom's truth.json")


def read(path):
    rows = {}
    try:
        lines = pathlib.Path(path).read_text().splitlines()
    except OSError as error:
        fail(f"{path}: {error.strerror}")
    for number, line in enumerate(lines, 1):
        if line.strip():
            prediction = read_json(f"{path} line {number}", line)
            if not isinstance(prediction, dict) or "case_id" not in prediction:
                fail(f"{path} line {number}: not a prediction (no case_id)")
            rows[prediction["case_id"]] = prediction
    return rows


def size_agrees(predicted, truth):
    """`keyslice score`'s default size tolerance: within 0.5 cm or 20 % on each axis given."""
    def close(p, t):
        return abs(p - t) <= max(0.5, 0.2 * abs(t))
    if predicted is None or truth is None:
        return False
    short = predicted.get("short_cm"), truth.get("short_cm")
    return close(predicted["long_cm"], truth["long_cm"]) and (
        None in short or close(*short))


def location_agrees(predicted, truth):
    """Same kidney pole or pancreas part; overlapping liver segments."""
    if not predicted or not truth or set(predicted) != set(truth):
        return False
    key = next(iter(truth))
    if key == "liver_segments":
        return bool(set(predicted[key]) & set(truth[key]))
    return predicted[key] == truth[key]


def attributes(prediction, truth):
    """(attribute-term numerator, its denominator, [size, location, attenuation] right,
    true lesions): lesions matched within each organ, best pairs first."""
    numerator, denominator, right, total = 0.0, 0, [0, 0, 0], 0
    for organ in ORGANS:
        truths = truth["findings"]["organs"][organ].get("lesions", [])
        found = prediction["findings"]["organs"][organ].get("lesions", [])
        denominator += max(len(truths), len(found))
        total += len(truths)
        pairs = []
        for ti, t in enumerate(truths):
            for pi, p in enumerate(found):
                checks = [size_agrees(p.get("size"), t.get("size")),
                          location_agrees(p.get("location"), t.get("location")),
                          p.get("attenuation") == t.get("attenuation")]
                pairs.append((sum(checks) / 3, ti, pi, checks))
        pairs.sort(key=lambda pair: (-pair[0], pair[1], pair[2]))
        used_truth, used_found = set(), set()
        for score, ti, pi, checks in pairs:
            if ti in used_truth or pi in used_found:
                continue
            used_truth.add(ti)
            used_found.add(pi)
            numerator += score
            right = [r + c for r, c in zip(right, checks)]
    return numerator, denominator, right, total


def outcome(prediction, truth):
    """(per-organ (truth, predicted) presences, hit or None without a tumor, attributes)."""
    presences = [
        (truth["findings"]["organs"][o]["tumor"] == "yes",
         prediction["findings"]["organs"][o]["tumor"] == "yes")
        for o in ORGANS
    ]
    extents = truth["lesion_extents"]
    if not extents:
        return presences, None, attributes(prediction, truth)
    key = (prediction.get("key_slice") or {}).get("index")
    hit = key is not None and any(e["first_slice"] <= key <= e["last_slice"] for e in extents)
    return presences, hit, attributes(prediction, truth)


def figures(outcomes):
    """Per-organ balanced accuracy, their mean, the hit rate and the attributes."""
    balanced = []
    for organ in range(len(ORGANS)):
        pairs = [o[0][organ] for o in outcomes]
        positives = [p for t, p in pairs if t]
        negatives = [p for t, p in pairs if not t]
        sensitivity = sum(positives) / len(positives) if positives else 0.0
        specificity = (len(negatives) - sum(negatives)) / len(negatives) if negatives else 0.0
        balanced.append((sensitivity + specificity) / 2)
    hits = [o[1] for o in outcomes if o[1] is not None]
    hit = sum(hits) / len(hits) if hits else 0.0
    numerator = sum(o[2][0] for o in outcomes)
    denominator = sum(o[2][1] for o in outcomes)
    total = sum(o[2][3] for o in outcomes)
    term = numerator / denominator if denominator else 1.0
    right = [sum(o[2][2][k] for o in outcomes) / total if total else 0.0 for k in range(3)]
    return [sum(balanced) / len(balanced)] + balanced + [hit, term] + right


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", required=True)
    parser.add_argument("--base", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    base, new = read(args.base), read(args.new)
    ids = sorted(set(base) & set(new))
    if not ids:
        fail("the two files share no case id")
    cases = pathlib.Path(args.cases)
    pairs = []
    for case_id in ids:
        truth = read_json(cases / case_id / "truth.json")
        pairs.append((outcome(base[case_id], truth), outcome(new[case_id], truth)))
    names = ["mean balanced accuracy"] + [f"balanced accuracy {o}" for o in ORGANS] + [
        "key-slice hit", "attribute term", "size right", "location right",
        "attenuation right"]
    point = [n - b for b, n in zip(figures([p[0] for p in pairs]),
                                   figures([p[1] for p in pairs]))]
    rng = random.Random(args.seed)
    draws = [[] for _ in names]
    for _ in range(args.resamples):
        sample = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        for slot, (b, n) in enumerate(zip(figures([p[0] for p in sample]),
                                          figures([p[1] for p in sample]))):
            draws[slot].append(n - b)
    print(f"{len(ids)} cases, {args.resamples} resamples: new − base (95 % interval)")
    for name, value, values in zip(names, point, draws):
        values.sort()
        low = values[int(0.025 * len(values))]
        high = values[min(len(values) - 1, int(0.975 * len(values)))]
        print(f"  {name:32s} {value:+.3f} ({low:+.3f} to {high:+.3f})")


if __name__ == "__main__":
    main()
