#!/usr/bin/env python3
"""Throughput and memory of `keyslice batch --backend openai` against a local
chat-completions server with a fixed latency per request and a fixed number of slots (the
"server's limit"): how the rate scales with --jobs, and that memory stays flat as the number
of cases grows. Standard library only.

    cargo build --release
    benches/batch_throughput.py [--cases 1000] [--latency 0.1] [--slots 8]

The server answers every request after `--latency` seconds, at most `--slots` at a time (the
rest wait), like a vLLM replica at its batch limit. Cases are small phantoms (48² matrix,
8 mm slices) so the figures measure Keyslice's side: frame encoding, requests, appends.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import chat_mock

def run_batch(binary, dataset, out, url, jobs):
    started = time.perf_counter()
    result = subprocess.run(
        ["/usr/bin/time", "-f", "%M", binary, "batch", str(dataset), "--out", str(out),
         "--backend", "openai", "--url", url, "--model", "bench", "--frames", "8",
         "--jobs", str(jobs), "--json"],
        capture_output=True, text=True, check=False,
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"batch failed: {result.stderr[-2000:]}")
    max_rss_kb = int(result.stderr.strip().splitlines()[-1])
    summary = json.loads(result.stdout)
    return seconds, max_rss_kb, summary


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/keyslice")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--scaling-cases", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--slots", type=int, default=8)
    args = parser.parse_args()

    server, url = chat_mock.start(args.latency, slots=args.slots)

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        dataset = scratch / "cases"
        subprocess.run(
            [args.binary, "phantom", "--out", str(dataset), "--cases", str(args.cases),
             "--matrix", "48", "--slice-mm", "8", "--seed", "5"],
            check=True, capture_output=True,
        )
        small = scratch / "small"
        small.mkdir()
        for case in sorted(dataset.iterdir())[: args.scaling_cases]:
            if case.is_dir():
                os.symlink(case, small / case.name)

        print(f"server: {args.latency:.2f} s per request, {args.slots} slots; "
              f"2 requests per case (report, key slice)")
        print(f"\nscaling, {args.scaling_cases} cases:")
        print("jobs  seconds  cases/s  max RSS MB")
        for jobs in (1, 2, 4, 8, 16):
            seconds, rss, summary = run_batch(
                args.binary, small, scratch / f"scale-{jobs}.jsonl", url, jobs)
            rate = summary["done"] / seconds
            print(f"{jobs:>4}  {seconds:7.2f}  {rate:7.2f}  {rss / 1024:10.1f}")

        print("\nmemory against case count, --jobs 16:")
        print("cases  seconds  cases/s  max RSS MB")
        for count, folder in ((args.scaling_cases, small), (args.cases, dataset)):
            seconds, rss, summary = run_batch(
                args.binary, folder, scratch / f"mem-{count}.jsonl", url, 16)
            rate = summary["done"] / seconds
            print(f"{count:>5}  {seconds:7.2f}  {rate:7.2f}  {rss / 1024:10.1f}")
    server.shutdown()


if __name__ == "__main__":
    main()
