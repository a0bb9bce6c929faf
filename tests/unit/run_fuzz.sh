#!/bin/sh
# Decoder fuzzing as a deterministic test (doc/dev/fuzzing.md):
#  1. replay the committed seed corpus with tests/unit/fuzz_replay (built by make
#     check with the normal compiler);
#  2. build the libFuzzer harness tests/unit/fuzz_decode with clang (ASan + UBSan)
#     if needed, replay the corpus with it, then fuzz for a fixed number of
#     runs from a fixed seed.
# Any crash, sanitizer report or harness assertion fails the test.  clang is
# required: without it the test fails (it does not skip).
# Environment: HP_BUILDDIR, HP_SRCDIR (make check sets them), FUZZ_CC,
# HP_FUZZ_RUNS (default 200000), HP_FUZZ_SEED (default 1).
set -u

B=${HP_BUILDDIR:-$(pwd)}
S=${HP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
CORPUS=$S/tests/unit/fuzz_corpus
RUNS=${HP_FUZZ_RUNS:-200000}
SEED=${HP_FUZZ_SEED:-1}

fail() {
    echo "run_fuzz.sh: FAIL: $*" >&2
    exit 1
}

[ -d "$CORPUS" ] || fail "no seed corpus at $CORPUS"

# 1. replay with the plain build
if [ ! -x "$B/tests/unit/fuzz_replay" ]; then
    (unset MAKEFLAGS MFLAGS MAKELEVEL; make -s -C "$B" tests/unit/fuzz_replay) || fail "cannot build tests/unit/fuzz_replay"
fi
"$B/tests/unit/fuzz_replay" "$CORPUS" || fail "replay of $CORPUS with tests/unit/fuzz_replay"

# 2. the libFuzzer harness
if [ -z "${FUZZ_CC:-}" ]; then
    FUZZ_CC=$(sed -n 's/^FUZZ_CC = *//p' "$B/Makefile" 2>/dev/null)
fi
if [ -z "${FUZZ_CC:-}" ]; then
    for c in clang-14 clang; do
        if command -v "$c" >/dev/null 2>&1; then FUZZ_CC=$c; break; fi
    done
fi
[ -n "${FUZZ_CC:-}" ] || fail "clang not found: install clang-14 and libclang-rt-14-dev (or set FUZZ_CC)"
command -v "$FUZZ_CC" >/dev/null 2>&1 || fail "FUZZ_CC=$FUZZ_CC not found"

(unset MAKEFLAGS MFLAGS MAKELEVEL; make -s -C "$B" FUZZ_CC="$FUZZ_CC" tests/unit/fuzz_decode) \
    || fail "cannot build tests/unit/fuzz_decode with $FUZZ_CC (is libclang-rt-14-dev installed?)"

work=$(mktemp -d "${TMPDIR:-/tmp}/hp_fuzz.XXXXXX") || fail "mktemp"
trap 'rm -rf "$work"' EXIT
mkdir "$work/new"
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

echo "run_fuzz.sh: replaying $CORPUS under ASan + UBSan"
"$B/tests/unit/fuzz_decode" -runs=0 -artifact_prefix="$work/" "$CORPUS" > "$work/replay.log" 2>&1 || {
    tail -n 40 "$work/replay.log" >&2
    fail "corpus replay crashed"
}

echo "run_fuzz.sh: fuzzing $RUNS runs from seed $SEED"
# new inputs go to the first directory (a scratch one), never the corpus
if ! "$B/tests/unit/fuzz_decode" -seed="$SEED" -runs="$RUNS" -max_len=4200 -timeout=20 \
        -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/" \
        "$work/new" "$CORPUS" > "$work/fuzz.log" 2>&1; then
    tail -n 60 "$work/fuzz.log" >&2
    for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
        [ -f "$a" ] || continue
        keep="$B/tests/fuzz-$(basename "$a")"
        cp "$a" "$keep"
        echo "run_fuzz.sh: reproduce with: $B/tests/unit/fuzz_decode $keep" >&2
    done
    fail "the fuzzer found a crash"
fi
grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ *DONE)' "$work/fuzz.log"
echo "run_fuzz.sh: ok"
