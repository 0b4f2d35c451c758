#!/usr/bin/env bash
# Installs CUDA's compiler and headers from PyPI into DIR (default: $KEYSLICE_CUDA_TOOLKIT or
# ~/.cache/keyslice/cuda-13.0) and prints the environment a `--features cuda` build needs.
# No GPU is needed. Every wheel is pinned to CUDA 13.0: the GPU machines' driver (580) runs
# PTX up to 13.0, and a newer nvvm writes PTX that the 13.0 ptxas refuses.
#
#   eval "$(scripts/gpu/cuda-toolkit.sh)"
#   cargo check --features cuda        # or: cargo build --release --features cuda
set -euo pipefail
DIR="${1:-${KEYSLICE_CUDA_TOOLKIT:-$HOME/.cache/keyslice/cuda-13.0}}"
if [ ! -x "$DIR/nvidia/cu13/bin/nvcc" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --target "$DIR" \
        'nvidia-cuda-nvcc==13.0.88' 'nvidia-nvvm==13.0.88' 'nvidia-cuda-crt==13.0.88' \
        'nvidia-cuda-nvrtc==13.0.88' 'nvidia-cuda-runtime==13.0.96' 'nvidia-cuda-cccl==13.0.85' >&2
fi
ROOT="$DIR/nvidia/cu13"
# H100 and H200 (there is no GPU here to ask).
echo "export CUDA_ROOT='$ROOT' CUDA_PATH='$ROOT' CUDA_COMPUTE_CAP=90 PATH='$ROOT/bin':\"\$PATH\""
