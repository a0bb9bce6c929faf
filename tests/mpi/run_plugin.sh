#!/bin/sh
# Compressor plugins (doc/plugins.md): tests/mpi/plugin_example.la (example_int8)
#  1. is listed by `hipress_info --compressors` under HIPRESS_PLUGIN;
#  2. runs under mpirun with libhipress.so preloaded (np 2 and 3, several
#     algorithms): results within the plugin's error bound, compressed, and
#     identical on every rank (tests/mpi/plugin_example_test checks);
#  3. a plugin path that does not load stops the job at MPI_Init with one
#     "hipress: error:" line naming HIPRESS_PLUGIN; so does a library that
#     exports no compressor.
# Environment: MPIEXEC, HP_BUILDDIR, HP_SRCDIR (from make check).
: "${HP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$HP_SRCDIR/tests/hp_test_lib.sh"

PLUGIN="$HP_BUILDDIR/tests/mpi/.libs/plugin_example.so"
PROG="$HP_BUILDDIR/tests/mpi/plugin_example_test"
for f in "$PLUGIN" "$PROG" "$HP_BUILDDIR/hipress_info"; do
    if [ ! -e "$f" ]; then
        echo "FAIL: $f is missing (make check builds it)"
        exit 1
    fi
done
out=$(mktemp "${TMPDIR:-/tmp}/hp_plugin.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT

# 1. the registry lists it, after the built-ins
if HIPRESS_PLUGIN="$PLUGIN" "$HP_BUILDDIR/hipress_info" --compressors > "$out" 2>&1; then
    grep -qx example_int8 "$out" || hp_fail "hipress_info --compressors does not list example_int8: $(tr '\n' ' ' < "$out")"
    [ "$(tail -n 1 "$out")" = example_int8 ] || hp_fail "example_int8 is not after the built-ins"
else
    hp_fail "hipress_info --compressors with HIPRESS_PLUGIN failed: $(cat "$out")"
fi
"$HP_BUILDDIR/hipress_info" --compressors | grep -qx example_int8 &&
    hp_fail "example_int8 listed without HIPRESS_PLUGIN"

# 2. allreduce through the plugin
# (auto: the plan may send a call plain, so only the bound and the identity
# are checked; a fixed algorithm must compress every call)
for case in "2 ring all" "2 auto any" "3 ring all" "3 ps all" "3 tree all" "3 allgather all" \
            "3 auto any"; do
    set -- $case
    if hp_mpirun "$1" -x LD_PRELOAD="$HP_LIB" -x HIPRESS_PLUGIN="$PLUGIN" \
            -x HIPRESS_COMPRESSOR=example_int8 -x HIPRESS_MIN_BYTES=0 -x HIPRESS_ALGO="$2" \
            "$PROG" 100003 "$3" > "$out" 2>&1; then
        sed 's/^/  /' "$out"
    else
        cat "$out"
        hp_fail "plugin_example_test np $1 algo $2"
    fi
done

# 3. a bad plugin stops the job at MPI_Init with one clear line
for bad in "$HP_BUILDDIR/tests/no_such_plugin.so" "$HP_BUILDDIR/.libs/libhipress.so"; do
    if hp_mpirun 2 -x LD_PRELOAD="$HP_LIB" -x HIPRESS_PLUGIN="$bad" \
            -x HIPRESS_COMPRESSOR=example_int8 -x HIPRESS_MIN_BYTES=0 "$PROG" > "$out" 2>&1; then
        hp_fail "HIPRESS_PLUGIN=$bad: the job ran"
    fi
    grep -q "^hipress: error: .*HIPRESS_PLUGIN" "$out" ||
        hp_fail "HIPRESS_PLUGIN=$bad: no 'hipress: error:' line naming HIPRESS_PLUGIN: $(head -c 600 "$out")"
    grep -q "plugin_example_test: np" "$out" && hp_fail "HIPRESS_PLUGIN=$bad: the test body ran"
done

[ $status -eq 0 ] && echo "run_plugin.sh: ok"
exit $status
