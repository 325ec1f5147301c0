#!/usr/bin/env bash
# Packs Ray for the GPU machine (no package registry there; a device call carries at most 64 MiB and
# the ray wheel alone is ~79 MB), the way ../shared/device/stage-cute-dsl.sh packs the CuTe DSL.
# Run from the project's root, on a machine with a package index. Writes .ray/ (git-ignored):
#   .ray/ray-VER-cpPY.tar.xz   a `pip install --target` of ray and the dependencies the GPU machine
#                              lacks (it has click, pyyaml, filelock, packaging), trimmed of what a
#                              cluster of one host does not use (the dashboard's web UI, Java jars,
#                              the libraries on top of Ray: data, serve, train, tune, rllib, llm;
#                              tests, caches) and with debug symbols stripped
#   .ray/activate.sh           unpacks it to /tmp once and puts it on PYTHONPATH
# Then, when a Python of that version is here, checks that `import ray; ray.init(num_cpus=2)` works
# from the unpacked copy. About 3 minutes the first time (xz with a large window); later runs reuse
# the archive.
#
# On the GPU machine, from the project's root (carry .ray):
#   source .ray/activate.sh && python3 -m eval batch CANDIDATES --ray local
#
# RAY_VERSION (default 2.60.0) and PY_VERSION (default 3.12, the GPU machine's) choose the build.
set -euo pipefail
VER="${RAY_VERSION:-2.60.0}"
PYV="${PY_VERSION:-3.12}"
TAG="cp${PYV/./}"
OUT=.ray
NAME="ray-$VER-$TAG"
[ -d .git ] || { echo "run me from the project's root" >&2; exit 2; }
mkdir -p "$OUT"

build() {
  local tmp=$1 site=$1/site
  python3 -m pip install -q --target "$site" --only-binary=:all: --python-version "$PYV" \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 "ray==$VER"
  # already on the GPU machine (the harness and torch need them): keep theirs
  rm -rf "$site"/{click,yaml,_yaml,filelock,packaging}{,-*.dist-info} "$site"/{PyYAML,click,filelock,packaging}-*.dist-info
  local r=$site/ray
  rm -rf "$r"/{jars,rllib,data,serve,train,tune,llm,air,workflow,cpp} "$r"/dashboard/client "$site/bin"
  find "$site" \( -name tests -o -name __pycache__ \) -type d -prune -exec rm -rf {} +
  find "$site" -name '*.pyi' -delete
  find "$site" -type f \( -name '*.so' -o -perm -u+x \) -exec sh -c 'file -b "$1" | grep -q ELF && strip --strip-unneeded "$1"' _ {} \;
  echo "unpacked: $(du -sh "$site" | cut -f1)"
  echo "compressing (a few minutes)..."
  tar -C "$site" -cf - . | xz -9e -T2 --lzma2=preset=9e,dict=256MiB > "$OUT/$NAME.tar.xz.part"
  mv "$OUT/$NAME.tar.xz.part" "$OUT/$NAME.tar.xz"
}

if [ -f "$OUT/$NAME.tar.xz" ]; then
  echo "already staged: $OUT/$NAME.tar.xz"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  build "$tmp"
fi

cat > "$OUT/activate.sh" <<ACT
# source me from the project's root (GPU machine): Ray $VER for Python $PYV on PYTHONPATH
_d=/tmp/$NAME
if [ ! -d "\$_d/ray" ]; then
  mkdir -p "\$_d.part" && tar -C "\$_d.part" -xJf .ray/$NAME.tar.xz && chmod -R a+rX "\$_d.part" && mv "\$_d.part" "\$_d"
fi
export PYTHONPATH="\$_d\${PYTHONPATH:+:\$PYTHONPATH}"
export RAY_USAGE_STATS_ENABLED=0
ACT
ls -la "$OUT"
echo "staged: $(du -b "$OUT/$NAME.tar.xz" | awk '{printf "%.1f MiB", $1 / 1048576}') ($OUT/$NAME.tar.xz)"

# the check: a Python of that version here, with nothing but the unpacked copy on its path
PY=
for candidate in "python$PYV" "$HOME"/.pyenv/versions/"$PYV".*/bin/python"$PYV"; do
  if "$candidate" -c pass 2>/dev/null; then PY=$candidate; break; fi
done
if [ -n "$PY" ]; then
  check=$(mktemp -d)
  tar -C "$check" -xJf "$OUT/$NAME.tar.xz"
  "$PY" -m pip install -q --target "$check/gpu-has" click pyyaml filelock packaging >/dev/null
  PYTHONPATH="$check:$check/gpu-has" RAY_USAGE_STATS_ENABLED=0 "$PY" -s -c \
    "import ray; ray.init(num_cpus=2, include_dashboard=False); print('check:', ray.__version__, ray.cluster_resources())"
  rm -rf "$check"
else
  echo "no python$PYV here: the import check is skipped (run it on the GPU machine)"
fi
