#!/usr/bin/env python3
"""`keyslice batch` peak memory against its budget, at any --jobs and number of servers.

Starts N local chat-completions servers (`chat_mock.py`, each answering after a fixed
latency), writes phantoms, and runs `keyslice batch` with every server at `#jobs=J` and
`--memory-mb M`, under `/usr/bin/time`; prints the peak resident memory against the budget.

    cargo build --release
    python3 benches/batch_memory.py --servers 16 --jobs 256 --matrix 256 --memory-mb 512

The goal: peak ≤ budget + 10 %, whatever --jobs and the number of servers.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import chat_mock  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="target/release/keyslice")
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=256)
    parser.add_argument("--cases", type=int, default=96)
    parser.add_argument("--matrix", type=int, default=256)
    parser.add_argument("--memory-mb", type=int, default=512)
    parser.add_argument("--latency", type=float, default=0.3)
    args = parser.parse_args()
    urls, servers = [], []
    for _ in range(args.servers):
        server, url = chat_mock.start(args.latency)
        servers.append(server)
        urls.append(f"{url}#jobs={args.jobs}")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        dataset = scratch / "cases"
        subprocess.run(
            [args.binary, "phantom", "--out", str(dataset), "--cases", str(args.cases),
             "--matrix", str(args.matrix), "--seed", "5"],
            check=True, capture_output=True,
        )
        command = ["/usr/bin/time", "-f", "%M", args.binary, "batch", str(dataset), "--out",
                   str(scratch / "pred.jsonl"), "--backend", "openai", "--model", "bench",
                   "--memory-mb", str(args.memory_mb), "--json"]
        for url in urls:
            command += ["--url", url]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        if result.returncode != 0:
            sys.exit(f"batch failed: {result.stderr[-2000:]}")
        peak_mb = int(result.stderr.strip().splitlines()[-1]) / 1024
        summary = json.loads(result.stdout)
    for server in servers:
        server.shutdown()
    budget = args.memory_mb
    print(f"{summary['done']} cases of {args.matrix}², {args.servers} servers at #jobs={args.jobs}, "
          f"--memory-mb {budget}: {seconds:.1f} s, peak {peak_mb:.0f} MB "
          f"({peak_mb / budget:.2f} × the budget; goal ≤ 1.10)")


if __name__ == "__main__":
    main()
