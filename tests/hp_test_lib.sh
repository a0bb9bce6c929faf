# Sourced by the drivers of the drop-in library tests (tests/run_*.sh of
# tests/mpi.mk): launcher, a clean environment, the library to preload.
: "${HP_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${HP_BUILDDIR:=$(pwd)}"
: "${HP_PYTHON:=/usr/bin/python3}"
. "$HP_SRCDIR/tests/mpi_env.sh"

# Open MPI hands mpirun's environment to the ranks it starts locally: a
# HIPRESS_* variable in the caller's shell would change what every test
# below runs.  Each test sets what it needs with -x.
for _hp_v in $(env | sed -n 's/^\(HIPRESS_[A-Za-z0-9_]*\)=.*/\1/p'); do
    unset "$_hp_v"
done
unset _hp_v

HP_LIB="$HP_BUILDDIR/.libs/libhipress.so"
if [ ! -f "$HP_LIB" ]; then
    echo "FAIL: $HP_LIB is missing (build first)"
    exit 1
fi

status=0
hp_fail() {
    echo "FAIL: $*"
    status=1
}
