#!/usr/bin/env python3
"""Held-out figures of keyslice-tiny (the model card's table).

    python3 eval/eval_tiny.py [--cases 200] [--seed 999] [--matrix 128] [--out eval-data]

Generates held-out phantoms with a seed never used in training, runs `keyslice analyze
--json` on every case (embedded model, or --model DIR), scores them with `keyslice score
--json`, and adds what `score` does not print: mean consistency on cases the diagnoser got
right (tumor presence right for all four organs) and on the rest, the share of tumors under
1 cm found, and analysis time. Needs a release build (cargo build --release). Standard
library only.
"""

import argparse
import json
import pathlib
import statistics

from common import run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--keyslice", default="target/release/keyslice")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=999)
    parser.add_argument("--matrix", type=int, default=128)
    parser.add_argument("--out", default="eval-data")
    parser.add_argument("--model", default=None)
    args = parser.parse_args()

    out = pathlib.Path(args.out)
    cases = out / f"heldout-seed{args.seed}-matrix{args.matrix}"
    if not (cases / "manifest.json").exists():
        run([args.keyslice, "phantom", "--out", cases, "--cases", str(args.cases),
             "--seed", str(args.seed), "--matrix", str(args.matrix)])
    folders = sorted(p for p in cases.iterdir() if (p / "ct.nii.gz").exists())
    command = [args.keyslice, "analyze", "--json"] + [f / "ct.nii.gz" for f in folders]
    if args.model:
        command += ["--model", args.model]
    predictions = run(command)
    pred_path = out / "pred.jsonl"
    pred_path.write_text(predictions)
    score = json.loads(run([args.keyslice, "score", "--pred", pred_path, "--truth", cases,
                            "--json"]))

    organs = ["liver", "pancreas", "kidney_left", "kidney_right"]
    right, wrong, times = [], [], []
    small_found = small_total = 0
    for line in predictions.splitlines():
        prediction = json.loads(line)
        truth = json.loads((cases / prediction["case_id"] / "truth.json").read_text())
        correct = all(
            (prediction["findings"]["organs"][o]["tumor"] == "yes")
            == (truth["findings"]["organs"][o]["tumor"] == "yes")
            for o in organs
        )
        times.append(prediction["timings_ms"]["total"])
        if prediction["consistency"] is not None:
            (right if correct else wrong).append(prediction["consistency"]["score"])
        for lesion in truth["lesions"]:
            if lesion["size"]["long_cm"] < 1.0:
                small_total += 1
                organ = lesion["organ"]
                small_found += prediction["findings"]["organs"][organ]["tumor"] == "yes"

    def mean(values):
        return f"{statistics.mean(values):.3f} (n={len(values)})" if values else "–"

    print(f"{len(folders)} held-out phantoms (seed {args.seed}, matrix {args.matrix})")
    for organ in organs:
        o = score["organs"][organ]
        print(f"  {organ:13s} balanced accuracy {o['balanced_accuracy']}, "
              f"sensitivity {o['sensitivity']}, specificity {o['specificity']}")
    print(f"  attributes    {score['attributes']}")
    print(f"  key slice     {score['key_slice']}")
    print(f"  hallucination rate {score['hallucination_rate']}")
    print(f"  consistency   all {score['consistency_mean']}; diagnoser right {mean(right)}; "
          f"wrong {mean(wrong)}")
    print(f"  tumors < 1 cm found (organ called positive): {small_found}/{small_total}")
    print(f"  analysis time per case: median {statistics.median(times):.0f} ms")


if __name__ == "__main__":
    main()
