#!/usr/bin/env python3
"""Paired bootstrap of two models' held-out predictions (the model card's intervals).

    python3 benches/paired_bootstrap.py --cases eval-data/heldout-seed999-matrix128 \
        --base BASE.jsonl --new NEW.jsonl [--resamples 2000] [--seed 1]

BASE and NEW are `keyslice analyze --json` outputs on the same held-out cases (the
`pred.jsonl` that `benches/eval_tiny.py` writes). Resamples the cases with replacement
(the same draw for both models) and prints, for the mean balanced accuracy of the four
organs, each organ's balanced accuracy and the key-slice hit rate (the key slice inside a
true lesion's slice extent, as `keyslice score` counts it), NEW − BASE on all cases with
its 95 % percentile interval. Standard library only.
"""

import argparse
import json
import pathlib
import random

ORGANS = ["liver", "pancreas", "kidney_left", "kidney_right"]


def fail(message):
    raise SystemExit(f"error: {message}")


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


def outcome(prediction, truth):
    """(per-organ (truth, predicted) presences, hit or None without a tumor)."""
    presences = [
        (truth["findings"]["organs"][o]["tumor"] == "yes",
         prediction["findings"]["organs"][o]["tumor"] == "yes")
        for o in ORGANS
    ]
    extents = truth["lesion_extents"]
    if not extents:
        return presences, None
    key = (prediction.get("key_slice") or {}).get("index")
    hit = key is not None and any(e["first_slice"] <= key <= e["last_slice"] for e in extents)
    return presences, hit


def figures(outcomes):
    """Per-organ balanced accuracy, their mean, and the hit rate."""
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
    return [sum(balanced) / len(balanced)] + balanced + [hit]


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
        "key-slice hit"]
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
