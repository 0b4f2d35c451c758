#!/usr/bin/env bash
# Rebuilds vendor/candle-core and vendor/candle-kernels from the released crates (0.11.1, as
# crates.io serves them, checked against their SHA-256) plus the patches in vendor/patches,
# less what a dependency never builds: tests, benches, examples (and their targets in the
# manifest) and the packaging files. See vendor/README.md.
#
#   vendor/refresh.sh           rewrite the two folders
#   vendor/refresh.sh --check   rebuild them in a scratch folder and compare: exit 1, with
#                               the differences, when the tree is not the release plus the
#                               patches
#
# The crates come from cargo's download cache when they are there, else from crates.io.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version=0.11.1
declare -A sha256=(
    [candle-core]=d11c8be87cfbaef9ebb62fb3f850d1fc8e00cc1d11d393fdbe55a4d5c2cdb325
    [candle-kernels]=8dc057aec95c3b1a0e595227cd039c1436da596f79ccc9e025ba17d070315851
)
check=false
[ "${1:-}" = "--check" ] && check=true
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
status=0
for crate in candle-core candle-kernels; do
    archive="$scratch/$crate-$version.crate"
    cached="$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"$crate-$version.crate" 2>/dev/null | head -1 || true)"
    if [ -n "$cached" ]; then
        cp "$cached" "$archive"
    else
        curl -sSfL --retry 3 "https://static.crates.io/crates/$crate/$crate-$version.crate" -o "$archive"
    fi
    echo "${sha256[$crate]}  $archive" | sha256sum --check --quiet
    tar -xzf "$archive" -C "$scratch"
    mv "$scratch/$crate-$version" "$scratch/$crate"
    patch --quiet --strip=1 --directory="$scratch" --no-backup-if-mismatch <"$here/patches/$crate.patch"
    tree="$scratch/$crate"
    rm -rf "$tree/tests" "$tree/benches" "$tree/examples" \
        "$tree/.cargo_vcs_info.json" "$tree/Cargo.lock" "$tree/Cargo.toml.orig"
    # Their targets go with them: a manifest naming a missing file does not load.
    python3 - "$tree/Cargo.toml" <<'PY'
import sys
path = sys.argv[1]
kept, skipping = [], False
for line in open(path, encoding="utf-8"):
    if line.startswith("["):
        skipping = line.strip() in ("[[test]]", "[[bench]]", "[[example]]")
    if not skipping:
        kept.append(line)
open(path, "w", encoding="utf-8").write("".join(kept))
PY
    if $check; then
        if ! diff -r "$tree" "$here/$crate"; then
            echo "vendor/$crate is not $crate $version plus vendor/patches/$crate.patch: run vendor/refresh.sh" >&2
            status=1
        fi
    else
        rm -rf "${here:?}/$crate"
        cp -r "$tree" "$here/$crate"
        echo "vendor/$crate: $crate $version plus vendor/patches/$crate.patch"
    fi
done
exit $status
