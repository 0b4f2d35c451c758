#!/usr/bin/env python3
"""Chooses keyslice-tiny's decoding rule (lesion probability threshold, smallest lesion in
voxels) on calibration phantoms from the training distribution, never on the held-out set.

    python3 eval/calibrate_tiny.py --model DIR [--seed 11] [--first 400] [--cases 100]
                                      [--matrix 128] [--out eval-data]

Generates cases `first..first+cases` of the training seed (training used indices below
`first`), runs `keyslice analyze --json --model` with each candidate rule, scores with
`keyslice score --json`, and writes the rule with the best mean tumor-existence balanced
accuracy over the four organs (ties: key-slice hit rate) into DIR/config.json. Standard
library only; needs a release build.
"""

import argparse
import json
import pathlib
import shutil
import statistics
import tempfile

from common import run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--keyslice", default="target/release/keyslice")
    parser.add_argument("--model", required=True)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--first", type=int, default=400)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--matrix", type=int, default=128)
    parser.add_argument("--out", default="eval-data")
    parser.add_argument("--cases-dir", default=None,
                        help="use these case folders instead of generating them")
    parser.add_argument("--thresholds", default="0.3,0.5,0.7,0.85")
    parser.add_argument("--min-voxels", default="1,2,4,8")
    args = parser.parse_args()

    model = pathlib.Path(args.model)
    config = json.loads((model / "config.json").read_text())
    cases = pathlib.Path(args.cases_dir) if args.cases_dir else pathlib.Path(args.out) / (
        f"calibration-seed{args.seed}-from{args.first}-matrix{args.matrix}")
    if not args.cases_dir and not (cases / "manifest.json").exists():
        run([args.keyslice, "phantom", "--out", cases, "--cases", str(args.cases),
             "--seed", str(args.seed), "--first", str(args.first), "--matrix",
             str(args.matrix)])
    folders = sorted(p for p in cases.iterdir() if (p / "ct.nii.gz").exists())
    organs = ["liver", "pancreas", "kidney_left", "kidney_right"]
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        candidate = pathlib.Path(scratch) / "model"
        candidate.mkdir()
        shutil.copy(model / "model.safetensors", candidate / "model.safetensors")
        for threshold in map(float, args.thresholds.split(",")):
            for min_voxels in map(int, args.min_voxels.split(",")):
                config["decode"] = {"threshold": threshold, "min_voxels": min_voxels}
                (candidate / "config.json").write_text(json.dumps(config, indent=2) + "\n")
                predictions = run([args.keyslice, "analyze", "--json", "--model", candidate]
                                  + [f / "ct.nii.gz" for f in folders])
                pred_path = pathlib.Path(scratch) / "pred.jsonl"
                pred_path.write_text(predictions)
                score = json.loads(run([args.keyslice, "score", "--pred", pred_path,
                                        "--truth", cases, "--json"]))
                balanced = statistics.mean(
                    score["organs"][o]["balanced_accuracy"] or 0.0 for o in organs)
                hit = score["key_slice"].get("hit_rate") or 0.0
                results.append((balanced, hit, threshold, min_voxels))
                print(f"threshold {threshold:.2f}, min voxels {min_voxels}: mean balanced "
                      f"accuracy {balanced:.3f}, key-slice hit {hit:.3f}", flush=True)
    balanced, hit, threshold, min_voxels = max(results)
    config["decode"] = {"threshold": threshold, "min_voxels": min_voxels}
    (model / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(f"chosen: threshold {threshold}, min voxels {min_voxels} (mean balanced accuracy "
          f"{balanced:.3f}, key-slice hit {hit:.3f} on {len(folders)} calibration cases); "
          f"written to {model / 'config.json'}")


if __name__ == "__main__":
    main()
