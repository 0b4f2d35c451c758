#!/usr/bin/env bash
# Retrieve from a PACS, side by side with the PACS's own download of the same study.
#
# Starts a private Orthanc with DICOMweb on a free port, stores a 512×512 phantom CT series in
# it (about 300 slices), then times, alternating the sides, RUNS runs each (after one warm-up
# round) on an empty cache:
#   - the wire's speed: curl of the study as one WADO-RS multipart stream
#     (GET …/dicom-web/studies/{uid}, Accept: multipart/related; type="application/dicom");
#   - Orthanc's archive download: curl http://…/studies/{id}/archive (a ZIP of the study);
#   - keyslice pacs retrieve dicomweb+http://…/studies/{uid} (QIDO-RS for the series, then the
#     series in one WADO-RS answer, each instance renamed into the cache when whole);
# with their peak memory (/usr/bin/time), and the peak memory of opening the retrieved
# series (`keyslice info`), against the volume's size in memory (512 × 512 × slices × 2 B).
#
# Usage: benches/pacs_retrieve.sh [KEYSLICE_BINARY] [SLICE_MM] [RUNS]
# Needs: orthanc, orthanc-dicomweb, curl, python3, /usr/bin/time (GNU time).
set -euo pipefail
keyslice=$(realpath "${1:-target/release/keyslice}")
slice_mm=${2:-1.2}
runs=${3:-7}
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

. "$(dirname "$0")/orthanc_phantom.sh"
orthanc_phantom "$keyslice" "$slice_mm" "$work"
series_uid=$(curl -sf "$base/series/$(curl -sf "$base/studies/$orthanc_id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Series"][0])')" | python3 -c 'import json,sys; print(json.load(sys.stdin)["MainDicomTags"]["SeriesInstanceUID"])')

timed() { /usr/bin/time -f '%e %M' -o "$work/time" "$@" >/dev/null 2>&1; cat "$work/time"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

: > "$work/stream"; : > "$work/series_stream"; : > "$work/archive"; : > "$work/keyslice"; : > "$work/keyslice_rss"
accept='Accept: multipart/related; type="application/dicom"; transfer-syntax=*'
for round in $(seq 0 "$runs"); do
  keep() { [ "$round" -gt 0 ] && cat >> "$1" || cat > /dev/null; }
  timed curl -sf -H "$accept" -o "$work/study.multipart" "$base/dicom-web/studies/$study_uid" | awk '{print $1}' | keep "$work/stream"
  timed curl -sf -H "$accept" -o "$work/series.multipart" "$base/dicom-web/studies/$study_uid/series/$series_uid" | awk '{print $1}' | keep "$work/series_stream"
  timed curl -sf -o "$work/study.zip" "$base/studies/$orthanc_id/archive" | awk '{print $1}' | keep "$work/archive"
  rm -rf "$work/cache"
  timed "$keyslice" pacs retrieve "dicomweb+$base/dicom-web/studies/$study_uid" --cache "$work/cache" > "$work/run"
  awk '{print $1}' "$work/run" | keep "$work/keyslice"
  awk '{print $2}' "$work/run" | keep "$work/keyslice_rss"
done
folder=$(find "$work/cache" -name '*.dcm' -printf '%h\n' -quit)
retrieved=$(find "$work/cache" -name '*.dcm' | wc -l)
[ "$retrieved" -eq "$slices" ] || { echo "retrieved $retrieved of $slices slices" >&2; exit 1; }
info_rss=$(timed "$keyslice" info "$folder" | awk '{print $2}')

stream_s=$(median < "$work/stream")
series_stream_s=$(median < "$work/series_stream")
archive_s=$(median < "$work/archive")
keyslice_s=$(median < "$work/keyslice")
retrieve_rss_kb=$(median < "$work/keyslice_rss")
volume_mb=$(python3 -c "print(round(512*512*$slices*2/1e6, 1))")
python3 - <<PY
stream, series_stream, archive, keyslice = $stream_s, $series_stream_s, $archive_s, $keyslice_s
volume_mb, retrieve_mb, info_mb = $volume_mb, $retrieve_rss_kb / 1024 * 1.048576, $info_rss / 1024 * 1.048576
print(f"study: 512 x 512 x $slices CT, {volume_mb} MB of voxels, $(du -sm "$work/series" | cut -f1) MB of DICOM files")
print(f"medians of $runs runs, the sides alternating; Orthanc $(Orthanc --version 2>/dev/null | head -1 | awk '{print $NF}')")
print(f"curl, the study as one WADO-RS stream:  {stream:.3f} s")
print(f"curl, the series as one WADO-RS stream: {series_stream:.3f} s")
print(f"curl, Orthanc's ZIP archive:            {archive:.3f} s")
print(f"keyslice pacs retrieve:                 {keyslice:.3f} s   {keyslice / stream:.2f} x the stream (goal <= 1.2)")
print(f"peak memory: retrieve {retrieve_mb:.0f} MB, opening the retrieved series {info_mb:.0f} MB = {info_mb / volume_mb:.2f} x the volume (target <= 1.3)")
PY
