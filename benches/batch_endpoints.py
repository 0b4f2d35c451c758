#!/usr/bin/env python3
"""`keyslice batch` against several OpenAI-compatible servers at once, each with its own
requests in flight (`--url URL#jobs=N`): local chat-completions servers that answer every
request after a fixed latency (no slot limit) record how many requests they hold at each
moment, so the table shows whether Keyslice keeps each server at its set level, and the
keyslice process's CPU time per case is its own overhead (reading the CT, frames, PNG,
base64, JSON, appends). The request-building part alone is the criterion benchmark
`server_requests`. Standard library only.

    cargo build --release
    benches/batch_endpoints.py [--cases 16] [--matrix 512] [--latency 0.4] [--jobs 4,8]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import chat_mock

REPORT = chat_mock.REPORT + "Box on key slice: columns 200-260, rows 180-240\n"
LOCAL = chat_mock.LOCAL + "\nInside the box: lesion."


class Counter:
    """Requests held now, and (time, held) at each change."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now = 0
        self.events = []
        self.frames = []

    def change(self, delta, frames):
        with self.lock:
            self.now += delta
            self.events.append((time.perf_counter(), self.now))
            if delta > 0 and frames > 1:
                self.frames.append(frames)

    def summary(self):
        """Most held at once, and the time-weighted mean while the server was busy (from
        its first request to the moment the last answer left)."""
        if not self.events:
            return 0, 0.0
        most = max(n for _, n in self.events)
        area = 0.0
        for (t0, n), (t1, _) in zip(self.events, self.events[1:]):
            area += n * (t1 - t0)
        span = self.events[-1][0] - self.events[0][0]
        return most, area / span if span > 0 else 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/keyslice")
    parser.add_argument("--cases", type=int, default=16)
    parser.add_argument("--matrix", type=int, default=512)
    parser.add_argument("--slice-mm", default="2.5")
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.4)
    parser.add_argument("--jobs", default="4,8", help="requests in flight per server")
    args = parser.parse_args()
    jobs = [int(j) for j in args.jobs.split(",")]

    counters, servers, urls = [], [], []
    for level in jobs:
        counter = Counter()
        server, url = chat_mock.start(args.latency, on_request=counter.change,
                                      report=REPORT, local=LOCAL)
        counters.append(counter)
        servers.append(server)
        urls.append(f"{url}#jobs={level}")

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        dataset = scratch / "cases"
        subprocess.run(
            [args.binary, "phantom", "--out", str(dataset), "--cases", str(args.cases),
             "--matrix", str(args.matrix), "--slice-mm", args.slice_mm, "--seed", "5"],
            check=True, capture_output=True,
        )
        command = ["/usr/bin/time", "-f", "%U %S %M", args.binary, "batch", str(dataset),
                   "--out", str(scratch / "pred.jsonl"), "--backend", "openai", "--model",
                   "bench", "--frames", str(args.frames), "--json"]
        for url in urls:
            command += ["--url", url]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        if result.returncode != 0:
            sys.exit(f"batch failed: {result.stderr[-2000:]}")
        user, system, rss_kb = result.stderr.strip().splitlines()[-1].split()
        summary = json.loads(result.stdout)

    cpu = float(user) + float(system)
    done = summary["done"]
    print(f"{done} cases of {args.matrix}² ({args.slice_mm} mm slices), {args.frames} frames per "
          f"diagnosis, 2 requests per case, {args.latency:.2f} s per request, "
          f"{len(jobs)} servers")
    print("server  set  most held  mean held while busy  cases")
    for index, (level, counter) in enumerate(zip(jobs, counters)):
        most, mean = counter.summary()
        cases = summary["endpoints"][index]["done"]
        print(f"{index:>6}  {level:>3}  {most:>9}  {mean:>20.2f}  {cases:>5}")
    ideal = done * 2 * args.latency / sum(jobs)
    print(f"wall {seconds:.2f} s (ideal at the set levels {ideal:.2f} s); "
          f"{done / seconds:.2f} cases/s")
    print(f"keyslice CPU {cpu:.2f} s = {cpu / done * 1000:.0f} ms per case "
          f"(reading the CT, frames, PNG, base64, JSON, appends); max RSS {int(rss_kb) / 1024:.0f} MB")
    frames = sorted(set(f for c in counters for f in c.frames))
    print(f"frames per diagnosis request: {frames}")
    for server in servers:
        server.shutdown()


if __name__ == "__main__":
    main()
