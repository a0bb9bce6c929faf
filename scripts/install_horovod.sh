#!/bin/sh
# Install Horovod 0.28.1, built with MPI and PyTorch, into a virtual
# environment on top of Debian's python3-torch (1.13), for the Horovod test
# (tests/study/run_horovod.sh) and for trying hipress under Horovod.
#
#   scripts/install_horovod.sh            install, or do nothing when done
#   scripts/install_horovod.sh --check    exit 0 when the venv has a working
#                                         Horovod, 1 otherwise; change nothing
#   scripts/install_horovod.sh --list     print the Debian packages it needs
#
# Idempotent.  When the venv already imports horovod.torch and
# `horovodrun --check-build` lists MPI and PyTorch, it does nothing.  The
# Horovod source and the wheel built from it are cached, so a new venv (or a
# CI job restoring the cache directory) installs in 15-20 s, and a rerun on a
# working venv takes about 10 s (importing torch).  The first build took
# 2.5 minutes on two quiet cores and 6 on two busy ones, plus about 35 s for
# the Debian packages (torch and its headers).
#
# Environment:
#   HP_HOROVOD_VENV       the venv (default /opt/hipress-horovod)
#   HP_CACHE_DIR          the cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/hipress);
#                         Horovod's source and wheels go under horovod/ in it
#   MAX_JOBS              parallel compile jobs (default 2)
# (HP_, not HIPRESS_: libhipress.so stops a job at MPI_Init when it finds an
# unknown HIPRESS_* variable in the environment, and Open MPI hands the
# caller's environment to the ranks.)
#
# Debian packages are installed with apt-get when missing (needs root); the
# only download from PyPI is Horovod's source, once.
set -eu

HVD_VERSION=0.28.1
VENV=${HP_HOROVOD_VENV:-/opt/hipress-horovod}
CACHE=${HP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hipress}/horovod
JOBS=${MAX_JOBS:-2}
SYS_PYTHON=/usr/bin/python3

# What the build and the test need: Debian's torch with its C++ headers
# (libtorch-dev) and pybind11 (torch/extension.h includes it), a compiler,
# CMake, Open MPI's headers and mpirun, venv support, Horovod's Python
# dependencies (cloudpickle, cffi, psutil, pyyaml, packaging), wheel for building
# without build isolation, scikit-learn for the test's data set, and
# torchvision (Debian's 0.14, built for its torch 1.13) for the ResNet-18 of
# scripts/lab/train_bench.sh.
PACKAGES="
python3 python3-dev python3-venv python3-wheel python3-setuptools
python3-numpy python3-torch libtorch-dev pybind11-dev
python3-cloudpickle python3-cffi python3-psutil python3-yaml python3-packaging
python3-sklearn python3-torchvision
cmake make g++ libopenmpi-dev openmpi-bin
"

say() { echo "install_horovod: $*"; }
die() {
    echo "install_horovod: error: $*" >&2
    exit 1
}

# 0 when $VENV holds a Horovod that imports with PyTorch and was built with
# MPI, and sees torchvision
venv_ok() {
    [ -x "$VENV/bin/python" ] || return 1
    "$VENV/bin/python" -c 'import torchvision' >/dev/null 2>&1 || return 1
    "$VENV/bin/python" -c 'import horovod, horovod.torch as hvd; assert horovod.__version__ == "'"$HVD_VERSION"'"' \
        >/dev/null 2>&1 || return 1
    [ -x "$VENV/bin/horovodrun" ] || return 1
    cb=$("$VENV/bin/horovodrun" --check-build 2>/dev/null) || return 1
    echo "$cb" | grep -q '\[X\] PyTorch' || return 1
    echo "$cb" | grep -q '\[X\] MPI' || return 1
    return 0
}

case "${1:-}" in
--list)
    for p in $PACKAGES; do echo "$p"; done
    exit 0
    ;;
--check)
    if venv_ok; then
        say "Horovod $HVD_VERSION with MPI and PyTorch is installed in $VENV"
        exit 0
    fi
    say "no working Horovod $HVD_VERSION in $VENV"
    exit 1
    ;;
"") ;;
*) die "usage: $0 [--check | --list]" ;;
esac

if venv_ok; then
    say "Horovod $HVD_VERSION with MPI and PyTorch already installed in $VENV: nothing to do"
    exit 0
fi

# 1. Debian packages
command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script supports Debian 12 and Ubuntu only"
missing=
for p in $PACKAGES; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = installed ] || missing="$missing $p"
done
if [ -n "$missing" ]; then
    [ "$(id -u)" -eq 0 ] || die "missing Debian packages:$missing; run as root (or: sudo $0)"
    say "installing Debian packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed"
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 ||
        die "apt-get install failed for:$missing (rerun 'apt-get install$missing' to see why)"
fi
"$SYS_PYTHON" -c 'import torch' 2>/dev/null || die "$SYS_PYTHON cannot import torch (python3-torch)"

# The wheel depends on the Python, torch and Open MPI it was built against:
# they name its cache directory, so a changed system never reuses a stale one.
pyver=$("$SYS_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
torchver=$(dpkg-query -W -f='${Version}' python3-torch | sed 's/[^A-Za-z0-9.]/_/g')
mpiver=$(dpkg-query -W -f='${Version}' libopenmpi-dev | sed 's/[^A-Za-z0-9.]/_/g')
WHEELDIR=$CACHE/wheels/py$pyver-torch$torchver-ompi$mpiver
SRCDIR=$CACHE/src
mkdir -p "$WHEELDIR" "$SRCDIR" || die "cannot create the cache directory $CACHE"

# 2. the venv, on top of the system's packages (torch, numpy, mpi4py)
if [ ! -x "$VENV/bin/python" ]; then
    say "creating the venv $VENV"
    "$SYS_PYTHON" -m venv --system-site-packages "$VENV" || die "could not create the venv $VENV"
fi
"$VENV/bin/python" -c 'import torch' 2>/dev/null ||
    die "$VENV does not see the system's torch: remove it (rm -rf $VENV) and rerun"
pip_() {
    "$VENV/bin/python" -m pip --disable-pip-version-check --no-input "$@"
}

# 3. the wheel, built once
wheel=$(ls "$WHEELDIR"/horovod-"$HVD_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
    sdist=$SRCDIR/horovod-$HVD_VERSION.tar.gz
    if [ ! -f "$sdist" ]; then
        say "downloading the Horovod $HVD_VERSION source"
        pip_ download --no-deps --no-binary :all: -d "$SRCDIR" "horovod==$HVD_VERSION" >/dev/null ||
            die "could not download horovod==$HVD_VERSION from PyPI"
        [ -f "$sdist" ] || die "pip did not leave $sdist"
    fi
    log=$CACHE/build.log
    say "building Horovod $HVD_VERSION with MPI and PyTorch, $JOBS jobs (several minutes; log: $log)"
    t0=$(date +%s)
    # No build isolation: Horovod compiles against the torch it imports, which
    # must be Debian's, not one pip would download into an isolated env.
    if ! (
        export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_GLOO=1 \
            HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$JOBS"
        pip_ wheel --no-deps --no-build-isolation --no-cache-dir -v -w "$WHEELDIR" "$sdist"
    ) >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        die "building Horovod failed (last lines above; full log: $log)"
    fi
    wheel=$(ls "$WHEELDIR"/horovod-"$HVD_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
    [ -n "$wheel" ] || die "the build left no wheel in $WHEELDIR (log: $log)"
    say "built $(basename "$wheel") in $(($(date +%s) - t0)) s"
else
    say "using the cached wheel $wheel"
fi

# 4. install it; every dependency is already there from Debian
pip_ install --no-index --no-deps --force-reinstall "$wheel" >/dev/null ||
    die "pip could not install $wheel into $VENV"
problems=$(pip_ check 2>&1 | grep -i '^horovod' || true)
[ -z "$problems" ] || say "warning: pip check: $problems"

if ! venv_ok; then
    "$VENV/bin/horovodrun" --check-build >&2 || true
    die "Horovod is installed in $VENV but does not import with PyTorch or lacks MPI (see above)"
fi
say "Horovod $HVD_VERSION with MPI and PyTorch is ready in $VENV (python: $VENV/bin/python)"
