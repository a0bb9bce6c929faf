#!/bin/sh
# The device kit's one-page summary (scripts/gpu-kit copies it into the kit
# as summary.sh; its run.sh calls it last):
#
#   sh summary.sh RECORDS SUMMARY [GPU]
#
# RECORDS: the run's records, a tab-separated line each: "H<tab>text" (the
# heading), "STATUS<tab>step<tab>time<tab>what it showed" (PASS, FAIL,
# SKIP), "T<tab>target<tab>met|NOT MET|BELOW|not run<tab>detail".  SUMMARY
# (0-summary.txt) is replaced by the page: the heading, the verdict (PASS,
# FAIL, STOP for an unusable GPU, NO GPU), a line
# per step, what was not proven (each step skipped, with why, and each
# target not run), the targets of doc/dev/kit.md and where each step's log is.  GPU: 1
# when the run had a GPU.  The run writes SUMMARY line by line as it goes,
# so a run cut short still leaves its lines.
set -u
rec=$1 page=$2 gpu=${3:-0}
tab=$(printf '\t')
nfail=$(grep -c "^FAIL$tab" "$rec")
nmiss=$(grep -Ec "^T$tab[^$tab]*$tab(NOT MET|BELOW)$tab" "$rec")
nskip=$(grep -c "^SKIP$tab" "$rec")
skipped=
[ "$nskip" -gt 0 ] && skipped="; $nskip step(s) skipped: not proven (below)"
{
    sed -n "s/^H$tab//p" "$rec" | head -n 1
    if grep -q "^FAIL${tab}preflight$tab[^$tab]*${tab}STOP" "$rec"; then
        echo "verdict: STOP: a GPU is here but the kit cannot use it (the preflight's line below, 1-preflight.log)"
    elif grep -q "^FAIL$tab[^$tab]*$tab[^$tab]*${tab}STOP" "$rec"; then
        echo "verdict: STOP at $(grep "^FAIL$tab[^$tab]*$tab[^$tab]*${tab}STOP" "$rec" | head -n 1 | cut -f2):" \
            "the run stopped before spending device time (its line below, 1-preflight.log)"
    elif [ "$nfail" -gt 0 ]; then
        echo "verdict: FAIL ($nfail step(s) failed)"
    elif [ "$gpu" != 1 ]; then
        echo "verdict: NO GPU: the device steps were skipped, their stand-in forms passed"
    elif [ "$nmiss" -gt 0 ]; then
        echo "verdict: PASS, $nmiss target(s) missed (below)$skipped"
    elif [ "$nskip" -gt 0 ]; then
        echo "verdict: PASS, every target met that ran$skipped"
    else
        echo "verdict: PASS, every target met"
    fi
    sed -n "s/^H$tab//p" "$rec" | sed -n '2,$p'
    echo
    echo "steps (status, step, seconds, what it showed; doc/dev/kit.md says what each proves)"
    awk -F"$tab" '$1 == "PASS" || $1 == "FAIL" || $1 == "SKIP" { printf "%-4s  %-16s %5s  %s\n", $1, $2, $3, $4 }' "$rec"
    echo
    echo "not proven by this run (steps skipped, targets not run)"
    awk -F"$tab" '$1 == "SKIP" { printf "  %-16s %s\n", $2, $4; n++ }
                  $1 == "T" && $3 == "not run" { printf "  %-16s %s: %s\n", "(target)", $2, $4; n++ }
                  END { if (!n) print "  nothing: every step ran" }' "$rec"
    echo
    echo "targets"
    awk -F"$tab" '$1 == "T" { printf "  %-58s %-8s %s\n", $2, $3, $4 }' "$rec"
    echo
    echo "logs: 1-preflight.log (driver, devices, IPC, module, machine, kit), 2-kern.log, 3-sanitizer.log,"
    echo "      4-nccl.log, 5-ddp.log, 6-torchrun.log, 7-kernels.log: each run's command, output, exit status, time"
} >"$page.tmp" && mv "$page.tmp" "$page"
