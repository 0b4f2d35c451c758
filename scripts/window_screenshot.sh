#!/usr/bin/env bash
# Opens the real viewer window under Xvfb (software Vulkan is enough), waits for it to draw,
# and saves a screenshot, so a person can look at what a user sees.
#   apt-get install xvfb imagemagick mesa-vulkan-drivers
#   scripts/window_screenshot.sh [PATH] [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
path="${1:-}"
out="${2:-target/window.png}"
cargo build --release --quiet
display=":$((90 + RANDOM % 100))"
Xvfb "$display" -screen 0 1400x900x24 >/dev/null 2>&1 &
xvfb_pid=$!
trap 'kill "$viewer_pid" "$xvfb_pid" 2>/dev/null || true' EXIT
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
sleep 1
DISPLAY="$display" target/release/keyslice view ${path:+"$path"} &
viewer_pid=$!
sleep 10
DISPLAY="$display" import -window root "$out"
echo "screenshot: $out"
