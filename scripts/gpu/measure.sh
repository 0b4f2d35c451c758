#!/usr/bin/env bash
# On a GPU machine (NVIDIA driver, PyTorch and transformers, no Rust, no network): unpacks the
# CUDA build of keyslice carried as gpu-carry/keyslice.xz, checks that it finds the GPU, then
# runs scripts/gpu/qwen3vl_gpu.py (tokens, speed and memory against transformers, one case end
# to end). Results go to $OUT (default ./gpu-results).
#
# Prepare the carry on any machine with Rust (no GPU needed): scripts/gpu/build-carry.sh;
# then run this script there from the repository root.
set -euo pipefail
OUT="${OUT:-$PWD/gpu-results}"
mkdir -p "$OUT"
BIN="$(mktemp -d)/keyslice"
xz -dc gpu-carry/keyslice.xz > "$BIN"
chmod +x "$BIN"
# The CUDA libraries PyTorch brought (cuBLAS, NVRTC, cuRAND), found by the binary at run time;
# the driver's libcuda.so.1 is on the system.
LIBS="$(python3 - <<'PY'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
dirs = {os.path.dirname(p) for r in roots for p in glob.glob(os.path.join(r, "nvidia", "**", "lib*.so*"), recursive=True)}
print(":".join(sorted(dirs)))
PY
)"
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
"$BIN" --version | tee -a "$OUT/gpu.txt"
# The binary on its own: a tiny checkpoint on the GPU (fails loudly if CUDA is not found).
"$BIN" vlm --model tests/data/qwen3vl/tiny --video tests/data/qwen3vl/video --fps 2 \
    --prompt "Which frame shows the largest lesion?" --max-new-tokens 12 --device cuda --json \
    > "$OUT/tiny-cuda.json"
python3 - "$OUT/tiny-cuda.json" <<'PY'
import json, sys
ours = json.load(open(sys.argv[1]))
want = json.load(open("tests/data/qwen3vl/reference.json"))["video"]["greedy_tokens"]
print(f"tiny fixture on {ours['device']}: tokens {'equal to' if ours['token_ids'] == want else 'DIFFERENT from'} transformers' (f32, CPU)")
PY
python3 scripts/gpu/qwen3vl_gpu.py --keyslice "$BIN" --out "$OUT" "$@" | tee "$OUT/qwen3vl_gpu.md"
