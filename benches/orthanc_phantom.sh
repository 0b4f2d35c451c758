# Sourced by the PACS benchmarks: a private Orthanc with DICOMweb on a free port of
# 127.0.0.1, holding one 512×512 phantom CT series. `orthanc_phantom KEYSLICE SLICE_MM WORK`
# sets `slices` (files in the series), `pid` (Orthanc's, for the caller's cleanup), `base`
# (its URL), `orthanc_id` and `study_uid` (the study).
orthanc_phantom() {
  local keyslice=$1 slice_mm=$2 work=$3 port
  "$keyslice" phantom --out "$work/ph" --cases 1 --seed 7 --matrix 512 --slice-mm "$slice_mm" >/dev/null 2>&1
  "$keyslice" convert "$work/ph/PHANTOM_7_0000/ct.nii.gz" "$work/series" --dicom --patient-id BENCH >/dev/null
  slices=$(ls "$work/series" | wc -l)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat > "$work/orthanc.json" <<JSON
{"Name": "bench", "StorageDirectory": "$work/db", "IndexDirectory": "$work/db", "HttpPort": $port,
 "DicomServerEnabled": false, "RemoteAccessAllowed": false, "AuthenticationEnabled": false,
 "Plugins": ["/usr/share/orthanc/plugins/libOrthancDicomWeb.so"],
 "DicomWeb": {"Enable": true, "Root": "/dicom-web/"}}
JSON
  Orthanc "$work/orthanc.json" >/dev/null 2>&1 &
  pid=$!
  base="http://127.0.0.1:$port"
  for _ in $(seq 100); do curl -sf "$base/system" >/dev/null && break; sleep 0.2; done
  ls "$work/series"/*.dcm | xargs -P 4 -I{} curl -sf -o /dev/null -X POST --data-binary @{} "$base/instances"
  orthanc_id=$(curl -sf "$base/studies" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0])')
  study_uid=$(curl -sf "$base/studies/$orthanc_id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["MainDicomTags"]["StudyInstanceUID"])')
}
