#!/bin/sh
# Self-test of tests/lint/check_layers.sh on a copy of the source tree: the
# copy as it is must pass; each violation planted in it, one at a time,
# must fail with its own line -- the entry layer (mpi_wrappers/) including
# a header of hipress other than the front ends' entry headers, the real
# NCCL functions' table and hp_core.h, by either spelling, and the driver
# including a front end's header (an arrow up); a system header in the
# entry layer must not.  Run by `make check` (tests/lint/docs.mk).
set -u

here=$(cd "$(dirname "$0")" && pwd) || exit 1
src=${HP_SRCDIR:-$(cd "$here/../.." && pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_layers_selftest.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
fail() {
    echo "FAIL: $*"
    status=1
}

# fresh: a copy of what the check reads
fresh() {
    rm -rf "$tmp/tree"
    mkdir -p "$tmp/tree"
    (cd "$src" && cp -R Makefile.am src include mpi_wrappers cuda "$tmp/tree/") || { echo "FAIL: cannot copy $src"; exit 1; }
}

# plant FILE LINE: LINE added after FILE's opening comment
plant() {
    awk -v add="$2" '{ print } /\*\// && !done { print add; done = 1 }' "$tmp/tree/$1" >"$tmp/p" &&
        mv "$tmp/p" "$tmp/tree/$1"
}

# expect WHAT RC [PATTERN]: the check's exit code, and a line matching
# PATTERN in its output
expect() {
    HP_SRCDIR=$tmp/tree "$here/check_layers.sh" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -ne "$2" ]; then
        fail "$1: exit $rc, want $2"
        cat "$tmp/out"
    elif [ -n "${3:-}" ] && ! grep -q -- "$3" "$tmp/out"; then
        fail "$1: no line matching '$3'"
        cat "$tmp/out"
    else
        echo "ok - $1${3:+: $(grep -m 1 -- "$3" "$tmp/out")}"
    fi
}

fresh
expect "the tree as it is" 0
plant mpi_wrappers/hp_nccl_wrap.c '#include "hp_global.h"'
expect "the entry layer includes the process state" 1 \
    'check_layers: mpi_wrappers/hp_nccl_wrap.c: includes "hp_global.h": the entry layer includes of hipress only'
fresh
plant mpi_wrappers/hp_mpi_wrap.c '#include "hp_backend.h"'
expect "the entry layer includes a backend" 1 'check_layers: mpi_wrappers/hp_mpi_wrap.c: includes "hp_backend.h"'
fresh
plant mpi_wrappers/hp_mpi_wrap.c '#include <hp_nccl_group.h>'
expect "the entry layer includes the group tracking as a system header" 1 \
    'check_layers: mpi_wrappers/hp_mpi_wrap.c: includes <hp_nccl_group.h>, a header of hipress'
fresh
plant mpi_wrappers/hp_mpi_wrap.c '#include <stdio.h>'
expect "the entry layer includes a system header" 0
fresh
plant src/drive/hp_drive.c '#include "hp_front_mpi.h"'
expect "the driver includes a front end" 1 'check_layers: src/drive/hp_drive.c: includes src/front/mpi/hp_front_mpi.h: an arrow up'
exit $status
