#!/bin/bash
# Run a command on an emulated cluster of H hosts on this machine.
#
#   scripts/cluster.sh --hosts H --rate RATE [options] -- CMD [ARGS...]
#   scripts/cluster.sh --hosts 4 --rate 1gbit -- cluster-mpirun _build/hipress-bench -b 64M -e 64M
#   scripts/cluster.sh --hosts 2 --ranks-per-host 2 --rate 1gbit -- \
#       sh -c 'mpirun $HP_CLUSTER_MPIRUN_ARGS -x LD_PRELOAD=... ./app'
#
# Each host is a network namespace with its own hostname (UTS namespace,
# h1 .. hH) and one veth link into a bridge.  Every link is limited in both
# directions by a token bucket filter (tc tbf) at RATE: the host's egress on
# its side of the veth, its ingress on the bridge's side.  Everything lives in
# one outer set of namespaces (network, mount, UTS, PID) created for the run:
# the machine's own interfaces, routes and files are never touched, host names
# resolve through a private /etc/hosts bind-mounted in the outer mount
# namespace, and every process of the cluster is in its PID namespace, so
# nothing outlives the run.
#
# CMD runs on the "head" (the outer namespace, hostname "head", bridge address
# 10.77.0.254), like a login node: it is meant to be an mpirun that starts one
# orted per host through an rsh agent that enters that host's namespaces, as
# Open MPI does over ssh.  Ranks on one host talk through shared memory (vader),
# ranks on different hosts through TCP over the links.  Exported to CMD:
#
#   OMPI_MCA_plm_rsh_agent      the agent (also: $HP_CLUSTER_RSH HOST CMD...)
#   OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
#   OMPI_MCA_{btl,oob}_tcp_if_include=10.77.0.0/24
#   OMPI_MCA_hwloc_base_binding_policy=none   (the same as --bind-to none)
#   OMPI_MCA_mpi_yield_when_idle=1   all hosts share this machine's cores, and
#                               the kernel emulates the links on those cores
#                               (softirqs): ranks that spin without yielding
#                               starve it, and a 1 Gbit/s link then delays
#                               packets for milliseconds, long enough for
#                               TCP to retransmit them (doc/cluster.md)
#   OMPI_MCA_orte_tmpdir_base   Open MPI's session directories, on the
#                               cluster's private tmpfs
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
#   HP_CLUSTER_HOSTS            h1:R,h2:R,...  (for mpirun --host)
#   HP_CLUSTER_NP               H*R
#   HP_CLUSTER_MPIRUN_ARGS      --host h1:R,... -np H*R --bind-to none
#   HP_CLUSTER_HOSTNAMES        h1 h2 ...
#   HP_CLUSTER_LINKS            the bridge-side interface of each host, in
#                               order (hpv1 hpv2 ...): `ip link set hpv2 down`
#                               cuts host h2 off
#   HP_CLUSTER_RATE, HP_CLUSTER_DIR
#   PATH                        begins with a directory holding cluster-mpirun
#                               (mpirun $HP_CLUSTER_MPIRUN_ARGS "$@") and
#                               cluster-rsh (the agent)
#
# The agent starts the remote command with a clean environment, as ssh would:
# PATH, LD_LIBRARY_PATH, HOME, USER, LOGNAME, SHELL and LANG only (mpirun
# hands its MCA settings to each orted on its command line).  Pass anything
# else to the ranks with mpirun -x, as on a real cluster.
#
# Before CMD runs, the links prove their rate: one TCP stream (iperf3) per
# host, all at once, each host sending to the next (h1->h2, ..., hH->h1), so
# every link carries one stream each way; each must reach --check-min percent
# (default 90) of RATE, or the script says so and stops (exit 3).  The tbf
# burst is sized for the rate: 64 KiB (one TSO/GSO packet) + 2 ms at RATE,
# unless --burst says otherwise.  tbf counts whole Ethernet frames, so a TCP
# stream over 1500-byte frames sees about 95.6% of RATE as payload.
#
# Options:
#   --hosts H            number of hosts (default 2, at most 250)
#   --rate RATE          per-host link rate in each direction: a tc rate such
#                        as 100mbit, 1gbit, 10gbit, or "off" (no limit)
#   --ranks-per-host R   slots per host in HP_CLUSTER_HOSTS (default 1)
#   --burst BYTES        tbf burst in bytes (default: 65536 + RATE x 2 ms)
#   --check-time S       seconds each check stream is timed (default 3, plus
#                        1 s of warm-up that is not counted)
#   --check-min PCT      minimum share of RATE each stream must reach (90)
#   --no-check           skip the link check (figures then prove nothing)
#   -q, --quiet          only errors and the link check's summary
#   -h, --help
#
# Exit status: CMD's status; 2 usage error; 3 link check failed; 77 this
# machine cannot run the cluster (not root, a tool missing, namespaces, veth,
# bridges or tbf not allowed); 143 when SIGTERM stopped it.  Stop it with
# Ctrl-C or SIGTERM: the command is asked to stop (SIGTERM, SIGKILL 10 s
# later), then every process of the cluster is killed and the links and
# mounts are removed.
#
# Needs root, bash, util-linux (unshare, nsenter, mount), iproute2 (ip, tc,
# ss), iperf3 (for the link check) and Open MPI to be useful.
set -u

prog=cluster
subnet=10.77.0
head_addr=$subnet.254
port=5201

die() { # die STATUS MESSAGE
    echo "$prog: error: $2" >&2
    exit "$1"
}
say() { [ "$quiet" = 1 ] || echo "$prog: $*" >&2; }

usage() {
    sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

# ---------------------------------------------------------------- options
hosts=2 rate= rph=1 burst= check_time=3 check_min=90 check=1 quiet=0
inner=0
if [ "${1:-}" = --inner ]; then
    inner=1
    shift
fi
while [ $# -gt 0 ]; do
    case "$1" in
    --hosts) [ $# -ge 2 ] || usage; hosts=$2; shift 2 ;;
    --rate) [ $# -ge 2 ] || usage; rate=$2; shift 2 ;;
    --ranks-per-host) [ $# -ge 2 ] || usage; rph=$2; shift 2 ;;
    --burst) [ $# -ge 2 ] || usage; burst=$2; shift 2 ;;
    --check-time) [ $# -ge 2 ] || usage; check_time=$2; shift 2 ;;
    --check-min) [ $# -ge 2 ] || usage; check_min=$2; shift 2 ;;
    --no-check) check=0; shift ;;
    -q | --quiet) quiet=1; shift ;;
    -h | --help) usage ;;
    --) shift; break ;;
    *) echo "$prog: error: unknown option '$1'" >&2; usage ;;
    esac
done
[ $# -ge 1 ] || { echo "$prog: error: no command given (put it after --)" >&2; usage; }

isint() { case "$1" in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac; }
isint "$hosts" && [ "$hosts" -ge 1 ] && [ "$hosts" -le 250 ] || die 2 "--hosts must be 1 to 250, not '$hosts'"
isint "$rph" && [ "$rph" -ge 1 ] || die 2 "--ranks-per-host must be a positive integer, not '$rph'"
isint "$check_time" && [ "$check_time" -ge 1 ] || die 2 "--check-time must be a positive number of seconds"
isint "$check_min" && [ "$check_min" -ge 1 ] && [ "$check_min" -le 100 ] || die 2 "--check-min must be 1 to 100"
[ -n "$rate" ] || die 2 "--rate is required (e.g. --rate 1gbit, or --rate off)"

# rate in bits per second (tc's units: k, m, g, t are powers of 1000)
rate_bps=0
if [ "$rate" != off ]; then
    rate_bps=$(echo "$rate" | awk '
        match($0, /^[0-9]+(\.[0-9]+)?/) {
            n = substr($0, 1, RLENGTH); u = substr($0, RLENGTH + 1)
            m["bit"] = 1; m["kbit"] = 1e3; m["mbit"] = 1e6; m["gbit"] = 1e9; m["tbit"] = 1e12
            if (u in m && n * m[u] >= 1000) { printf "%.0f\n", n * m[u]; exit }
        }')
    [ -n "$rate_bps" ] || die 2 "bad rate '$rate': use a number followed by kbit, mbit, gbit or tbit (e.g. 1gbit), or off"
    if [ -z "$burst" ]; then
        burst=$(awk -v r="$rate_bps" 'BEGIN { printf "%.0f\n", 65536 + r / 8 * 0.002 }')
    fi
    isint "$burst" && [ "$burst" -ge 1600 ] || die 2 "--burst must be a number of bytes (at least 1600)"
fi

# ---------------------------------------------------------------- outer part
# In the caller's namespaces: check what is needed, then start the inner part
# in new namespaces and wait for it, forwarding SIGINT, SIGTERM and SIGHUP.
if [ "$inner" = 0 ]; then
    [ "$(id -u)" -eq 0 ] || die 77 "must run as root (namespaces, veth, tc need it)"
    for t in unshare:util-linux nsenter:util-linux mount:mount umount:mount ip:iproute2 tc:iproute2 \
        ss:iproute2 awk:mawk timeout:coreutils ps:procps; do
        command -v "${t%%:*}" >/dev/null 2>&1 || die 77 "${t%%:*} not found: apt-get install ${t#*:}"
    done
    if [ "$check" = 1 ] && [ "$hosts" -ge 2 ]; then
        command -v iperf3 >/dev/null 2>&1 ||
            die 77 "iperf3 not found (it checks the links): apt-get install iperf3, or pass --no-check"
    fi
    unshare --net --mount --uts --pid --fork --mount-proc true 2>/dev/null ||
        die 77 "cannot create network, mount, UTS and PID namespaces here (unshare failed: a container without CAP_SYS_ADMIN?)"

    self=$(readlink -f "$0")
    args=(--hosts "$hosts" --rate "$rate" --ranks-per-host "$rph" --check-time "$check_time"
        --check-min "$check_min")
    [ -n "$burst" ] && args+=(--burst "$burst")
    [ "$check" = 1 ] || args+=(--no-check)
    [ "$quiet" = 1 ] && args+=(--quiet)

    # --kill-child: if unshare dies, its child (PID 1 of the new PID
    # namespace) gets SIGKILL, and with it every process of the cluster.
    # Started in the background so that a signal to this script can be
    # forwarded at once; stdin is kept (a background job would get /dev/null).
    unshare --net --mount --uts --pid --fork --kill-child --mount-proc -- \
        "$BASH" "$self" --inner "${args[@]}" -- "$@" <&0 &
    upid=$!
    forward() {
        local ipid
        ipid=$(ps -o pid= --ppid "$upid" 2>/dev/null | tr -d ' ')
        [ -n "$ipid" ] && kill -TERM "$ipid" 2>/dev/null
    }
    trap forward INT TERM HUP
    while :; do
        wait "$upid"
        rc=$?
        kill -0 "$upid" 2>/dev/null || break
    done
    exit "$rc"
fi

# ---------------------------------------------------------------- inner part
# PID 1 of new network, mount, UTS and PID namespaces.  SIGINT may be ignored
# here (started in the background); the outer part forwards it as SIGTERM.
state=/dev/shm/hp-cluster
cmd_pid=
stopping=0
rc=0
links_made=0

# processes of this PID namespace other than this shell, counted without
# forking (a subshell would count itself)
count_others() {
    nothers=0
    local p
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = 1 ] && continue
        [ -r "/proc/$p/stat" ] || continue
        local st
        read -r st </proc/"$p"/stat 2>/dev/null || continue
        st=${st##*) }
        [ "${st%% *}" = Z ] && continue
        nothers=$((nothers + 1))
    done
}

teardown() {
    trap - EXIT
    trap '' INT TERM HUP
    local i
    # every process started here is in this PID namespace: stop them all
    kill -TERM -1 2>/dev/null
    for i in $(seq 1 30); do
        count_others
        [ "$nothers" -eq 0 ] && break
        sleep 0.1
    done
    if [ "$nothers" -gt 0 ]; then
        say "killing $nothers process(es) still running"
        kill -KILL -1 2>/dev/null
    fi
    # the hosts' namespaces are gone with their holders; remove the rest
    if [ "$links_made" = 1 ]; then
        for i in $(seq 1 "$hosts"); do ip link del "hpv$i" 2>/dev/null; done
        ip link del hpbr0 2>/dev/null
    fi
    mountpoint -q /etc/hosts 2>/dev/null && umount /etc/hosts 2>/dev/null
    mountpoint -q /dev/shm 2>/dev/null && umount -l /dev/shm 2>/dev/null
    say "cluster torn down"
}

on_signal() {
    if [ -z "$cmd_pid" ]; then
        echo "$prog: stopped by a signal during setup" >&2
        rc=143
        exit 143
    fi
    if [ "$stopping" = 0 ]; then
        stopping=1
        echo "$prog: signal received: stopping the command" >&2
        kill -TERM "$cmd_pid" 2>/dev/null
        # mpirun ends its job on SIGTERM; if the command does not end, kill it
        (sleep 10 && kill -KILL "$cmd_pid" 2>/dev/null) &
    else
        kill -KILL "$cmd_pid" 2>/dev/null
    fi
}

trap on_signal INT TERM HUP
trap teardown EXIT

setup_fail() { # setup_fail STATUS MESSAGE
    echo "$prog: error: $2" >&2
    rc=$1
    exit "$1"
}

hostname head
ip link set lo up || setup_fail 77 "cannot bring up the loopback in a new network namespace"

# private scratch: a tmpfs on /dev/shm of this mount namespace (Open MPI's
# shared-memory files and session directories, the agent, the hosts file)
mount -t tmpfs -o mode=1777 hp-cluster /dev/shm || setup_fail 77 "cannot mount a tmpfs on /dev/shm in a private mount namespace"
mkdir -p "$state/bin" "$state/hosts.d" "$state/tmp" "$state/check"

{
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    echo "$head_addr head"
    for i in $(seq 1 "$hosts"); do echo "$subnet.$i h$i"; done
} >"$state/hosts"
mount --bind "$state/hosts" /etc/hosts || setup_fail 77 "cannot bind-mount a private /etc/hosts"

ip link add hpbr0 type bridge 2>/dev/null || setup_fail 77 "cannot create a bridge (kernel without bridge support?)"
links_made=1
ip addr add "$head_addr/24" dev hpbr0 && ip link set hpbr0 up || setup_fail 1 "cannot configure the bridge"

tbf() { # tbf DEV [nsenter args...]: rate-limit DEV's egress
    local dev=$1
    shift
    [ "$rate" = off ] && return 0
    "$@" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms
}

declare -a hpid
for i in $(seq 1 "$hosts"); do
    # the host's holder: a process in the host's own network and UTS
    # namespaces; it says when they exist, then sleeps until the end
    unshare --net --uts -- /bin/sh -c 'hostname "$1" && ip link set lo up && : >"$2" && exec sleep infinity' \
        hp-host "h$i" "$state/hosts.d/.ready$i" </dev/null &
    hpid[i]=$!
done
for i in $(seq 1 "$hosts"); do
    for t in $(seq 1 100); do
        [ -e "$state/hosts.d/.ready$i" ] && break
        kill -0 "${hpid[i]}" 2>/dev/null || break
        sleep 0.05
    done
    [ -e "$state/hosts.d/.ready$i" ] || setup_fail 77 "host h$i did not start (unshare --net --uts failed?)"
    [ "$(readlink /proc/"${hpid[i]}"/ns/net)" != "$(readlink /proc/1/ns/net)" ] ||
        setup_fail 1 "host h$i is not in its own network namespace"
    echo "${hpid[i]}" >"$state/hosts.d/h$i"
    echo "${hpid[i]}" >"$state/hosts.d/$subnet.$i"
    ns=(nsenter -t "${hpid[i]}" -n)
    ip link add "hpv$i" type veth peer name eth0 netns "${hpid[i]}" 2>/dev/null ||
        setup_fail 77 "cannot create a veth pair (kernel without veth support?)"
    ip link set "hpv$i" master hpbr0 up &&
        "${ns[@]}" ip addr add "$subnet.$i/24" dev eth0 &&
        "${ns[@]}" ip link set eth0 up || setup_fail 1 "cannot configure the link of h$i"
    if ! tbf "hpv$i" || ! tbf eth0 "${ns[@]}"; then
        setup_fail 77 "tc could not add a tbf qdisc (kernel module sch_tbf missing?)"
    fi
done
if [ "$rate" = off ]; then
    say "$hosts hosts (h1..h$hosts, $subnet.1..$hosts), links not limited"
else
    say "$hosts hosts (h1..h$hosts, $subnet.1..$hosts), each link limited to $rate in each direction (tbf, burst $burst bytes)"
fi

# ---------------------------------------------------------------- the agent
# cluster-rsh [-options] HOST CMD...: run CMD (a shell command line, as with
# ssh) in HOST's namespaces with a clean environment.
mca_env=(
    OMPI_MCA_pml=ob1
    OMPI_MCA_btl=self,vader,tcp
    OMPI_MCA_btl_tcp_if_include=$subnet.0/24
    OMPI_MCA_oob_tcp_if_include=$subnet.0/24
    OMPI_MCA_hwloc_base_binding_policy=none
    OMPI_MCA_mpi_yield_when_idle=1
    OMPI_MCA_orte_tmpdir_base=$state/tmp
    OMPI_MCA_plm_rsh_agent=$state/bin/cluster-rsh
    OMPI_ALLOW_RUN_AS_ROOT=1
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
)
{
    echo '#!/bin/sh'
    echo '# rsh agent of the emulated cluster (scripts/cluster.sh)'
    echo 'while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done'
    echo 'host=$1; shift'
    echo "f=$state/hosts.d/\${host%%.*}"
    echo '[ -f "$f" ] || { echo "cluster-rsh: unknown host $host" >&2; exit 255; }'
    echo 'read -r pid <"$f"'
    printf 'exec nsenter -t "$pid" -n -u -- env -i'
    printf ' %q' "PATH=$PATH" "HOME=${HOME:-/root}" "USER=root" "LOGNAME=root" "SHELL=/bin/sh" "LANG=${LANG:-C.UTF-8}"
    [ -n "${LD_LIBRARY_PATH:-}" ] && printf ' %q' "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo ' /bin/sh -c "$*"'
} >"$state/bin/cluster-rsh"
hostlist=
for i in $(seq 1 "$hosts"); do hostlist=${hostlist:+$hostlist,}h$i:$rph; done
np=$((hosts * rph))
mpirun_args="--host $hostlist -np $np --bind-to none"
{
    echo '#!/bin/sh'
    echo '# mpirun on every slot of the emulated cluster (scripts/cluster.sh)'
    echo "exec mpirun $mpirun_args \"\$@\""
} >"$state/bin/cluster-mpirun"
chmod 755 "$state/bin/cluster-rsh" "$state/bin/cluster-mpirun"

# ---------------------------------------------------------------- link check
link_check() {
    local i j srv=() cli=() line kb min_kb pct ok=1 out= worst=
    for i in $(seq 1 "$hosts"); do
        nsenter -t "${hpid[i]}" -n iperf3 -s -1 -p "$port" >"$state/check/srv$i" 2>&1 </dev/null &
        srv[i]=$!
    done
    for i in $(seq 1 "$hosts"); do
        for t in $(seq 1 100); do
            [ -n "$(nsenter -t "${hpid[i]}" -n ss -Hltn "sport = :$port")" ] && break
            sleep 0.05
        done
    done
    for i in $(seq 1 "$hosts"); do
        j=$((i % hosts + 1))
        nsenter -t "${hpid[i]}" -n timeout $((check_time + 20)) \
            iperf3 -c "$subnet.$j" -p "$port" -t "$check_time" -O 1 -f k >"$state/check/cli$i" 2>&1 </dev/null &
        cli[i]=$!
    done
    for i in $(seq 1 "$hosts"); do wait "${cli[i]}"; done
    for i in $(seq 1 "$hosts"); do kill "${srv[i]}" 2>/dev/null; done
    min_kb=$(awk -v r="$rate_bps" -v p="$check_min" 'BEGIN { printf "%.0f\n", r / 1000 * p / 100 }')
    for i in $(seq 1 "$hosts"); do
        j=$((i % hosts + 1))
        kb=$(awk '/receiver/ { for (k = 2; k <= NF; k++) if ($k == "Kbits/sec") r = $(k - 1) } END { print r }' \
            "$state/check/cli$i")
        if [ -z "$kb" ]; then
            echo "$prog: link check h$i->h$j failed:" >&2
            sed 's/^/    /' "$state/check/cli$i" >&2
            ok=0
            continue
        fi
        if [ "$rate" = off ]; then
            line=$(awk -v k="$kb" 'BEGIN { printf "%.2f Gbit/s", k / 1e6 }')
        else
            line=$(awk -v k="$kb" -v r="$rate_bps" 'BEGIN { printf "%.0f Mbit/s (%.1f%%)", k / 1e3, k * 1e5 / r }')
            awk -v k="$kb" -v m="$min_kb" 'BEGIN { exit !(k < m) }' && ok=0
        fi
        out="$out h$i->h$j $line,"
    done
    out=${out%,}
    if [ "$rate" = off ]; then
        echo "$prog: link check ($hosts concurrent TCP streams, ${check_time} s): unlimited links carry:$out" >&2
        return 0
    fi
    if [ "$ok" = 1 ]; then
        echo "$prog: link check ($hosts concurrent TCP streams, ${check_time} s, need >= $check_min% of $rate each):$out: ok" >&2
        return 0
    fi
    echo "$prog: link check ($hosts concurrent TCP streams, ${check_time} s, need >= $check_min% of $rate each):$out" >&2
    echo "$prog: error: the emulated links do not carry $rate (this machine's CPUs, or a too small --burst);" \
        "figures measured on them would not mean what they say: stopping" >&2
    return 1
}
if [ "$check" = 1 ] && [ "$hosts" -ge 2 ]; then
    link_check || { rc=3; exit 3; }
elif [ "$check" = 1 ]; then
    say "one host: no link to check"
else
    say "link check skipped (--no-check): the rate is not proven"
fi

# ---------------------------------------------------------------- the command
export "${mca_env[@]}"
export HP_CLUSTER_HOSTS=$hostlist HP_CLUSTER_NP=$np HP_CLUSTER_MPIRUN_ARGS="$mpirun_args"
export HP_CLUSTER_RATE=$rate HP_CLUSTER_DIR=$state HP_CLUSTER_RSH=$state/bin/cluster-rsh
HP_CLUSTER_HOSTNAMES=
HP_CLUSTER_LINKS=
for i in $(seq 1 "$hosts"); do
    HP_CLUSTER_HOSTNAMES="$HP_CLUSTER_HOSTNAMES${HP_CLUSTER_HOSTNAMES:+ }h$i"
    HP_CLUSTER_LINKS="$HP_CLUSTER_LINKS${HP_CLUSTER_LINKS:+ }hpv$i"
done
export HP_CLUSTER_HOSTNAMES HP_CLUSTER_LINKS
export PATH="$state/bin:$PATH"

say "running on head: $*"
# a background job of a script starts with SIGINT and SIGQUIT ignored: give
# the command the dispositions it would have in a terminal
env --default-signal=INT,QUIT -- "$@" <&0 &
cmd_pid=$!
while :; do
    wait "$cmd_pid"
    rc=$?
    kill -0 "$cmd_pid" 2>/dev/null || break
done
[ "$stopping" = 1 ] && [ "$rc" -lt 128 ] && rc=143
say "command exited with status $rc"
exit "$rc"
