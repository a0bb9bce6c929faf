#!/bin/sh
# Run a command on an emulated slow network, on one machine.
#
#   scripts/netem.sh RATE -- CMD [ARGS...]
#   scripts/netem.sh 1gbit -- mpirun -np 4 --oversubscribe _build/hipress-bench -b 16M -e 64M
#
# CMD runs in a private network namespace (unshare -n) whose loopback is
# rate-limited with a tc token bucket filter (tbf) at RATE: a tc rate such as
# 100mbit, 1gbit, 10gbit, or "off" for the same namespace and transport with
# no limit.  The Open MPI MCA variables are exported so that every mpirun
# inside uses the TCP transport on that loopback, and nothing else:
#   OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self
#   OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
# (pml ob1 so that UCX, where a machine has it, cannot bypass the TCP BTL;
# no vader, so ranks on this machine cannot talk through shared memory.)
#
# Needs root (network namespaces, tc), unshare (util-linux) and ip/tc
# (iproute2).  Root is required anyway, so the variables that let mpirun run
# as root are exported too.
#
# Limits (see doc/benchmarks.md):
#  * one token bucket on one loopback is shared by all ranks: it behaves like
#    one switch uplink that every rank's traffic crosses, not like one link
#    per rank; a job of N ranks sees RATE in total, not per rank;
#  * no delay emulation (netem is not available on these machines): latency
#    is loopback latency plus queueing in the bucket;
#  * every rank shares this machine's cores, so at higher rates compression,
#    decompression and TCP itself become the bottleneck, not the network.
#
# Environment: HP_NETEM_BURST (tbf burst, default 256kb).
set -eu

die() {
    echo "netem: error: $*" >&2
    exit 2
}

usage() {
    echo "usage: $0 RATE -- CMD [ARGS...]   (RATE: e.g. 100mbit, 1gbit, 10gbit, off)" >&2
    exit 2
}

[ $# -ge 3 ] || usage
rate=$1
[ "$2" = "--" ] || usage
shift 2

case "$rate" in
off) ;;
*)
    echo "$rate" | grep -Eq '^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit)$' ||
        die "bad rate '$rate': use a number followed by bit, kbit, mbit, gbit or tbit (e.g. 1gbit), or off"
    ;;
esac
burst=${HP_NETEM_BURST:-256kb}

[ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces and tc need it); try: sudo -E $0 $rate -- $*"
command -v unshare >/dev/null 2>&1 || die "unshare not found: apt-get install util-linux"
command -v ip >/dev/null 2>&1 || die "ip not found: apt-get install iproute2"
command -v tc >/dev/null 2>&1 || die "tc not found: apt-get install iproute2"
unshare -n true 2>/dev/null || die "unshare -n failed: this container or kernel does not allow new network namespaces (needs CAP_SYS_ADMIN)"

export HP_NETEM_RATE="$rate" HP_NETEM_BURST="$burst"
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The inner shell gets the command as "$@", so arguments keep their quoting.
exec unshare -n -- sh -c '
    set -e
    ip link set lo up || { echo "netem: error: cannot bring up lo in the new namespace" >&2; exit 2; }
    if [ "$HP_NETEM_RATE" != off ]; then
        tc qdisc add dev lo root tbf rate "$HP_NETEM_RATE" burst "$HP_NETEM_BURST" latency 50ms ||
            { echo "netem: error: tc could not add a tbf qdisc on lo (kernel module sch_tbf missing?)" >&2; exit 2; }
        echo "netem: loopback limited to $HP_NETEM_RATE (tbf, burst $HP_NETEM_BURST, shared by all ranks); MPI over TCP on lo" >&2
    else
        echo "netem: loopback not limited; MPI over TCP on lo" >&2
    fi
    exec "$@"
' netem "$@"
