#!/usr/bin/env python3
"""A reader study at scale: time and peak memory of `study simulate` and `study report`.

Builds a workspace of N cases (the manifest only: a study needs case ids, not images), their
truth (a fifth of the organs with a tumor), a study of R readers in three arms (images,
report, evidence; crossover), then runs `keyslice study simulate` and `keyslice study report`
under `/usr/bin/time -v` and prints seconds and peak resident memory of each.

    cargo build --release
    python3 benches/study_scale.py --cases 10000 --readers 10 [--keyslice target/release/keyslice]

The goal: 10,000 cases x 10 readers x 3 arms, each command within 60 s and 1 GB.
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

ORGANS = ["Liver", "Pancreas", "Left kidney", "Right kidney"]


def truth_report(rng):
    lines = []
    for organ in ORGANS:
        if rng.random() < 0.2:
            lines.append(f"{organ} lesion 1: Size: {rng.uniform(1, 5):.1f} x 1.0 cm.")
        else:
            lines.append(f"{organ}: no tumor.")
    return "\n".join(lines)


def measured(keyslice, args):
    command = ["/usr/bin/time", "-v", keyslice] + args
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    return seconds, int(peak.group(1)) / 1024 if peak else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--readers", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--keyslice", default="target/release/keyslice")
    parser.add_argument("--keep", help="build in this folder and keep it")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = args.keep or tempfile.mkdtemp(prefix="keyslice-study-scale-")
    os.makedirs(root, exist_ok=True)
    workspace = os.path.join(root, "workspace")
    os.makedirs(workspace, exist_ok=True)
    cases = [f"case{k:05d}" for k in range(args.cases)]
    with open(os.path.join(workspace, "workspace.json"), "w") as out:
        json.dump(
            {
                "keyslice_workspace": 1,
                "cases": [
                    {"case_id": case, "volume": f"/data/scale/{case}/ct.nii.gz"}
                    for case in cases
                ],
            },
            out,
        )
    truth = os.path.join(root, "truth.jsonl")
    with open(truth, "w") as out:
        for case in cases:
            out.write(json.dumps({"case_id": case, "report": truth_report(rng)}) + "\n")
    study = os.path.join(root, "study")
    create = ["study", "create", study, "--workspace", workspace]
    for reader in range(args.readers):
        create += ["--reader", f"reader{reader:02d}"]
    create += ["--arm", "images=images", "--arm", "report=report", "--arm", "evidence=evidence"]
    create += ["--design", "crossover", "--seed", "3"]
    subprocess.run([args.keyslice] + create, check=True, capture_output=True)
    reads = args.cases * args.readers * 3
    print(f"{args.cases} cases x {args.readers} readers x 3 arms = {reads} reads ({root})")
    for name, command in [
        ("study simulate", ["study", "simulate", study, "--truth", truth]),
        ("study report", ["study", "report", study, "--truth", truth, "--out", os.path.join(root, "report")]),
    ]:
        seconds, peak_mb = measured(args.keyslice, command)
        print(f"{name:15s} {seconds:7.1f} s  peak {peak_mb:7.0f} MB")


if __name__ == "__main__":
    main()
