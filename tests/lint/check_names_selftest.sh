#!/bin/sh
# Self-test of tests/lint/check_names.sh: a small tree of layer folders,
# compiled, must give exactly the violations planted in it -- an arrow up
# (core calling the driver), one into cuda/ (src/ using a device name), data used
# upward, two files calling each other (one of them through libtool's
# per-target object name), a circle of three, a stale object that must be
# left out -- and the same tree without them must pass; the pending list
# must turn a violation into a report.  Run by `make check`
# (tests/lint/docs.mk); needs a C compiler (the build's CC, else cc) and nm,
# and skips (77) without one.
set -u

here=$(cd "$(dirname "$0")" && pwd) || exit 1
cc=${CC:-}
if [ -z "$cc" ] && [ -n "${HP_BUILDDIR:-}" ]; then
    cc=$(sed -n 's/^CC = *//p' "$HP_BUILDDIR/Makefile" 2>/dev/null)
fi
cc=${cc:-cc}
command -v "${cc%% *}" >/dev/null 2>&1 || { echo "SKIP: no C compiler ($cc)"; exit 77; }
command -v "${HP_NM:-nm}" >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }

# this tree's own pending list, not the real one
HP_NAMES_PENDING=
export HP_NAMES_PENDING

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_names_selftest.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
fail() {
    echo "FAIL: $*"
    status=1
}

# put PATH TEXT: a source file of the test tree
put() {
    mkdir -p "$tmp/src/${1%/*}"
    printf '%s\n' "$2" >"$tmp/src/$1"
}

# build: every .c of the test tree to its object, as the real build names
# them (src/ops/b.c through libtool's .libs/ with a per-target prefix)
build() {
    rm -rf "$tmp/build"
    (cd "$tmp/src" && find . -name '*.c') | while read -r f; do
        f=${f#./}
        d=${f%/*}
        b=${f##*/}
        case $f in
            src/ops/b.c) o=$d/.libs/libhpbase_la-${b%.c}.o ;;
            *) o=$d/${b%.c}.o ;;
        esac
        mkdir -p "$tmp/build/${o%/*}"
        $cc -c -o "$tmp/build/$o" "$tmp/src/$f" || echo "cannot compile $f"
    done
}

run() {
    HP_SRCDIR=$tmp/src HP_BUILDDIR=$tmp/build "$here/check_names.sh" >"$tmp/out" 2>&1
    rc=$?
    cat "$tmp/out"
    return $rc
}

expect() {
    grep -F -- "$1" "$tmp/out" >/dev/null || fail "no line with: $1"
}

# The clean tree: every use runs down the table.
put src/core/low.c 'int hp_low(void) { return 1; }
int hp_low_count = 3;'
put src/ops/a.c 'int hp_low(void);
int hp_a(void) { return hp_low(); }'
put src/ops/b.c 'int hp_a(void);
int hp_b(void) { return hp_a(); }'
put src/drive/high.c 'int hp_b(void);
int hp_high(void) { return hp_b(); }'
put src/backend/dev.c 'int hp_low(void);
int hp_dev(void) { return hp_low(); }'
put cuda/kern.c 'int hp_dev(void);
int hp_kern(void) { return hp_dev(); }'
put cuda/launch.c 'int hp_launch(void) { return 2; }'
put src/algo/x.c 'int hp_y(void);
int hp_x(void) { return hp_y(); }'
put src/algo/y.c 'int hp_z(void);
int hp_y(void) { return hp_z(); }'
put src/algo/z.c 'int hp_z(void) { return 0; }'
build
echo "== a clean tree"
run || fail "the clean tree did not pass"
expect "0 violations, 0 pending"

# The planted violations.
put src/core/low.c 'int hp_high(void);
int hp_low(void) { return hp_high(); }
int hp_low_count = 3;'
put src/ops/a.c 'int hp_low(void);
int hp_b(void);
int hp_a(void) { return hp_low() + hp_b(); }'
put src/backend/dev.c 'int hp_low(void);
int hp_launch(void);
int hp_dev(void) { return hp_low() + hp_launch(); }'
put src/core/data.c 'extern int hp_drive_flag;
int hp_data(void) { return hp_drive_flag; }'
put src/drive/flag.c 'int hp_drive_flag = 1;'
put src/algo/z.c 'int hp_x(void);
int hp_z(void) { return hp_x(); }'
build
echo "== the planted violations"
run && fail "the planted violations passed"
expect "check_names: src/core/low.c: uses hp_high of src/drive/high.c: core may use only include (and core)"
expect "check_names: src/core/data.c: uses hp_drive_flag of src/drive/flag.c: core may use only"
expect "check_names: src/backend/dev.c: uses hp_launch of cuda/launch.c: backend may use only"
expect "check_names: src/ops/a.c <-> src/ops/b.c: each uses names of the other: src/ops/a.c uses hp_b; src/ops/b.c uses hp_a"
expect "check_names: src/algo/x.c: circle of names among src/algo/x.c src/algo/y.c src/algo/z.c"
n=$(grep '^check_names: ' "$tmp/out" | grep -v ' objects, ' | grep -vc 'take it off')
[ "$n" -eq 5 ] || fail "$n violations reported, 5 planted"
expect "5 violations, 0 pending"

echo "== the same, with src/algo/ on the pending list"
HP_NAMES_PENDING='src/algo/x.c src/algo/y.c src/algo/z.c src/algo/gone.c'
export HP_NAMES_PENDING
run && fail "still 4 violations, but it passed"
HP_NAMES_PENDING=
expect "e.g. src/algo/x.c -> src/algo/y.c -> src/algo/z.c -> src/algo/x.c (src/algo/x.c uses hp_y; src/algo/y.c uses hp_z; src/algo/z.c uses hp_x) (pending: on NAMES_PENDING)"
expect "check_names: src/algo/gone.c: on NAMES_PENDING, in no violation now: take it off"
expect "4 violations, 1 pending"

echo "== a stale object is left out"
put src/algo/z.c 'int hp_z(void) { return 0; }'
put src/core/low.c 'int hp_low(void) { return 1; }
int hp_low_count = 3;'
put src/ops/a.c 'int hp_low(void);
int hp_a(void) { return hp_low(); }'
put src/backend/dev.c 'int hp_low(void);
int hp_dev(void) { return hp_low(); }'
rm -f "$tmp/src/src/core/data.c"
build
# an old object of z.c that calls hp_x, older than its source: left out
printf 'int hp_x(void);\nint hp_z(void) { return hp_x(); }\n' >"$tmp/z.c"
$cc -c -o "$tmp/build/src/algo/z.o" "$tmp/z.c" && touch -t 200001010000 "$tmp/build/src/algo/z.o"
run || fail "a stale object was read"
expect "0 violations, 0 pending"

echo "== no objects"
rm -rf "$tmp/build"
mkdir -p "$tmp/build"
run && fail "an empty build tree passed"
expect "no object of a layer folder"

[ $status -eq 0 ] && echo "check_names self-test: PASS"
exit $status
