# Sourced (after tests/hp_test_lib.sh) by the tests that run on the emulated
# cluster (scripts/cluster.sh): prerequisites, and the check that nothing of
# the cluster is left once it has exited.  The command run on the cluster
# writes readlink /proc/self/ns/pid to $1/pidns and its hosts' network
# namespaces to $1/netns (see tests/mpi/run_cluster.sh).

# Skip (77) where the cluster cannot run; a missing tool of
# scripts/install_deps.sh is a failure, not a skip.
hp_cluster_prereqs() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP: the emulated cluster needs root (network namespaces)"
        exit 77
    fi
    for _t in unshare nsenter ip tc ss iperf3 ps timeout; do
        command -v "$_t" >/dev/null 2>&1 ||
            { echo "FAIL: $_t not found (scripts/install_deps.sh installs it)"; exit 1; }
    done
    HP_NETNS_BEFORE=$(ip netns list 2>/dev/null)
    HP_LINKS_BEFORE=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | sort)
}

# hp_cluster_left DIR: fails the test for every process of the cluster's PID
# namespace or hosts still running (after up to 5 s to reap), a changed
# `ip netns list` or a changed set of this machine's interfaces
hp_cluster_left() {
    _pidns=$(cat "$1/pidns" 2>/dev/null)
    _netns=$(cat "$1/netns" 2>/dev/null)
    for _i in 1 2 3 4 5 6 7 8 9 10; do
        _left=0
        for _p in /proc/[0-9]*; do
            [ -n "$_pidns" ] && [ "$(readlink "$_p/ns/pid" 2>/dev/null)" = "$_pidns" ] &&
                { _left=$((_left + 1)); continue; }
            _n=$(readlink "$_p/ns/net" 2>/dev/null)
            for _x in $_netns; do [ "$_n" = "$_x" ] && _left=$((_left + 1)); done
        done
        [ $_left -eq 0 ] && break
        sleep 0.5
    done
    [ $_left -eq 0 ] || hp_fail "$_left process(es) of the cluster still running after it exited"
    [ "$(ip netns list 2>/dev/null)" = "$HP_NETNS_BEFORE" ] || hp_fail "ip netns list changed"
    _links=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | sort)
    [ "$_links" = "$HP_LINKS_BEFORE" ] || hp_fail "this machine's interfaces changed: '$HP_LINKS_BEFORE' -> '$_links'"
}
