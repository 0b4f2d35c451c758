#!/usr/bin/env bash
# Installs each released training/serving client in its own virtual environment, for
# scripts/clients/check.sh. Several GB each; not part of CI.
#
#   scripts/clients/install.sh [DIR]     (default: $KEYSLICE_CLIENTS_DIR or ./.clients)
#
# Versions are the ones the checks were written against; override with the variables below.
set -euo pipefail
DIR="${1:-${KEYSLICE_CLIENTS_DIR:-.clients}}"
VLLM="${VLLM_VERSION:-0.34.0}"
VERL="${VERL_VERSION:-0.9.1}"
SWIFT4="${SWIFT4_VERSION:-4.6.0}"
SWIFT3="${SWIFT3_VERSION:-3.12.6}"
LLAMAFACTORY="${LLAMAFACTORY_VERSION:-0.9.5}"
mkdir -p "$DIR"
command -v uv >/dev/null || python3 -m pip install --quiet uv

make_env() { # name, packages... (an --override file may come first)
    local name="$1"; shift
    if [ -x "$DIR/$name/bin/python" ] && [ -f "$DIR/$name/.installed" ]; then
        echo "$name: already installed"; return
    fi
    echo "$name: installing $*"
    uv venv --quiet --clear --python python3 "$DIR/$name"
    VIRTUAL_ENV="$DIR/$name" uv pip install --quiet --python "$DIR/$name/bin/python" "$@"
    touch "$DIR/$name/.installed"
}

only="${KEYSLICE_CLIENTS:-vllm verl swift4 swift3 llamafactory}"
for c in $only; do
    case "$c" in
        vllm)
            # vLLM pins a FlashInfer build that PyPI no longer carries; FlashInfer is a GPU
            # kernel library the checks never load, so any release will do.
            echo "flashinfer-python>=0.7" > "$DIR/vllm-overrides.txt"
            make_env vllm --override "$DIR/vllm-overrides.txt" "vllm==$VLLM" ;;
        verl) make_env verl "verl==$VERL" qwen-vl-utils torchvision "transformers>=4.57" ;;
        swift4) make_env swift4 "ms-swift==$SWIFT4" qwen-vl-utils torchvision ;;
        swift3) make_env swift3 "ms-swift==$SWIFT3" qwen-vl-utils torchvision ;;
        llamafactory) make_env llamafactory "llamafactory==$LLAMAFACTORY" torchvision av ;;
        *) echo "unknown client $c" >&2; exit 2 ;;
    esac
done
