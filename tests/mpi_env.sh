# Shared by the mpirun test drivers: how to launch, with a hang guard.
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
