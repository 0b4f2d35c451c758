#!/usr/bin/env bash
# Runs Keyslice's exports, reward wheel and OpenAI-compatible requests through the released
# training and serving clients' own loading code, each in its own virtual environment (made by
# scripts/clients/install.sh). Not part of CI: several GB of frameworks.
#
#   scripts/clients/check.sh [CLIENTS_DIR]     (default: $KEYSLICE_CLIENTS_DIR or ./.clients)
#
# What it does:
#   1. builds the keyslice binary and the keyslice-reward wheel;
#   2. makes a workspace of phantoms (tumor and tumor-free), analyses it with the embedded
#      model, and exports it for verl, ms-swift and LLaMA-Factory with 48 frames a case, with
#      train and validation splits of different cases (tumor and tumor-free);
#   3. records the request `keyslice analyze --url` sends (48 frames) with a recording server;
#   4. runs, from a working folder other than the export's, each client's check
#      (scripts/clients/check_<client>.py); each prints the timestamps its model input carries
#      for the same CT, and this script checks that they are the same everywhere.
# Results go to $OUT_DIR (default: a temporary folder), one JSON file per client.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CLIENTS="$(realpath "${1:-${KEYSLICE_CLIENTS_DIR:-$ROOT/.clients}}")"
WORK="${OUT_DIR:-$(mktemp -d)}"
mkdir -p "$WORK"
WORK="$(realpath "$WORK")"
FRAMES="${FRAMES:-48}"
only="${KEYSLICE_CLIENTS:-vllm verl swift4 swift3 llamafactory}"
echo "work folder: $WORK"

if [ -z "${KEYSLICE:-}" ]; then
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
    KEYSLICE="${CARGO_TARGET_DIR:-$ROOT/target}/release/keyslice"
fi
python3 -m maturin build --release --quiet --manifest-path "$ROOT/crates/python/Cargo.toml" --out "$WORK/wheel" >/dev/null
WHEEL="$(ls "$WORK"/wheel/keyslice_reward-*.whl | head -1)"

if [ ! -d "$WORK/workspace" ]; then
    # Eight cases, three of them tumor-free by the model's answer, so the two splits hold
    # cases of different kinds (the split follows the workspace's pseudonyms).
    "$KEYSLICE" phantom --out "$WORK/phantoms" --cases 8 --seed 7 --matrix 128 >/dev/null
    "$KEYSLICE" workspace create "$WORK/workspace" "$WORK/phantoms" >/dev/null
    "$KEYSLICE" workspace analyze "$WORK/workspace" >/dev/null
fi
for format in verl swift llamafactory; do
    "$KEYSLICE" export "$WORK/workspace" --format "$format" --out "$WORK/export-$format" \
        --include-unreviewed --frames "$FRAMES" --split 0.25 --seed 3 >/dev/null
done

# The request keyslice sends to an OpenAI-compatible server, recorded.
rm -f "$WORK/request.json" "$WORK/request.json.port"
python3 "$HERE/recording_server.py" "$WORK/request.json" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -f "$WORK/request.json.port" ] && break; sleep 0.1; done
PORT="$(cat "$WORK/request.json.port")"
CASE="$(ls -d "$WORK"/phantoms/*/ | head -1)"
"$KEYSLICE" analyze "$CASE/ct.nii.gz" --backend openai --url "http://127.0.0.1:$PORT/v1" --model tiny \
    --frames "$FRAMES" --no-verify >/dev/null
kill $SERVER 2>/dev/null || true

failed=0
for client in $only; do
    python="$CLIENTS/$client/bin/python"
    if [ ! -x "$python" ]; then echo "$client: not installed (scripts/clients/install.sh)"; failed=1; continue; fi
    VIRTUAL_ENV="$CLIENTS/$client" uv pip install --quiet --python "$python" --reinstall --no-deps "$WHEEL"
    script="$HERE/check_${client%[0-9]}.py"
    # From / : paths in the exports must not depend on the working folder.
    if (cd / && "$python" "$script" "$WORK" "$ROOT/tests/data/qwen3vl/tiny" > "$WORK/$client.json" 2> "$WORK/$client.log"); then
        echo "$client: $(cat "$WORK/$client.json" | head -c 600)"
    else
        echo "$client: FAILED (see $WORK/$client.log)"; tail -20 "$WORK/$client.log"; failed=1
    fi
done
python3 "$HERE/compare.py" "$WORK" $only || failed=1
exit $failed
