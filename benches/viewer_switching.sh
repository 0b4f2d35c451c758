#!/usr/bin/env bash
# Peak memory of the viewer while a reviewer clicks between worklist cases as fast as they
# can: `keyslice view` on the demo workspace under Xvfb, CLICKS clicks alternating between
# the second and third worklist rows over SECONDS seconds (xdotool), then a settling pause.
# Prints the resident memory before, at the last click, after settling, and the peak
# (VmHWM), and the threads alive at the end.
#   apt-get install xvfb xdotool mesa-vulkan-drivers
#   benches/viewer_switching.sh [BINARY] [CLICKS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:-target/release/keyslice}"
clicks="${2:-150}"
seconds="${3:-15}"
[ -x "$binary" ] || cargo build --release --quiet
display=":$((90 + RANDOM % 100))"
Xvfb "$display" -screen 0 1400x900x24 >/dev/null 2>&1 &
xvfb_pid=$!
data="$(mktemp -d)"
trap 'kill "$xvfb_pid" 2>/dev/null || true; kill "${pid:-0}" 2>/dev/null || true; rm -rf "$data"' EXIT
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
sleep 1
log="$data/log"
DISPLAY="$display" KEYSLICE_DATA_DIR="$data" KEYSLICE_CONFIG_DIR="$data" KEYSLICE_LOG=info \
  "$binary" >"$log" 2>&1 &
pid=$!
# The demo workspace is made on the first run: wait for its first case on screen.
for _ in $(seq 1 1200); do
  grep -q "first slices drawn" "$log" && break
  sleep 0.1
done
sleep 2
rss() { awk '/VmRSS/ {print int($2/1024)}' "/proc/$pid/status"; }
# Worklist rows: the second and third (the window at 1280×800 in the top-left corner).
rows=(164 187)
# Steady state: each case opened once, slowly.
for row in "${rows[@]}" "${rows[@]}"; do
  DISPLAY="$display" xdotool mousemove 80 "$row" click 1
  sleep 3
done
echo "steady (each case opened once): $(rss) MB resident"
pause=$(awk -v s="$seconds" -v c="$clicks" 'BEGIN {print s / c}')
for n in $(seq 1 "$clicks"); do
  DISPLAY="$display" xdotool mousemove 80 "${rows[$((n % 2))]}" click 1
  sleep "$pause"
done
echo "at the last click: $(rss) MB resident"
sleep 16
echo "16 s later: $(rss) MB resident, $(ls /proc/$pid/task | wc -l) threads"
echo "peak: $(awk '/VmHWM/ {print int($2/1024)}' "/proc/$pid/status") MB resident"
