#!/usr/bin/env python3
"""Side-by-side timings against peer tools (dcm2niix, gzip, nibabel), on the data from
make_bench_data.py. Each command runs once to warm the page cache, then N times; the median
wall time is reported, and peak memory (max RSS) for Keyslice's loads.

    apt-get install dcm2niix (or pip install dcm2niix: the version used is printed)
    pip install pydicom nibabel numpy
    cargo build --release
    python3 benches/make_bench_data.py bench-data
    python3 benches/compare_peers.py bench-data target/release/keyslice

Goals: convert <= 0.5 x dcm2niix; loading .nii.gz <= gzip -dc alone and
<= 0.5 x nibabel get_fdata(); peak memory < 1.3 x voxel bytes + 50 MB.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 7


def run(command, stdout=subprocess.DEVNULL):
    """Wall seconds and max RSS (MB) of one run of `command` (a list)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(map(str, command))}: {process.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss / 1024.0


def median_of(make_command, runs=RUNS, before=None):
    times, peaks = [], []
    for n in range(runs + 1):
        if before:
            before()
        elapsed, peak = run(make_command())
        if n > 0:  # first run warms the cache
            times.append(elapsed)
            peaks.append(peak)
    return statistics.median(times), max(peaks)


def alternating(make_commands, runs=RUNS, before=None):
    """Median wall time and peak memory of each command, the commands run in turn in each
    round (so a drift of the machine's speed touches both sides alike); one warm-up round."""
    times = [[] for _ in make_commands]
    peaks = [[] for _ in make_commands]
    for n in range(runs + 1):
        for k, make_command in enumerate(make_commands):
            if before:
                before()
            elapsed, peak = run(make_command())
            if n > 0:
                times[k].append(elapsed)
                peaks[k].append(peak)
    return [(statistics.median(t), max(p)) for t, p in zip(times, peaks)]


def nibabel_seconds(path):
    code = (
        "import time, nibabel as nib\n"
        "t = time.perf_counter(); nib.load(%r).get_fdata(); print(time.perf_counter() - t)" % str(path)
    )
    values = []
    for n in range(RUNS + 1):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        if n > 0:
            values.append(float(out.stdout))
    return statistics.median(values)


def main():
    data = Path(sys.argv[1] if len(sys.argv) > 1 else "bench-data")
    keyslice = str(Path(sys.argv[2] if len(sys.argv) > 2 else "target/release/keyslice").resolve())
    series, nifti = data / "series", data / "ct.nii.gz"
    dcm2niix = shutil.which("dcm2niix") or sys.exit("dcm2niix not found: pip install dcm2niix")
    out = Path(tempfile.mkdtemp())
    voxel_mb = 512 * 512 * 300 * 2 / 1e6

    def clean():
        for file in out.iterdir():
            file.unlink()

    dcm2niix_flags = ["-z", "n", "-b", "n", "-f", "d2n"]
    version = subprocess.run([dcm2niix, "-v"], capture_output=True, text=True).stdout.strip().splitlines()
    print(f"dcm2niix: {dcm2niix} ({version[-1] if version else 'version unknown'}), flags {' '.join(dcm2niix_flags)}")
    print(f"{RUNS} runs each after one warm-up, the two sides alternating; medians")
    (ours_convert, ours_convert_peak), (theirs_convert, _) = alternating([
        lambda: [keyslice, "convert", str(series), str(out / "ks.nii")],
        lambda: [dcm2niix, *dcm2niix_flags, "-o", str(out), str(series)],
    ], before=clean)
    (ours_load, ours_load_peak), (gzip_seconds, _) = alternating([
        lambda: [keyslice, "info", str(nifti)],
        lambda: ["sh", "-c", f"gzip -dc '{nifti}' > /dev/null"],
    ])
    _, ours_series_peak = median_of(lambda: [keyslice, "info", str(series)], runs=2)
    nibabel = nibabel_seconds(nifti)
    budget_mb = 1.3 * voxel_mb + 50

    rows = [
        ("convert series -> .nii", f"{ours_convert:.3f} s", f"dcm2niix {theirs_convert:.3f} s",
         f"{ours_convert / theirs_convert:.2f}x", "<= 0.50x"),
        ("load .nii.gz (info)", f"{ours_load:.3f} s", f"gzip -dc {gzip_seconds:.3f} s",
         f"{ours_load / gzip_seconds:.2f}x", "<= 1.00x"),
        ("load .nii.gz (info)", f"{ours_load:.3f} s", f"nibabel {nibabel:.3f} s",
         f"{ours_load / nibabel:.2f}x", "<= 0.50x"),
        ("peak memory, .nii.gz", f"{ours_load_peak:.0f} MB", f"budget {budget_mb:.0f} MB", "", ""),
        ("peak memory, series", f"{ours_series_peak:.0f} MB", f"budget {budget_mb:.0f} MB", "", ""),
        ("peak memory, convert", f"{ours_convert_peak:.0f} MB", f"budget {budget_mb:.0f} MB", "", ""),
    ]
    print(f"{'what':<24}{'keyslice':>12}  {'peer':<22}{'ratio':>7}  goal")
    for what, ours, peer, ratio, goal in rows:
        print(f"{what:<24}{ours:>12}  {peer:<22}{ratio:>7}  {goal}")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
