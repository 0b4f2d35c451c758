#!/usr/bin/env bash
# Time to the first image of a study opened from a PACS (`keyslice view dicomweb+…`), under
# Xvfb on whatever Vulkan driver is installed (lavapipe here).
#
# Starts a private Orthanc with DICOMweb on a free port, stores a 512×512 phantom CT series in
# it, analyses it in a workspace made from the PACS and publishes the AI result (so the study
# holds a Keyslice result whose key slice comes first), then opens the study RUNS times, each
# on an empty cache, and prints for each run: how long after the first instance reached the
# cache the first slices were drawn, which image that was, and when the whole study was open.
#
# Usage: [RATE_MBPS=N] [SHOT=FILE.png] benches/pacs_first_image.sh [KEYSLICE_BINARY] [SLICE_MM] [RUNS]
#   RATE_MBPS: the viewer reaches the PACS through a proxy passing N megabytes a second (a
#              hospital network rather than the loopback);
#   SHOT:      a screenshot of the window 2 s into the first run (while the study arrives).
# Needs: orthanc, orthanc-dicomweb, curl, python3 (with Pillow for SHOT), xvfb, x11-apps
# (xwd), a Vulkan driver.
set -euo pipefail
keyslice=$(realpath "${1:-target/release/keyslice}")
slice_mm=${2:-0.8}
runs=${3:-5}
work=$(mktemp -d)
pid=
xvfb_pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null
  [ -n "${proxy_pid:-}" ] && kill "$proxy_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

. "$(dirname "$0")/orthanc_phantom.sh"
orthanc_phantom "$keyslice" "$slice_mm" "$work"
url="dicomweb+$base/dicom-web/studies/$study_uid"
view_url="$url"
if [ -n "${RATE_MBPS:-}" ]; then
  proxy_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 - "$proxy_port" "$port" "$RATE_MBPS" <<'PY' &
import socket, sys, threading, time
listen, target, rate = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) * 1e6
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", listen)); server.listen(64)
def pipe(source, sink, paced):
    try:
        while data := source.recv(65536):
            sink.sendall(data)
            if paced:
                time.sleep(len(data) / rate)
    except OSError:
        pass
    for end in (sink, source):
        try: end.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    client, _ = server.accept()
    upstream = socket.create_connection(("127.0.0.1", target))
    threading.Thread(target=pipe, args=(client, upstream, False), daemon=True).start()
    threading.Thread(target=pipe, args=(upstream, client, True), daemon=True).start()
PY
  proxy_pid=$!
  view_url="dicomweb+http://127.0.0.1:$proxy_port/dicom-web/studies/$study_uid"
fi

# The AI result on the PACS: analysed in a workspace made from the study, then published.
"$keyslice" workspace create "$work/ws" "$url" >/dev/null 2>&1
"$keyslice" workspace analyze "$work/ws" >/dev/null 2>&1
"$keyslice" pacs publish "$work/ws" >/dev/null 2>&1

display=":$((90 + RANDOM % 100))"
Xvfb "$display" -screen 0 1400x900x24 >/dev/null 2>&1 &
xvfb_pid=$!
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
sleep 1
echo "${RATE_MBPS:+through a proxy of $RATE_MBPS MB/s: }study: 512 x 512 x $slices CT on Orthanc $(Orthanc --version 2>/dev/null | head -1 | awk '{print $NF}') at 127.0.0.1, with a stored Keyslice result"
for run in $(seq 1 "$runs"); do
  log="$work/view$run.log"
  start=$(date +%s%N)
  DISPLAY="$display" KEYSLICE_PACS_WORKSPACE="$work/pacs$run" KEYSLICE_LOG=info,keyslice_viewer=debug \
    "$keyslice" view "$view_url" >"$log" 2>&1 &
  view=$!
  if [ "$run" -eq 1 ] && [ -n "${SHOT:-}" ]; then
    sleep 2
    DISPLAY="$display" xwd -root -silent | python3 -c '
import struct, sys
from PIL import Image
data = sys.stdin.buffer.read()
fields = struct.unpack(">25I", data[:100])
header, width, height, line, colours = fields[0], fields[4], fields[5], fields[12], fields[19]
start = header + colours * 12
Image.frombytes("RGB", (width, height), data[start:start + line * height], "raw", "BGRX", line).save(sys.argv[1])
' "$SHOT"
  fi
  for _ in $(seq 1 600); do
    grep -q "masks shown\|study shown" "$log" && break
    grep -q "first slices drawn" "$log" && grep -q "case .* in the PACS workspace" "$log" && sleep 0.5 && break
    sleep 0.05
  done
  end=$(date +%s%N)
  kill "$view" 2>/dev/null || true
  wait "$view" 2>/dev/null || true
  since=$(grep 'first slices drawn' "$log" | grep -o 'since_first_file_ms=[0-9]*' | head -1 | cut -d= -f2)
  first=$(grep 'preview read' "$log" | head -1 | grep -o 'files=[0-9]* key_alone=[a-z]*' || true)
  previews=$(grep -c 'preview read' "$log" || true)
  echo "run $run: first slices drawn ${since:-?} ms after the first instance reached the cache (first preview: ${first:-none}; $previews preview(s)); $(( (end - start) / 1000000 )) ms wall from launch to the whole study open"
done
