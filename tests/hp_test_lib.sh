# Sourced by the drivers of the drop-in library tests (tests/run_*.sh of
# tests/mpi/mpi.mk): launcher, a clean environment, the library to preload.
: "${HP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${HP_BUILDDIR:=$(pwd)}"
: "${HP_PYTHON:=/usr/bin/python3}"
. "$HP_SRCDIR/tests/mpi_env.sh"


HP_LIB="$HP_BUILDDIR/.libs/libhipress.so"
if [ ! -f "$HP_LIB" ]; then
    echo "FAIL: $HP_LIB is missing (build first)"
    exit 1
fi

# What to preload.  In a sanitizer build (configure --enable-sanitizers) the
# ASan runtime must come before everything else, and leak detection is off:
# Open MPI's components are unloaded before LeakSanitizer reports, so their
# leaks cannot be told apart (valgrind, in a plain build, checks leaks).
HP_PRELOAD=$HP_LIB
HP_ASAN=$(ldd "$HP_LIB" 2>/dev/null | awk '/libasan/ { print $3 }')
if [ -n "$HP_ASAN" ]; then
    HP_PRELOAD="$HP_ASAN $HP_LIB"
    ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
    export ASAN_OPTIONS
fi

status=0
hp_fail() {
    echo "FAIL: $*"
    status=1
}
