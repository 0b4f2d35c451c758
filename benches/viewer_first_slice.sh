#!/usr/bin/env bash
# Time from `keyslice view FILE` start to the first frame that draws the slices, under Xvfb
# on whatever Vulkan driver is installed (lavapipe here). Runs it 5 times and prints each.
#   apt-get install xvfb mesa-vulkan-drivers
#   benches/viewer_first_slice.sh bench-data/ct.nii.gz
set -euo pipefail
cd "$(dirname "$0")/.."
file="${1:-bench-data/ct.nii.gz}"
cargo build --release --quiet
display=":$((90 + RANDOM % 100))"
Xvfb "$display" -screen 0 1400x900x24 >/dev/null 2>&1 &
xvfb_pid=$!
trap 'kill "$xvfb_pid" 2>/dev/null || true' EXIT
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
sleep 1
for run in 1 2 3 4 5; do
  log="$(mktemp)"
  start=$(date +%s%N)
  DISPLAY="$display" KEYSLICE_LOG=info target/release/keyslice view "$file" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    grep -q "first slices drawn" "$log" && break
    sleep 0.05
  done
  end=$(date +%s%N)
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  inside=$(grep -o 'elapsed_ms=[0-9]*' "$log" | head -1 | cut -d= -f2)
  echo "run $run: first slices drawn ${inside:-?} ms after the window's app started; $(( (end - start) / 1000000 )) ms wall from launch (including polling)"
  rm -f "$log"
done
