#!/usr/bin/env bash
# Builds the .deb from the release build, unpacks it into a scratch root (no root rights, no
# container), checks its files, and starts the installed binary under Xvfb until it draws
# its first frame (the demo workspace, made in a temporary data folder), with a screenshot.
#   needs: cargo-deb (installed from crates.io when missing), dpkg-deb, Xvfb, and
#   imagemagick or x11-apps for the screenshot; desktop-file-validate is used when present.
#   packaging/build_deb.sh [OUT_DIR]      (default target/deb-check)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/deb-check}"
rm -rf "$out"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

if ! cargo deb --version >/dev/null 2>&1; then
  cargo install cargo-deb --version "^3.8" --locked
fi
# The man pages and completion scripts come from the release binary itself.
cargo build --release --locked
shell=target/shell
rm -rf "$shell"
mkdir -p "$shell"
target/release/keyslice manpages --out "$shell/man"
target/release/keyslice completions bash >"$shell/keyslice.bash"
target/release/keyslice completions zsh >"$shell/_keyslice"
target/release/keyslice completions fish >"$shell/keyslice.fish"
cargo deb --no-build --output "$out/"
deb="$(ls "$out"/keyslice_*.deb)"
echo "package: $deb ($(du -h "$deb" | cut -f1))"
dpkg-deb --info "$deb" | sed -n '/Package:/,/Description:/p'

root="$out/root"
dpkg-deb -x "$deb" "$root"
for file in usr/bin/keyslice usr/share/applications/keyslice.desktop \
  usr/share/icons/hicolor/scalable/apps/keyslice.svg usr/share/mime/packages/keyslice.xml \
  usr/share/doc/keyslice/MODEL_CARD.md usr/share/bash-completion/completions/keyslice \
  usr/share/zsh/vendor-completions/_keyslice usr/share/fish/vendor_completions.d/keyslice.fish; do
  [ -e "$root/$file" ] || { echo "missing in the package: $file" >&2; exit 1; }
done
if command -v desktop-file-validate >/dev/null 2>&1; then
  desktop-file-validate "$root/usr/share/applications/keyslice.desktop"
fi
ls "$root"/usr/share/man/man1/keyslice.1* "$root"/usr/share/man/man1/keyslice-pacs-publish.1* >/dev/null \
  || { echo "missing in the package: the man pages" >&2; exit 1; }
"$root/usr/bin/keyslice" --version

# The installed binary, on its own (the model is inside it), to a first frame.
display=":$((150 + RANDOM % 100))"
Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb_pid=$!
viewer_pid=""
trap 'kill $viewer_pid $xvfb_pid 2>/dev/null || true' EXIT
runtime="$(mktemp -d)"; chmod 700 "$runtime"
sleep 1
(cd "$out" && env -i PATH=/usr/bin:/bin HOME="$out/home" DISPLAY="$display" \
  XDG_RUNTIME_DIR="$runtime" KEYSLICE_DATA_DIR="$out/data" KEYSLICE_LOG=info \
  WGPU_BACKEND="${WGPU_BACKEND:-vulkan}" "$root/usr/bin/keyslice" >"$out/viewer.log" 2>&1) &
viewer_pid=$!
for _ in $(seq 1 180); do
  grep -q "first slices drawn" "$out/viewer.log" && break
  kill -0 "$viewer_pid" 2>/dev/null || { cat "$out/viewer.log" >&2; exit 1; }
  sleep 1
done
grep "first slices drawn" "$out/viewer.log" || { cat "$out/viewer.log" >&2; exit 1; }
sleep 2
if command -v import >/dev/null 2>&1; then
  DISPLAY="$display" import -window root "$out/first-frame.png"
else
  DISPLAY="$display" xwd -root -silent >"$out/first-frame.xwd"
fi
echo "installed binary drew its first frame: $(ls "$out"/first-frame.*)"
