#!/usr/bin/env bash
# Real Horovod 0.28.1 (PyTorch, Gloo, CPU) for the tests: builds the wheel from the vendored source
# tarball when this machine has none built for its torch, and installs it into a directory of its
# own that only the tests put on PYTHONPATH (never into the system's Python).
#
#   scripts/horovod.sh            prints one line saying what it did; on success the last line of
#                                 stdout is the directory to put on PYTHONPATH
#
# The tarball: $ETRUN_HOROVOD_TARBALL, default ../shared/vendor/horovod-0.28.1-src.tar.xz beside
# the checkout (how to build it by hand: docs/real-horovod.md). The cache:
# $ETRUN_HOROVOD_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/etrun/horovod, one folder per key:
# the tarball's SHA-256, the python3-torch version and the Python version, so a new torch or a new
# tarball builds again and an old build is never used with them.
# Exit status: 0 with the directory on stdout; 3 when real Horovod is not to be had here (no
# tarball, a build that failed or ran past $ETRUN_HOROVOD_BUILD_TIMEOUT, default 1800 s, or a
# wheel that does not import): the one line on stderr says why and where the build log is.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=/usr/bin/python3
tarball=${ETRUN_HOROVOD_TARBALL:-$PWD/../shared/vendor/horovod-0.28.1-src.tar.xz}
cache=${ETRUN_HOROVOD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etrun/horovod}
build_timeout=${ETRUN_HOROVOD_BUILD_TIMEOUT:-1800}

unavailable() {  # unavailable REASON: the one line, exit 3
  echo "etrun: real Horovod unavailable, its tests are skipped: $1" >&2
  exit 3
}

[ -r "$tarball" ] || unavailable "no source tarball at $tarball (set ETRUN_HOROVOD_TARBALL)"
torch=$($PYTHON -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
  unavailable "$PYTHON cannot import torch (install python3-torch)"
py=$($PYTHON -c 'import sys; print("%d.%d" % sys.version_info[:2])')
sum=$(sha256sum "$tarball" | cut -c1-16)
key="$sum-torch$torch-py$py"
dir=$cache/$key
site=$dir/site

works() {  # works: the installed copy imports with its PyTorch extension
  PYTHONPATH=$site $PYTHON -c 'import horovod.torch' >/dev/null 2>&1
}

if [ -f "$dir/ok" ] && works; then
  echo "etrun: real Horovod: using $site (built before for torch $torch, tarball $sum)" >&2
  echo "$site"
  exit 0
fi

mkdir -p "$dir"
exec 9>"$dir/lock"
flock 9  # a second test run waits for the first one's build instead of building beside it
if [ -f "$dir/ok" ] && works; then
  echo "etrun: real Horovod: using $site (built by a run beside this one)" >&2
  echo "$site"
  exit 0
fi
rm -rf "$dir/src" "$site" "$dir/ok"
log=$dir/build.log
echo "etrun: real Horovod: building it from $tarball for torch $torch (about 4 minutes on 2 cores; log: $log)" >&2
start=$SECONDS
mkdir -p "$dir/src"
tar -xJf "$tarball" -C "$dir/src" || unavailable "cannot unpack $tarball"
src=$(find "$dir/src" -mindepth 1 -maxdepth 1 -type d -name 'horovod-*' | head -1)
[ -n "$src" ] || unavailable "$tarball holds no horovod-* folder"
if ! (cd "$src" && env HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
      HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_CPU_OPERATIONS=GLOO \
      MAKEFLAGS=-j"$(nproc)" timeout "$build_timeout" $PYTHON setup.py bdist_wheel) >"$log" 2>&1; then
  unavailable "the build failed or ran past ${build_timeout} s (last lines of $log: $(tail -n 3 "$log" | tr '\n' ' '))"
fi
wheel=$(find "$src/dist" -name 'horovod-*.whl' | head -1)
[ -n "$wheel" ] || unavailable "the build made no wheel (see $log)"
$PYTHON -m pip install -q --no-deps --no-index --target "$site" "$wheel" >>"$log" 2>&1 ||
  unavailable "pip could not install $wheel into $site (see $log)"
works || unavailable "the built wheel does not import (PYTHONPATH=$site $PYTHON -c 'import horovod.torch')"
cp "$wheel" "$dir/"
rm -rf "$dir/src"
touch "$dir/ok"
echo "etrun: real Horovod: built and installed into $site in $((SECONDS - start)) s" >&2
echo "$site"
