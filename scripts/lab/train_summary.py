"""The summary of scripts/lab/train_bench.sh's runs (OUTDIR/raw.csv):
summary.csv, summary.md and train_bench.png in OUTDIR.

    python3 scripts/lab/train_summary.py OUTDIR HOSTS RANKS_PER_HOST STEPS WARMUP

Per link rate, model and configuration: the median images per second over
the repeats (each repeat listed), its ratio to DDP's fp16 hook (the anchor;
plain Horovod where no ddp-fp16 ran) and to the compute floor (ddp-floor),
the first WARMUP steps as a count of steady steps (their time over the
median steady step), the CPU seconds a step (the mean over ranks of each
process's), and hipress' wire ratio.
"""
import csv
import statistics
import sys


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    out, hosts, rph, steps, warmup = sys.argv[1:6]
    rows = list(csv.DictReader(open(f"{out}/raw.csv")))
    order, groups = [], {}
    for r in rows:
        k = (r["rate"], r["model"], r["config"])
        if k not in groups:
            order.append(k)
        groups.setdefault(k, []).append(r)
    summary = []
    for k in order:
        g = groups[k]
        ok = [r for r in g if r["status"] == "ok" and r["images_per_s"]]
        f = lambda col: [float(r[col]) for r in ok if r.get(col)]
        raw, sent = f("raw_mib"), f("sent_mib")
        sps = med(f("s_per_step"))
        fails = sorted(set(r["status"] for r in g if r["status"] != "ok"))
        summary.append(dict(rate=k[0], model=k[1], config=k[2], runs=len(g), ok=len(ok),
                            images_per_s=med(f("images_per_s")), s_per_step=sps,
                            warmup_steady=med(f("warmup_s")) / sps if sps == sps and sps > 0 else float("nan"),
                            cpu_per_step=med(f("cpu_per_step")),
                            wire_ratio=med(raw) / med(sent) if raw and sent and med(sent) > 0 else float("nan"),
                            all=" / ".join("%.1f" % x for x in f("images_per_s")),
                            why="; ".join(fails)))
    for s in summary:
        def ref(name):
            b = [t for t in summary if (t["rate"], t["model"], t["config"]) == (s["rate"], s["model"], name)]
            return b[0]["images_per_s"] if b and b[0]["images_per_s"] > 0 else float("nan")
        anchor = ref("ddp-fp16")
        s["anchor"] = "ddp-fp16"
        if anchor != anchor:
            anchor, s["anchor"] = ref("plain"), "plain"
        s["vs_anchor"] = s["images_per_s"] / anchor
        s["of_floor"] = s["images_per_s"] / ref("ddp-floor")
    cols = ["rate", "model", "config", "runs", "ok", "images_per_s", "s_per_step", "vs_anchor", "anchor", "of_floor",
            "warmup_steady", "cpu_per_step", "wire_ratio", "all", "why"]
    with open(f"{out}/summary.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, cols)
        w.writeheader()
        for s in summary:
            w.writerow({c: ("%.4g" % s[c] if isinstance(s[c], float) else s[c]) for c in cols})
    nrep = max(s["runs"] for s in summary)
    fmt = lambda x, p="%.2f": "" if x != x else p % x
    with open(f"{out}/summary.md", "w") as fh:
        fh.write(f"{hosts} hosts x {rph} ranks, one link each; {steps} timed steps after {warmup} timed apart; "
                 f"median of {nrep} repeats\n\n")
        fh.write("| rate | model | configuration | images/s | vs DDP fp16 hook | of the floor | first %s steps, in "
                 "steady steps | CPU s/step | wire ratio | repeats (images/s) |\n" % warmup)
        fh.write("|---|---|---|---|---|---|---|---|---|---|\n")
        for s in summary:
            bad = "" if s["ok"] == s["runs"] else " (%d of %d failed: %s)" % (s["runs"] - s["ok"], s["runs"], s["why"])
            fh.write("| %s | %s | %s | %s | %s%s | %s | %s | %s | %s | %s%s |\n" % (
                s["rate"], s["model"], s["config"], fmt(s["images_per_s"], "%.1f"), fmt(s["vs_anchor"]),
                "" if s["anchor"] == "ddp-fp16" else " (vs plain)", fmt(s["of_floor"]), fmt(s["warmup_steady"], "%.1f"),
                fmt(s["cpu_per_step"], "%.3f"), fmt(s["wire_ratio"], "%.1f"), s["all"], bad))
    print(open(f"{out}/summary.md").read())

    import matplotlib
    matplotlib.use("Agg")

    def short(config):
        """a plot label: settings without their prefix, byte counts in MiB"""
        name, _, sets = config.partition(":")
        out = []
        for kv in filter(None, sets.split(",")):
            k, _, v = kv.partition("=")
            k = k.replace("HIPRESS_", "").replace("HOROVOD_", "").lower()
            out.append("%s=%s" % (k, "%gM" % (int(v) / 1048576) if v.isdigit() and int(v) >= 1048576 else v))
        return name + ("\n" + ",".join(out) if out else "")
    import matplotlib.pyplot as plt
    panels = list(dict.fromkeys((s["rate"], s["model"]) for s in summary))
    nmax = max(len([s for s in summary if (s["rate"], s["model"]) == p]) for p in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 0.45 * nmax + 1.6), squeeze=False)
    for ax, (rate, model) in zip(axes[0], panels):
        ss = [s for s in summary if (s["rate"], s["model"]) == (rate, model)]
        ys = range(len(ss))
        colors = ["0.7" if s["config"] == "ddp-floor" else "tab:blue" if "hipress" in s["config"] else "tab:gray"
                  for s in ss]
        ax.barh(list(ys), [0 if s["images_per_s"] != s["images_per_s"] else s["images_per_s"] for s in ss],
                color=colors)
        for y, s in zip(ys, ss):
            xs = [float(r["images_per_s"]) for r in groups[(rate, model, s["config"])]
                  if r["status"] == "ok" and r["images_per_s"]]
            ax.plot(xs, [y] * len(xs), "k.", ms=4)
            label = " failed" if s["ok"] == 0 else (" %.2fx" % s["vs_anchor"] if s["vs_anchor"] == s["vs_anchor"] else "")
            # (right of the bar and of every repeat's dot)
            ax.text(0 if s["ok"] == 0 else max([s["images_per_s"]] + xs), y, label, va="center", fontsize=8)
        ax.set_yticks(list(ys))
        ax.set_yticklabels([short(s["config"]) for s in ss], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("images/s (median; dots: repeats;\nratio to DDP's fp16 hook)", fontsize=8)
        ax.set_title(f"{model}, {hosts} hosts x {rph} ranks, {rate} links", fontsize=9)
        top = [s["images_per_s"] for s in ss if s["images_per_s"] == s["images_per_s"]]
        ax.set_xlim(0, 1.2 * max(top) if top else 1)
    fig.tight_layout()
    fig.savefig(f"{out}/train_bench.png", dpi=110)
    print(f"train_bench: wrote {out}/raw.csv, summary.csv, summary.md, train_bench.png")


if __name__ == "__main__":
    main()
