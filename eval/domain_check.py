#!/usr/bin/env python3
"""The demo model's domain check, measured (the model card's figures).

    python3 eval/domain_check.py [--cases 200] [--seed 999] [--matrix 128] [--out eval-data]

Generates held-out phantoms (a seed neither training nor the domain calibration used) and
the CTs of `tests/python/unfamiliar_cts.py` (abdomens drawn by an independent generator
with other body shapes, intensities, contrast phases and noise, a chest and a pelvis;
pydicom), runs `keyslice batch` on each set with the embedded model (or --model DIR), and
prints the share of phantoms inside the domain, the share of the other CTs flagged, and
each flagged case with its reasons. Needs pydicom and numpy, and a build of keyslice.
"""

import argparse
import json
import pathlib
import subprocess
import sys

from common import run


def batch(keyslice, model, inputs, out):
    out.unlink(missing_ok=True)
    command = [keyslice, "batch", "--out", str(out), "--jobs", "2"]
    if model:
        command += ["--model", model]
    run(command + [str(path) for path in inputs])
    return [json.loads(line) for line in out.read_text().splitlines()]


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
    phantoms = out / f"domain-phantoms-{args.seed}-{args.matrix}"
    if not (phantoms / "manifest.json").is_file():
        run([args.keyslice, "phantom", "--out", str(phantoms), "--cases", str(args.cases),
             "--seed", str(args.seed), "--matrix", str(args.matrix)])
    others = out / "domain-unfamiliar"
    if not (others / "manifest.json").is_file():
        script = pathlib.Path(__file__).resolve().parent.parent / "tests/python/unfamiliar_cts.py"
        subprocess.run([sys.executable, str(script), str(others)], check=True)
    names = [case["name"] for case in json.loads((others / "manifest.json").read_text())]

    held = batch(args.keyslice, args.model, [phantoms], out / "domain-phantoms.jsonl")
    passed = [p for p in held if not p.get("out_of_domain")]
    print(f"held-out phantoms inside the domain: {len(passed)} of {len(held)} "
          f"({100.0 * len(passed) / max(len(held), 1):.1f} %)")
    for p in held:
        if p.get("out_of_domain"):
            print(f"  flagged {p['case_id']}: {'; '.join(p['out_of_domain']['reasons'])}")

    unfamiliar = batch(args.keyslice, args.model, [others / n for n in names],
                       out / "domain-unfamiliar.jsonl")
    flagged = [p for p in unfamiliar if p.get("out_of_domain")]
    print(f"other CTs flagged: {len(flagged)} of {len(unfamiliar)} "
          f"({100.0 * len(flagged) / max(len(unfamiliar), 1):.1f} %)")
    for p in sorted(unfamiliar, key=lambda p: p["case_id"]):
        reasons = p.get("out_of_domain", {}).get("reasons", [])
        print(f"  {p['case_id']:<22} {len(reasons)} figure(s) out: "
              + "; ".join(r.split(" (")[0] for r in reasons))


if __name__ == "__main__":
    main()
