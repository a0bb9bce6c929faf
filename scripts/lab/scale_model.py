#!/usr/bin/python3
"""Cost model of one compressed MPI_Allreduce call at scale (doc/scale.md).

  scripts/lab/scale_model.py --selftest             byte formulas against hand values
  scripts/lab/scale_model.py --validate RAW.csv [--rate 1] [--cores 2] [--filter col=val]
                                                model against a bench's raw.csv
  scripts/lab/scale_model.py --predict [--md FILE] [--png FILE] [--csv FILE]
                                                predictions N = 8..1024, 10..400 Gbit/s

The bytes every rank sends are the library's own volume functions
(src/algo/hp_algo_{ring,tree,ps,allgather}.c), with the message size of
src/comp/hp_comp.c (hp_msg_wire_bytes: a 12-byte header plus the codec's
max_payload) and each codec's max_payload at the default settings.  The time
is the form of src/plan/hp_plan.c (hp_plan_cost):

    w  = wire / bw              cc = enc / enc_rate + dec / dec_rate
    t  = max(w, cc) + (w + cc - max(w, cc)) / K + K * msgs * alpha

with K (the pipeline's partitions) chosen as the library chooses it: the
powers of two up to 256 whose partitions hold at least 32 KiB and one grain.
Plain ring: 2(N-1)/N * S / bw + (N-1)/N * S / sum_rate + 2(N-1) * alpha.

Only the standard library is needed for --selftest and --validate; numpy
and matplotlib only for --png.
"""
import argparse
import csv
import math
import statistics
import sys

HP_MSG_HEADER = 12          # src/comp/hp_comp.h
PLAN_MIN_PART_BYTES = 32 * 1024   # src/plan/hp_plan.c
PLAN_MAX_PARTS = 256

# default settings (src/core/hp_settings.def)
ONEBIT_BLOCK = 4096
TBQ_BLOCK = 4096
TERNGRAD_BITS = 2
TERNGRAD_BLOCK = 4096
FP16_BLOCK = 1024
Q_BLOCK = 512


def cdiv(a, b):
    return (a + b - 1) // b


def payload(kind, n):
    """max_payload(n) of each codec, bytes, for n float32 elements."""
    if kind == "none":
        return 4 * n
    if kind == "onebit":    # two means per block, one bit per element (in 32-bit words)
        return 8 * cdiv(n, ONEBIT_BLOCK) + 4 * cdiv(n, 32)
    if kind == "tbq":       # one threshold per block, 2 bits per element
        return 4 * cdiv(n, TBQ_BLOCK) + cdiv(n, 4)
    if kind == "terngrad":  # min and max per block, b bits per element
        return 8 * cdiv(n, TERNGRAD_BLOCK) + cdiv(n * TERNGRAD_BITS, 8)
    if kind == "fp16":      # 2 bytes per element, one scale byte per block
        return 2 * n + cdiv(n, FP16_BLOCK)
    if kind in ("q2", "q4", "q8"):   # min and max per block, B bits per element
        b = int(kind[1])
        return 8 * cdiv(n, Q_BLOCK) + cdiv(n * b, 8)
    raise ValueError(f"unknown codec {kind}")


GRAIN = {"none": 1, "onebit": ONEBIT_BLOCK, "tbq": TBQ_BLOCK, "terngrad": TERNGRAD_BLOCK,
         "fp16": FP16_BLOCK, "q2": Q_BLOCK, "q4": Q_BLOCK, "q8": Q_BLOCK}


def wire(kind, n):
    """hp_msg_wire_bytes for a dense codec: header plus max_payload."""
    return HP_MSG_HEADER + payload(kind, n)


def ceil_log2(N):
    L = 0
    while (1 << L) < N:
        L += 1
    return L


def volume(algo, kind, n, N, sum_kind=None):
    """(wire bytes per rank, encoded bytes, decoded bytes, messages) of one
    call on n floats over N ranks, as the library's *_volume functions.
    enc and dec are split by codec: dict kind -> float input bytes."""
    s = sum_kind or kind
    S = 4.0 * n
    chunk = cdiv(n, N)
    if algo == "ring":
        w = wire(kind, chunk) + (N - 2) * wire(s, chunk) + (N - 1) * wire(s, chunk)
        enc = {kind: S / N}
        enc[s] = enc.get(s, 0) + S * (N - 1) / N
        dec = {s: S * (2.0 * N - 1) / N}
        msgs = 2.0 * (N - 1)
    elif algo == "tree":
        L = ceil_log2(N)
        w = L * (wire(s, n) + wire(s, n))
        enc = {s: 2 * S}
        dec = {s: (L + 1) * S}
        msgs = 2.0 * L
    elif algo == "ps":
        w = (N - 1) * (wire(kind, chunk) + wire(s, chunk))
        enc = {kind: S * (N - 1) / N}
        enc[s] = enc.get(s, 0) + S / N
        dec = {kind: S * (N - 1) / N}
        dec[s] = dec.get(s, 0) + S
        msgs = 2.0 * (N - 1)
    elif algo == "allgather":
        w = (N - 1) * wire(kind, n)
        enc = {kind: S}
        dec = {kind: N * S}
        msgs = float(N - 1)
    else:
        raise ValueError(f"unknown algorithm {algo}")
    return w, enc, dec, msgs


def plain_wire(S, N):
    return 2.0 * (N - 1) / N * S


# ---------------------------------------------------------------- rates
# Codec rates in GB/s of float32 input, one core: `hipress-bench --kernels
# --csv` on the development VM in a quiet moment (doc/measured/kernels.csv,
# 2026-11-29); q2, q4 and q8 are newer than that file: their ratios to
# memcpy measured in this session (under load) times that file's memcpy
# rate, 11.6 GB/s (doc/scale.md#rates).  Rerun with --kernels CSV to
# replace them.  "none" is a copy (encode) and a float sum (decode).
CPU_RATES = {
    # codec: (encode, decode)
    "none": (12.7, 13.3),
    "onebit": (6.9, 22.0),
    "tbq": (6.0, 20.6),
    "terngrad": (5.5, 19.8),
    "fp16": (19.1, 18.1),
    "q2": (5.8, 16.8),
    "q4": (5.6, 17.3),
    "q8": (4.8, 15.4),
}

# ASSUMED (not measured: no GPU in this session): an H200-class GPU whose
# copy moves about 4.3 TB/s (read + write).  A codec that reads and writes
# B bytes per element runs at 4.3e12 * 4 / B bytes of input per second:
# encode with error feedback reads x and r, writes r and the code (about
# 12 B; tbq reads v twice, 16 B), fp16 encode 6 B; decode into a sum reads
# the code and the sum and writes the sum (about 8 B, fp16 10 B).
GPU_COPY = 4.3e12


def _gpu(bpe):
    return GPU_COPY * 4 / bpe / 1e9


GPU_RATES = {
    "none": (_gpu(8), _gpu(12)),
    "onebit": (_gpu(12.1), _gpu(8.1)),
    "tbq": (_gpu(16.3), _gpu(8.3)),
    "terngrad": (_gpu(12.3), _gpu(8.3)),
    "fp16": (_gpu(6), _gpu(10)),
    "q2": (_gpu(12.3), _gpu(8.3)),
    "q4": (_gpu(12.5), _gpu(8.5)),
    "q8": (_gpu(13), _gpu(9)),
}


def load_kernels(path):
    rates = dict(CPU_RATES)
    got = {}
    for r in csv.DictReader(line for line in open(path) if not line.startswith("#")):
        got.setdefault(r["compressor"], {})[r["op"]] = float(r["gbps"])
    for k, v in got.items():
        if "encode" in v and "decode" in v:
            rates[k] = (v["encode"], v["decode"])
    return rates


# ---------------------------------------------------------------- time
class Net:
    def __init__(self, gbit, alpha, eff=0.955, rates=None, slow=1.0, launch=0.0):
        self.bw = gbit * 1e9 / 8 * eff     # payload bytes/s per rank and direction
        self.alpha = alpha                 # seconds per message
        self.launch = launch               # codec overhead per message (a GPU kernel launch)
        self.rates = rates or CPU_RATES    # GB/s per codec
        self.slow = slow                   # codec slowdown: ranks sharing one core


def codec_time(net, enc, dec):
    t = 0.0
    for k, b in enc.items():
        t += b / (net.rates[k][0] * 1e9 / net.slow)
    for k, b in dec.items():
        t += b / (net.rates[k][1] * 1e9 / net.slow)
    return t


def hp_time(net, algo, kind, S, N, sum_kind=None, K=None):
    """Modelled seconds of one hipress call; returns (t, K, wire bytes)."""
    n = S // 4
    w_bytes, enc, dec, msgs = volume(algo, kind, n, N, sum_kind)
    w = w_bytes / net.bw
    cc = codec_time(net, enc, dec)
    mx = max(w, cc)
    unit = cdiv(n, N) if algo in ("ring", "ps") else n
    grains = max(cdiv(unit, GRAIN[kind]), 1)
    best = None
    Ks = [K] if K else [1 << i for i in range(9)]
    for k in Ks:
        if K is None and k > 1 and (4 * unit / k < PLAN_MIN_PART_BYTES or k > grains):
            break
        t = mx + (w + cc - mx) / k + k * msgs * (net.alpha + net.launch)
        if best is None or t < best[0]:
            best = (t, k, w_bytes)
    # outside hp_plan_cost (the same for every plan, so the library leaves
    # it out): the copy of the input into the output buffer
    # (src/front/hp_call.c) and the failure agreement at the end of the call
    # (hp_tp_agree_flag: a small allreduce, about 2 log2 N messages)
    extra = S / (net.rates["none"][0] * 1e9 / net.slow) + 2 * ceil_log2(N) * net.alpha
    return (best[0] + extra, best[1], best[2])


def plain_time(net, S, N):
    w = plain_wire(S, N) / net.bw
    red = (N - 1) / N * S / (net.rates["none"][1] * 1e9 / net.slow)
    return w + red + 2 * (N - 1) * net.alpha


# ---------------------------------------------------------------- selftest
def selftest():
    MiB = 1 << 20
    n = MiB // 4                      # 262144 floats
    # onebit, 1 MiB: 64 blocks x 8 B of means + 8192 words of bits
    assert payload("onebit", n) == 64 * 8 + 8192 * 4 == 33280
    # allgather onebit, N = 16, 1 MiB: 15 messages of 12 + 33280 bytes
    assert volume("allgather", "onebit", n, 16)[0] == 15 * 33292 == 499380
    # ring onebit N = 16: shards of 16384 floats, 4 x 8 + 512 x 4 + 12 = 2092 B, 30 of them
    assert wire("onebit", 16384) == 2092
    assert volume("ring", "onebit", n, 16)[0] == 30 * 2092 == 62760
    # tree onebit N = 16: 4 levels, up and down, the whole buffer each
    assert volume("tree", "onebit", n, 16)[0] == 8 * 33292 == 266336
    # tbq 1 MiB: 64 thresholds + 2 bits each
    assert payload("tbq", n) == 64 * 4 + 65536 == 65792
    # terngrad (2 bits, block 4096) and fp16 (block 1024)
    assert payload("terngrad", n) == 64 * 8 + 65536 == 66048
    assert payload("fp16", n) == 2 * n + 256 == 524544
    # q4, q2 (block 512): min and max per block, then 4 or 2 bits
    assert payload("q4", n) == 512 * 8 + n // 2 == 135168
    assert payload("q2", n) == 512 * 8 + n // 4 == 69632
    # ps tbq with sum codec q4, N = 16: 15 x (tbq(16384) + q4(16384))
    assert wire("tbq", 16384) == 12 + 16 + 4096 == 4124
    assert wire("q4", 16384) == 12 + 256 + 8192 == 8460
    assert volume("ps", "tbq", n, 16, "q4")[0] == 15 * (4124 + 8460) == 188760
    # ps onebit without a sum codec re-encodes the sum with onebit
    assert volume("ps", "onebit", n, 16)[0] == 15 * 2 * 2092 == 62760
    # a shard that does not divide: N = 3, 10 floats: ceil = 4
    assert volume("ps", "fp16", 10, 3)[0] == 2 * 2 * (12 + 8 + 1) == 84
    # plain ring: 2(N-1)/N of the buffer
    assert plain_wire(MiB, 16) == 1966080
    # ring sends the same shards at every step: messages and codec volumes
    w, enc, dec, msgs = volume("ring", "onebit", n, 16)
    assert msgs == 30 and enc == {"onebit": 4.0 * n} and abs(dec["onebit"] - 4.0 * n * 31 / 16) < 1e-6
    # the time: wire-bound, K = 1, no latency: exactly wire / bw
    net = Net(8.0 / 0.955, 0.0)         # 1e9 payload bytes/s
    net.rates = {k: (1e12, 1e12) for k in CPU_RATES}
    t, K, wb = hp_time(net, "allgather", "onebit", MiB, 16, K=1)
    assert abs(t - (499380 / 1e9 + 18 * MiB / 1e21)) < 1e-12, t
    print("scale_model selftest: ok (17 byte formulas, 1 time)")
    return 0


# ---------------------------------------------------------------- validate
# HIPRESS_SUM_CODEC=auto of each worker codec (hp_comp_ext_t.sum_codec)
AUTO_SUM = {"onebit": "q4", "tbq": "q4", "terngrad": "q2"}


def validate(args):
    rows = list(csv.DictReader(open(args.validate)))
    for f in args.filter or []:
        k, v = f.split("=", 1)
        rows = [r for r in rows if r.get(k) == v]
    rates = load_kernels(args.kernels) if args.kernels else CPU_RATES
    groups, plain = {}, {}
    for r in rows:
        if not r.get("time_us") or r["algo"] not in ("ring", "tree", "ps", "allgather") \
                or r["compressor"] not in GRAIN:
            continue   # auto (a plan chosen at run time) and codecs the model lacks
        side = r.get("side", "")
        sk = side[4:] if side.startswith("sum=") else ""
        if not sk and r["algo"] == "ps" and args.sum == "auto":
            sk = AUTO_SUM.get(r["compressor"], "")
        key = (int(r["bytes"]), int(r["ranks"]), r["compressor"], r["algo"], sk)
        groups.setdefault(key, []).append(float(r["time_us"]) / 1e6)
        plain.setdefault((int(r["bytes"]), int(r["ranks"])), []).append(float(r["base_time_us"]) / 1e6)
    out = ["| ranks | size | codec | algorithm | runs | measured (ms) | model (ms) | model / measured | K |",
           "|---|---|---|---|---|---|---|---|---|"]
    worst = 0.0
    for (S, N), ts in sorted(plain.items()):
        net = Net(args.rate, args.alpha, eff=args.eff, rates=rates,
                  slow=max(1.0, N * args.ranks_per_host / args.cores))
        m = statistics.median(ts)
        p = plain_time(net, S, N)
        worst = max(worst, abs(p / m - 1))
        out.append(f"| {N} | {S >> 20} MiB | plain MPI_Allreduce | - | {len(ts)} | {m * 1e3:.1f} | "
                   f"{p * 1e3:.1f} | {p / m:.2f} | - |")
        for (S2, N2, c, a, sk), ts2 in sorted(groups.items()):
            if (S2, N2) != (S, N):
                continue
            m2 = statistics.median(ts2)
            t, K, _ = hp_time(net, a, c, S, N, sk or None)
            worst = max(worst, abs(t / m2 - 1))
            out.append(f"| {N} | {S >> 20} MiB | {c + ('+' + sk if sk else '')} | {a} | {len(ts2)} | {m2 * 1e3:.1f} | {t * 1e3:.1f} | "
                       f"{t / m2:.2f} | {K} |")
    print("\n".join(out))
    print(f"\nlargest deviation: {worst * 100:.0f}% (rate {args.rate} Gbit/s, alpha {args.alpha * 1e6:.0f} us, "
          f"{args.cores} cores, codec rates / (ranks / cores))")
    if args.fit:
        best = None
        for cores in [2.0 / 2 ** (i / 4) for i in range(0, 25)]:
            for alpha in [50e-6 * 2 ** (i / 2) for i in range(0, 17)]:
                err = 0.0
                for (S, N, c, a, sk), ts in groups.items():
                    net = Net(args.rate, alpha, eff=args.eff, rates=rates,
                              slow=max(1.0, N * args.ranks_per_host / cores))
                    err = max(err, abs(math.log(hp_time(net, a, c, S, N, sk or None)[0] / statistics.median(ts))))
                if best is None or err < best[0]:
                    best = (err, cores, alpha)
        print(f"fit: {best[1]:.2f} cores, alpha {best[2] * 1e6:.0f} us: every compressed median within "
              f"a factor {math.exp(best[0]):.2f}; rerun with --cores {best[1]:.2f} --alpha {best[2]:.6f}")
    return 0


# ---------------------------------------------------------------- predict
NS = [8, 16, 32, 64, 128, 256, 512, 1024]
GBITS = [10, 25, 100, 400]
SIZES = [16 << 20, 64 << 20, 256 << 20]
CASES = [("ring", "onebit", None), ("ring", "tbq", None), ("ring", "terngrad", None), ("ring", "fp16", None),
         ("tree", "onebit", None), ("tree", "fp16", None),
         ("ps", "onebit", None), ("ps", "tbq", None), ("ps", "fp16", None),
         ("ps", "onebit", "q4"), ("ps", "tbq", "q4"), ("ps", "terngrad", "q4"),
         ("ps", "onebit", "q2"), ("ps", "tbq", "q2"), ("ps", "terngrad", "q2"),
         ("allgather", "onebit", None), ("allgather", "tbq", None), ("allgather", "terngrad", None),
         ("allgather", "fp16", None)]
ALPHA = {10: 20e-6, 25: 15e-6, 100: 8e-6, 400: 5e-6}   # ASSUMED per-message latency
GPU_LAUNCH = 10e-6   # ASSUMED: an encode and a decode launch (about 5 us each) per message


def name(a, c, s):
    """ps names its sum codec: +same (the worker's), +q4, +q2."""
    if a == "ps":
        return f"{a} {c}+{s or 'same'}"
    return f"{a} {c}" + (f"+{s}" if s else "")


def predictions(rates, launch=0.0):
    res = {}
    for g in GBITS:
        net = Net(g, ALPHA[g], eff=0.955, rates=rates, launch=launch)
        for S in SIZES:
            for N in NS:
                tp = plain_time(net, S, N)
                res[(g, S, N, "plain")] = tp
                for a, c, s in CASES:
                    res[(g, S, N, name(a, c, s))] = hp_time(net, a, c, S, N, s)[0]
    return res


def speed_table(res, S, g):
    lines = ["| case | " + " | ".join(f"N={N}" for N in NS) + " |", "|---|" + "---|" * len(NS),
             "| plain ring (ms) | " + " | ".join(f"{res[(g, S, N, 'plain')] * 1e3:.2f}" for N in NS) + " |"]
    for a, c, s in CASES:
        k = name(a, c, s)
        cells = []
        for N in NS:
            sp = res[(g, S, N, "plain")] / res[(g, S, N, k)]
            cells.append(f"*{sp:.2f}*" if sp < 1 else f"{sp:.2f}")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return lines


def breakeven(res, S, g, k):
    """The ranks N (of NS) where case k is no faster than plain ring."""
    lose = [N for N in NS if res[(g, S, N, k)] >= res[(g, S, N, "plain")]]
    if not lose:
        return "wins to 1024"
    if len(lose) == len(NS):
        return "loses from 8"
    if lose == NS[NS.index(lose[0]):]:
        return f"loses from {lose[0]}"
    return "loses at " + ",".join(str(N) for N in lose)


def predict(args):
    cpu = load_kernels(args.kernels) if args.kernels else CPU_RATES
    sets = [("GPU rates (ASSUMED)", predictions(GPU_RATES, GPU_LAUNCH)), ("CPU rates (measured, one core per rank)", predictions(cpu))]
    lines = []
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("rates,gbit,bytes,ranks,case,time_s,speedup\n")
            for label, res in sets:
                for (g, S, N, k), t in sorted(res.items()):
                    f.write(f"{label.split()[0]},{g},{S},{N},{k},{t:.6g},{res[(g, S, N, 'plain')] / t:.4g}\n")
    for label, res in sets:
        lines.append(f"\n### Where compression stops paying, {label}\n")
        lines.append("| case | " + " | ".join(f"{S >> 20} MiB, {g} Gbit/s" for S in (16 << 20, 256 << 20)
                                          for g in GBITS) + " |")
        lines.append("|---|" + "---|" * (2 * len(GBITS)))
        for a, c, s in CASES:
            k = name(a, c, s)
            lines.append(f"| {k} | " + " | ".join(breakeven(res, S, g, k) for S in (16 << 20, 256 << 20)
                                                  for g in GBITS) + " |")
    for label, res in sets:
        for g in GBITS:
            lines.append(f"\n### 64 MiB, {g} Gbit/s, {label}: speedup over plain ring (italic: below 1)\n")
            lines += speed_table(res, 64 << 20, g)
    text = "\n".join(lines) + "\n"
    if args.md:
        open(args.md, "w").write(text)
    else:
        print(text)
    if args.png:
        plot(sets, args.png, 64 << 20)
    return 0


def plot(sets, path, S):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    fig, axes = plt.subplots(len(sets), len(GBITS), figsize=(20, 10), sharey=True, sharex=True)
    shown = [("ring", "onebit", None), ("ring", "tbq", None), ("ring", "fp16", None),
             ("tree", "onebit", None), ("ps", "onebit", None), ("ps", "onebit", "q4"), ("ps", "tbq", "q4"),
             ("ps", "onebit", "q2"),
             ("allgather", "onebit", None), ("allgather", "tbq", None), ("allgather", "fp16", None)]
    style = {"ring": "-", "tree": ":", "ps": "--", "allgather": "-."}
    colors = {"onebit": "tab:blue", "tbq": "tab:orange", "fp16": "tab:green", "terngrad": "tab:red"}
    for row, (label, res) in zip(axes, sets):
        for ax, g in zip(row, GBITS):
            for a, c, s in shown:
                k = name(a, c, s)
                ys = [res[(g, S, N, "plain")] / res[(g, S, N, k)] for N in NS]
                mk = {"q4": "s", "q2": "^"}.get(s, "o")
                ax.plot(NS, ys, style[a], color=colors[c], marker=mk, ms=4, label=k)
            ax.axhline(1.0, color="k", lw=1.2)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.set_xticks(NS)
            ax.set_xticklabels([str(N) for N in NS])
            ax.set_title(f"{g} Gbit/s per rank, {label.split(' (')[0]}")
            ax.set_ylim(1 / 256, 64)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}" if y >= 1 else f"1/{1 / y:g}"))
            ax.grid(True, which="both", alpha=0.3)
        row[0].set_ylabel(f"speedup over plain ring\n{label}")
    for ax in axes[-1]:
        ax.set_xlabel("ranks N")
    h, lab = axes[0][0].get_legend_handles_labels()
    fig.legend(h, lab, loc="lower center", ncol=(len(shown) + 1) // 2, fontsize=9)
    fig.suptitle(f"One {S >> 20} MiB float32 allreduce, modelled (scripts/lab/scale_model.py): "
                 "line style = algorithm, colour = worker codec; below the black line compression loses")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=80)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--validate", metavar="RAW_CSV")
    ap.add_argument("--predict", action="store_true")
    ap.add_argument("--filter", action="append", metavar="COL=VAL")
    ap.add_argument("--rate", type=float, default=1.0, help="Gbit/s per host link (validate)")
    ap.add_argument("--alpha", type=float, default=50e-6, help="seconds per message (validate)")
    ap.add_argument("--cores", type=float, default=2, help="cores the ranks share (validate)")
    ap.add_argument("--eff", type=float, default=0.955, help="payload fraction of the link rate")
    ap.add_argument("--fit", action="store_true",
                    help="(validate) also fit cores and alpha to the compressed medians")
    ap.add_argument("--ranks-per-host", type=int, default=1)
    ap.add_argument("--sum", choices=("auto", "same"), default="auto",
                    help="validate: the sum codec of ps rows that do not name one (auto: the library's "
                         "default, q4 for onebit and tbq, q2 for terngrad; same: the worker's codec, as "
                         "runs before HIPRESS_SUM_CODEC measured)")
    ap.add_argument("--kernels", metavar="CSV", help="hipress-bench --kernels --csv output")
    ap.add_argument("--gpu", action="store_true", help="predict with the ASSUMED GPU rates")
    ap.add_argument("--md")
    ap.add_argument("--png")
    ap.add_argument("--csv")
    args = ap.parse_args()
    if args.selftest:
        return selftest()
    if args.validate:
        return validate(args)
    if args.predict:
        return predict(args)
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
