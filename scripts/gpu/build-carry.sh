#!/usr/bin/env bash
# Builds the CUDA release binary on a machine without a GPU and packs it for
# scripts/gpu/measure.sh: gpu-carry/keyslice.xz (about 15 MB; stripped it is about 62 MB).
# Checks on the way that it links no CUDA library (so it starts anywhere) and that here,
# without a GPU, `--device cuda` fails with a message and `--device auto` runs on the CPU.
# About 17 minutes on 2 cores the first time (the CUDA kernels are compiled).
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(scripts/gpu/cuda-toolkit.sh)"
TARGET="${KEYSLICE_CUDA_TARGET:-$HOME/.cache/keyslice/cuda-target}"
cargo build --release --locked --features cuda --target-dir "$TARGET"
BIN="$TARGET/release/keyslice"
if ldd "$BIN" | grep -Ei 'libcuda|cublas|nvrtc|curand|cudart'; then
    echo "error: the CUDA build links a CUDA library; it would not start without one" >&2
    exit 1
fi
if ! nvidia-smi >/dev/null 2>&1; then
    python3 -c "from PIL import Image; Image.new('RGB', (64, 64), (90, 90, 90)).save('/tmp/keyslice-probe.png')"
    if "$BIN" vlm --model tests/data/qwen3vl/tiny --image /tmp/keyslice-probe.png --prompt hi \
        --max-new-tokens 2 --device cuda 2>/dev/null; then
        echo "error: --device cuda succeeded on a machine without a GPU" >&2
        exit 1
    fi
    "$BIN" vlm --model tests/data/qwen3vl/tiny --image /tmp/keyslice-probe.png --prompt hi \
        --max-new-tokens 2 --device auto --json >/dev/null
fi
mkdir -p gpu-carry
strip -o gpu-carry/keyslice "$BIN"
xz -T0 -6 -f gpu-carry/keyslice
ls -l gpu-carry/keyslice.xz
