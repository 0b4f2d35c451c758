#!/usr/bin/env python3
"""The RL ablation table of keyslice-tiny (the model card's and the README's).

    python3 eval/ablation_rl.py --row "supervised=models/keyslice-tiny" \
        --row "RL, all rewards=/tmp/rl/all" ... [--cases eval-data/heldout-seed999-matrix128]
        [--out eval-data/ablation]

For each row (a label and a checkpoint folder) runs `keyslice analyze --json --model DIR` on
every held-out case (kept in OUT/<row>.jsonl and reused when present) and scores it with
`keyslice score --json`, on all cases and on the hard subset: cases with a tumor under 1 cm
or with several tumors (the paper's failure cases). Prints two Markdown tables. The held-out
cases come from `eval/eval_tiny.py` (seed 999, never used in training). Needs a release
build. Standard library only.
"""

import argparse
import json
import pathlib
import re
import sys
import tempfile

from common import run

ORGANS = ["liver", "pancreas", "kidney_left", "kidney_right"]


def is_hard(truth):
    lesions = truth["lesions"]
    return len(lesions) >= 2 or any(l["size"]["long_cm"] < 1.0 for l in lesions)


def score(keyslice, predictions, folders, scratch):
    """`keyslice score` of the predictions of `folders` only (a truth folder of links)."""
    truth = pathlib.Path(tempfile.mkdtemp(dir=scratch))
    for folder in folders:
        (truth / folder.name).symlink_to(folder.resolve())
    wanted = {folder.name for folder in folders}
    pred = truth.parent / (truth.name + ".jsonl")
    pred.write_text(
        "".join(line + "\n" for line in predictions if json.loads(line)["case_id"] in wanted)
    )
    return json.loads(run([keyslice, "score", "--pred", pred, "--truth", truth, "--json"]))


def row_cells(s):
    attributes = s["attributes"]
    values = [attributes.get(k) for k in ("size", "location", "attenuation")]
    values = [v for v in values if v is not None]
    cells = [f"{s['organs'][o]['balanced_accuracy']:.2f}" for o in ORGANS]
    cells.append(f"{sum(values) / len(values):.2f}" if values else "–")
    cells.append(f"{s['key_slice']['hit_rate']:.2f}")
    cells.append(f"{s['hallucination_rate']:.2f}")
    mean = s.get("consistency_mean")
    cells.append(f"{mean:.2f}" if mean is not None else "–")
    return cells


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--keyslice", default="target/release/keyslice")
    parser.add_argument("--cases", default="eval-data/heldout-seed999-matrix128")
    parser.add_argument("--out", default="eval-data/ablation")
    parser.add_argument("--row", action="append", required=True, help="LABEL=CHECKPOINT_DIR")
    args = parser.parse_args()

    cases = pathlib.Path(args.cases)
    if not (cases / "manifest.json").exists():
        sys.exit(f"{cases}: no held-out phantoms; run python3 eval/eval_tiny.py first")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    folders = sorted(p for p in cases.iterdir() if (p / "ct.nii.gz").exists())
    hard = [f for f in folders if is_hard(json.loads((f / "truth.json").read_text()))]

    header = ("| model | liver | pancreas | kidney L | kidney R | attributes | key-slice hit "
              "| hallucination | consistency |\n|---|---|---|---|---|---|---|---|---|")
    tables = {"all": [], "hard": []}
    for row in args.row:
        label, _, model = row.partition("=")
        slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
        pred_path = out / f"{slug}.jsonl"
        if not pred_path.exists():
            command = [args.keyslice, "analyze", "--json", "--model", model]
            command += [f / "ct.nii.gz" for f in folders]
            pred_path.write_text(run(command))
        predictions = [l for l in pred_path.read_text().splitlines() if l.strip()]
        for name, subset in (("all", folders), ("hard", hard)):
            with tempfile.TemporaryDirectory() as scratch:
                s = score(args.keyslice, predictions, subset, scratch)
            tables[name].append(f"| {label} | " + " | ".join(row_cells(s)) + " |")

    print(f"All {len(folders)} held-out phantoms (balanced accuracy per organ; attributes: mean "
          "of size, location and attenuation accuracy):\n")
    print(header)
    print("\n".join(tables["all"]))
    print(f"\nHard subset: {len(hard)} cases with a tumor under 1 cm or several tumors:\n")
    print(header)
    print("\n".join(tables["hard"]))


if __name__ == "__main__":
    main()
