#!/usr/bin/env bash
# Stages NVIDIA CUTLASS's C++ headers (include/ and tools/util/include/, laid out as in a CUTLASS
# checkout) in .cutlass/ (git-ignored). The judge puts them on every worker's include path
# (CPLUS_INCLUDE_PATH, read by g++ and by nvcc, whose front end preprocesses with it; CUTLASS_PATH
# when unset), with or without --emulate-blackwell, and lets the worker read them (HARNESS_FOLDERS):
# contest files include <cutlass/...> and <cute/...> with -I$CUTLASS_PATH/include or none at all,
# as the leaderboard's B200 image had CUTLASS installed. Run from anywhere in the repository.
#
#   here (a git dir of CUTLASS or the network):  .ci/stage-cutlass.sh
#       writes .cutlass/cutlass-include.tar.xz (about 1 MiB) and unpacks it (about 28 MB, 870 files)
#   on the GPU machine (no network), carrying .cutlass/cutlass-include.tar.xz (not the folder):
#       .ci/stage-cutlass.sh && ...      unpacks the archive beside it
#
# CUTLASS_VERSION: a tag (default v4.3.5, the CUTLASS C++ headers GPU MODE's runner image installed
# during the nvfp4 series; its B200 image's own version is not published). CUTLASS_GIT_DIR: a clone
# or bare git dir of NVIDIA/cutlass holding that tag (default: the local mirror if present, else a
# shallow clone from GitHub).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.cutlass
ARCHIVE=$DEST/cutlass-include.tar.xz
WANT=${CUTLASS_VERSION:-}
VER=${WANT:-v4.3.5}

staged_version() { [ -f "$DEST/VERSION" ] && cut -d' ' -f1 "$DEST/VERSION" || true; }
unpack() {
  rm -rf "$DEST/include" "$DEST/tools" "$DEST/VERSION"
  tar -C "$DEST" -xJf "$ARCHIVE"
}
report() {
  echo "CUTLASS $(cat "$DEST/VERSION") staged: $DEST/include, $DEST/tools/util/include" \
       "($(du -shc "$DEST/include" "$DEST/tools" | tail -n 1 | cut -f1) unpacked," \
       "$(du -h "$ARCHIVE" | cut -f1) archive: carry $ARCHIVE)"
}

mkdir -p "$DEST"
if [ -f "$DEST/include/cutlass/cutlass.h" ] && { [ -z "$WANT" ] || [ "$(staged_version)" = "$WANT" ]; }; then
  report; exit 0
fi
if [ -f "$ARCHIVE" ] && { [ -z "$WANT" ] || [ "$(tar -xJOf "$ARCHIVE" VERSION | cut -d' ' -f1)" = "$WANT" ]; }; then
  unpack; report; exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
has_tag() { git --git-dir="$1" rev-parse -q --verify "$VER^{commit}" >/dev/null 2>&1; }
gitdir=""
for d in ${CUTLASS_GIT_DIR:+"$CUTLASS_GIT_DIR" "$CUTLASS_GIT_DIR/.git"} /work/.mirror/NVIDIA+cutlass/repo; do
  if [ -d "$d" ] && has_tag "$d"; then gitdir=$d; break; fi
done
if [ -z "$gitdir" ]; then
  echo "fetching CUTLASS $VER from GitHub..."
  git clone -q --bare --depth 1 --branch "$VER" https://github.com/NVIDIA/cutlass.git "$tmp/cutlass.git" || {
    echo "no CUTLASS $VER here: set CUTLASS_GIT_DIR to a clone holding it, or carry $ARCHIVE made elsewhere" >&2
    exit 2; }
  gitdir=$tmp/cutlass.git
fi
commit=$(git --git-dir="$gitdir" rev-parse "$VER^{commit}")
mkdir -p "$tmp/stage"
# a partial mirror may lack blobs outside these folders: git warns about them, the archive is whole
git --git-dir="$gitdir" archive "$commit" include tools/util/include 2>"$tmp/archive.err" | tar -C "$tmp/stage" -x \
  || { cat "$tmp/archive.err" >&2; exit 1; }
[ -f "$tmp/stage/include/cutlass/cutlass.h" ] && [ -f "$tmp/stage/include/cute/tensor.hpp" ] \
  || { echo "CUTLASS $VER: include/ incomplete" >&2; cat "$tmp/archive.err" >&2; exit 1; }
echo "$VER $commit" > "$tmp/stage/VERSION"
tar -C "$tmp/stage" -cf - VERSION include tools | xz -9 -T2 > "$ARCHIVE.part"
mv "$ARCHIVE.part" "$ARCHIVE"
unpack
report
