#!/bin/sh
# Install the Debian packages hipress needs to build, test, benchmark and
# plot.  Idempotent: when every package is already installed it changes
# nothing and does not touch the network.  Needs root (apt-get).
#
# CUDA and NCCL are optional and not installed here: configure builds the
# CUDA module and the NCCL interception when it finds the toolkit in
# $CUDA_HOME or /usr/local/cuda (where NVIDIA's installers put it, nccl.h
# included on CI machines); no GPU is needed to build or test them.
# patchelf: scripts/gpu-kit gives the device kit's binaries
# $ORIGIN-relative library paths.
#
#   scripts/install_deps.sh            install what is missing
#   scripts/install_deps.sh --list     print the package list and exit
set -eu

PACKAGES="
autoconf automake libtool make pkg-config gcc g++ libc6-dev
libopenmpi-dev openmpi-bin libhwloc-dev check libopenblas-dev
python3 python3-mpi4py python3-numpy python3-matplotlib python3-sklearn
iproute2 util-linux procps coreutils iperf3
valgrind clang-14 libclang-rt-14-dev
patchelf
"

die() {
    echo "install_deps: error: $*" >&2
    exit 1
}

if [ "${1:-}" = "--list" ]; then
    for p in $PACKAGES; do echo "$p"; done
    exit 0
fi
[ $# -eq 0 ] || die "usage: $0 [--list]"

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script supports Debian and Ubuntu only"

missing=
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = installed ] || missing="$missing $p"
done

if [ -z "$missing" ]; then
    echo "install_deps: all $(echo $PACKAGES | wc -w) packages already installed"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "missing packages:$missing; run as root (or: sudo $0)"

echo "install_deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# -qq keeps the log short; apt-get still prints its errors, and set -e stops
# on the first failure.
apt-get update -qq || die "apt-get update failed"
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
    die "apt-get install failed for:$missing (rerun 'apt-get install$missing' to see why)"

for p in $missing; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = installed ] || die "package $p is still not installed"
done
echo "install_deps: done"
