# Shared by the mpirun test drivers: how to launch, with a hang guard, and
# the environment the ranks start from.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
: "${MPIEXEC:=mpirun}"
: "${HP_BUILDDIR:=$(pwd)}"
: "${HP_MPI_TIMEOUT:=900}"
# hp_mpirun NP PROG ARGS...: a timeout is a failure (a hang)
hp_mpirun() {
    _np=$1; shift
    timeout "$HP_MPI_TIMEOUT" "$MPIEXEC" --oversubscribe -np "$_np" "$@"
}
# Open MPI hands mpirun's environment to the ranks it starts locally: a
# HIPRESS_* variable in the caller's shell would change what every test
# runs.  Each test sets what it needs with -x, on top of one setting: the
# suite tests each compressor's own form, which a job gets when it says it
# trains with SGD (HIPRESS_OPTIMIZER=sgd); the tests of the forms other
# optimizers get pass their own HIPRESS_OPTIMIZER.
for _hp_v in $(env | sed -n 's/^\(HIPRESS_[A-Za-z0-9_]*\)=.*/\1/p'); do
    unset "$_hp_v"
done
unset _hp_v
HIPRESS_OPTIMIZER=sgd
export HIPRESS_OPTIMIZER
