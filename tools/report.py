#!/usr/bin/env python3
"""smax benchmark report: reads smax_bench's Google Benchmark JSON and writes

  report.md     markdown: machine, targets, summary table, full table
  plot_<type>_<isa>.png    throughput vs size, one line per algorithm/peer
                           (the two-pass paper's figure layout), per ISA
  overview.png  all ISAs side by side (the figure in docs/performance.md)

Every figure is the median over --benchmark_repetitions; ratios:
  vs roofline   kernel time / "read twice, write once" time at the same size,
                paired: measured inside the same benchmark run, right after
                the kernel, on the same buffers (batched rows: vs copy)
  vs best peer  kernel elements/s / the best peer's elements/s at that size
                (medians of randomly interleaved runs)

Batched and multi-threaded entries ("<kernel>/<type>/<isa>/<rows>/<cols>/
threads:<t>/real_time", wall clock) get their own table: their roofline is
the one of the same thread count (split into t concurrent parts), their best
peer the one of the same shape and thread count, and "x 1 thread" compares
them with the same kernel's 1-thread entry.

Usage: report.py RESULTS.json OUTDIR [--plots/--no-plots]
Only the standard library and matplotlib (no numpy).
"""
import json
import os
import statistics
import sys
from collections import defaultdict

SOFTMAX_ORDER = ["three_pass_recompute", "three_pass_reload", "two_pass", "online", "automatic"]


def parse_name(run_name):
    """'softmax/two_pass/f32/avx512/4096' -> (kernel, type, isa, args), or
    'softmax_batched/automatic/f32/avx512/2048/32768/threads:2/real_time'
    -> (kernel, type, isa, args, threads): a thread count makes a 5-tuple."""
    parts = run_name.split("/")
    threads = None
    while parts and (parts[-1] in ("real_time", "manual_time") or parts[-1].startswith("threads:")):
        last = parts.pop()
        if last.startswith("threads:") and last[len("threads:"):].isdigit():
            threads = int(last[len("threads:"):])
    args = []
    while parts and parts[-1].isdigit():
        args.insert(0, int(parts.pop()))
    if len(parts) < 3:
        return None
    key = ("/".join(parts[:-2]), parts[-2], parts[-1], tuple(args))
    return key if threads is None else key + (threads,)


def dim_label(n):
    """Exact below 1M, else in M: 2048, 32768, 1M, 64M."""
    return "%dM" % (n >> 20) if n >= (1 << 20) and n % (1 << 20) == 0 else str(n)


def size_label(args):
    if len(args) == 2:
        return "%sx%s" % (dim_label(args[0]), dim_label(args[1]))
    n = args[0]
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return "%d%s" % (n // scale, unit)
    return str(n)


def load(path):
    with open(path) as f:
        data = json.load(f)
    rows = defaultdict(lambda: {"items": [], "bytes": [], "roof": [], "roof_items": [], "label": "", "error": None})
    for b in data.get("benchmarks", []):
        parsed = parse_name(b.get("run_name", b["name"]))
        if parsed is None:
            continue
        r = rows[parsed]
        if b.get("error_occurred"):
            r["error"] = b.get("error_message", "error")
            continue
        if b.get("run_type") != "iteration":
            continue  # aggregates are recomputed here from the repetitions
        r["items"].append(b.get("items_per_second", 0.0))
        r["bytes"].append(b.get("bytes_per_second", 0.0))
        if "vs_roofline" in b:
            r["roof"].append(b["vs_roofline"])
        if "roofline_items_per_second" in b:
            r["roof_items"].append(b["roofline_items_per_second"])
        r["label"] = b.get("label", "")
    out, threaded = {}, {}
    for key, r in rows.items():
        med = lambda v: statistics.median(v) if v else None
        (out if len(key) == 4 else threaded)[key] = {
            "items": med(r["items"]),
            "bytes": med(r["bytes"]),
            "roof": med(r["roof"]),
            "roof_items": med(r["roof_items"]),
            "label": r["label"],
            "reps": len(r["items"]),
            "error": r["error"],
        }
    return data.get("context", {}), out, threaded


def best_peer(results, typ, args, threads=None):
    """(peer name, elements/s) of the fastest peer at that size; with
    `threads`, among the threaded results of that shape and thread count."""
    best = None
    for key, r in results.items():
        kernel, t, isa, a = key[:4]
        th = key[4] if len(key) == 5 else None
        if r["label"] == "peer" and t == typ and a == args and th == threads and r["items"]:
            if best is None or r["items"] > best[1]:
                best = (kernel.split("/")[0], r["items"])
    return best


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def kernel_order(kernel):
    fam, _, variant = kernel.partition("/")
    rank = SOFTMAX_ORDER.index(variant) if variant in SOFTMAX_ORDER else len(SOFTMAX_ORDER)
    return (fam, rank, variant)


def isa_order(isa):
    order = ["avx512", "avx2", "sse2", "neon", "native"]
    return order.index(isa) if isa in order else len(order)


def write_markdown(ctx, results, outdir, threaded=None):
    threaded = threaded or {}
    lines = []
    lines.append("# smax benchmark report\n")
    caches = ", ".join("L%d%s %d KiB" % (c["level"], c["type"][0].lower() if c["type"] != "Unified" else "",
                                         c["size"] // 1024) for c in ctx.get("caches", []))
    if not caches:
        caches = ctx.get("cache_sizes", "?")
    lines.append("Machine: %s, %s CPUs at %s MHz; caches: %s; load average at start: %s.  " % (
        ctx.get("cpu_model", "?"), ctx.get("num_cpus", "?"), ctx.get("mhz_per_cpu", "?"), caches,
        ", ".join("%.2f" % v for v in ctx.get("load_avg", []))))
    lines.append("smax ISAs compiled in: %s; on this CPU: %s; peers: %s; roofline ISA: %s; "
                 "non-temporal stores from %s bytes of output; buffers rotate from %s bytes per call.  " % (
                     ctx.get("smax_isas_compiled", "?"), ctx.get("smax_isas_cpu", "?"),
                     ctx.get("smax_peers", "") or "none", ctx.get("roofline_isa", "?"),
                     ctx.get("smax_stream_min_bytes", "?"), ctx.get("bench_rotate_min_bytes", "?")))
    lines.append("Date: %s. Single thread, float unless noted; medians of the repetitions.\n" % ctx.get("date", "?"))

    lines.append("Columns: elements/ns; GB/s of the kernel's own minimal traffic (recompute 3R+1W, reload "
                 "3R+2W, two-pass/online 2R+1W, peers 3R+2W, batched rows 1R+1W); x roofline = roofline time / "
                 "kernel time at the same size, measured paired in the same run (1.00 = as fast as a kernel that "
                 "only reads twice and writes once; batched: vs a copy); x best peer = elements/s over the best "
                 "of XNNPACK/oneDNN/libtorch.\n")

    # Targets.
    lines.append("## Targets\n")
    lines.extend(targets(results))
    lines.extend(threaded_targets(threaded, ctx))

    # Summary: the key sizes, f32.
    key_sizes = [(4096,), (65536,), (1 << 20,), (1 << 24,), (1 << 26,)]
    present = [a for a in key_sizes if any(k[1] == "f32" and k[3] == a for k in results)]
    if present:
        lines.append("\n## Summary (f32): elements/ns (x roofline, x best peer)\n")
        head = "| kernel | ISA | " + " | ".join(size_label(a) for a in present) + " |"
        lines.append(head)
        lines.append("|" + "---|" * (2 + len(present)))
        keys = sorted({(k[0], k[2]) for k in results if k[1] == "f32" and k[3] in present},
                      key=lambda ki: (label_rank(results, ki), kernel_order(ki[0]), isa_order(ki[1])))
        for kernel, isa in keys:
            cells = []
            for a in present:
                r = results.get((kernel, "f32", isa, a))
                if r is None:
                    cells.append("")
                elif r["error"] or r["items"] is None:
                    cells.append("skipped")
                else:
                    peer = best_peer(results, "f32", a)
                    vs_peer = r["items"] / peer[1] if peer and r["label"] != "peer" else None
                    cell = "%.2f (%s" % (r["items"] / 1e9, fmt(r["roof"], ".2f"))
                    cell += ", %s)" % fmt(vs_peer, ".2f") if vs_peer is not None else ")"
                    cells.append(cell)
            lines.append("| %s | %s | %s |" % (kernel, isa, " | ".join(cells)))

    if threaded:
        lines.extend(threaded_table(threaded))

    # Full table.
    lines.append("\n## All results\n")
    lines.append("| kernel | type | ISA | size | elements/ns | GB/s | x roofline | x best peer | reps |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for key in sorted(results, key=lambda k: (label_rank(results, (k[0], k[2])), k[1], kernel_order(k[0]),
                                              isa_order(k[2]), k[3])):
        kernel, typ, isa, args = key
        r = results[key]
        if r["error"]:
            lines.append("| %s | %s | %s | %s | skipped: %s | | | | |" % (kernel, typ, isa, size_label(args), r["error"]))
            continue
        peer = best_peer(results, typ, args)
        vs_peer = r["items"] / peer[1] if peer and r["label"] != "peer" and r["items"] else None
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %d |" % (
            kernel, typ, isa, size_label(args), fmt(r["items"] and r["items"] / 1e9, ".3f"),
            fmt(r["bytes"] and r["bytes"] / 1e9, ".1f"), fmt(r["roof"], ".2f"), fmt(vs_peer, ".2f"), r["reps"]))

    path = os.path.join(outdir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def label_rank(results, kernel_isa):
    for (k, t, i, a), r in results.items():
        if (k, i) == kernel_isa:
            return {"smax": 0, "peer": 1, "roofline": 2}.get(r["label"], 3)
    return 3


def targets(results):
    """The issue's targets, evaluated on this run."""
    out = []

    def get(kernel, isa, args, typ="f32"):
        r = results.get((kernel, typ, isa, args))
        return r if r and r["items"] and not r["error"] else None

    isas = sorted({k[2] for k in results if k[0].startswith("softmax/") and k[1] == "f32"}, key=isa_order)
    best = isas[0] if isas else None
    big = (1 << 26,)
    a = get("softmax/automatic", best, big)
    if a:
        peer = best_peer(results, "f32", big)
        out.append("- 64M floats, %s: automatic = %s x roofline (target >= 0.90), %s x best peer%s (target >= 1.3)" % (
            best, fmt(a["roof"], ".2f"), fmt(peer and a["items"] / peer[1], ".2f"),
            " (%s)" % peer[0] if peer else ""))
    for isa in ("avx512", "avx2"):
        for n in ((1 << 24,), (1 << 26,)):
            t2, rl = get("softmax/two_pass", isa, n), get("softmax/three_pass_reload", isa, n)
            if t2 and rl:
                out.append("- %s floats, %s: two_pass / three_pass_reload = %.2f (target >= 1.25)" % (
                    size_label(n), isa, t2["items"] / rl["items"]))
    for n in ((4096,), (65536,)):
        a = get("softmax/automatic", best, n)
        peer = best_peer(results, "f32", n)
        if a and peer:
            out.append("- %s floats, %s: automatic / best peer (%s) = %.2f (target >= 1.5)" % (
                size_label(n), best, peer[0], a["items"] / peer[1]))
    if not out:
        out.append("- (the sizes the targets need were not run)")
    return out


SHAPE_ORDER = [(2048, 32768), (16384, 1024), (64, 1 << 20), (1, 1 << 26)]


def shape_order(args):
    return SHAPE_ORDER.index(args) if args in SHAPE_ORDER else len(SHAPE_ORDER)


def one_thread_rate(threaded, key):
    """Elements/s of the same kernel, type, ISA and shape on 1 thread."""
    r = threaded.get(key[:4] + (1,))
    return r["items"] if r and r["items"] and not r["error"] else None


def threaded_table(threaded):
    """The batched / multi-threaded entries, wall-clock timed."""
    lines = ["\n## Batched rows and threads (f32, wall clock)\n"]
    lines.append("One call per matrix of rows x cols (all 64M floats = 256 MiB), through each library's batched "
                 "API: smax::dynamic::softmax(matrix_view, matrix_view, algorithm, executor) with no executor "
                 "(1 thread) or a smax::thread_pool; XNNPACK with a pthreadpool; oneDNN with OpenMP threads. "
                 "Timed on the wall clock, every thread count. x roofline: vs the roofline of the same thread "
                 "count, its work split into equal parts run concurrently (copy for batches of rows, whose rows stay "
                 "in cache between passes; rw2 for one long row); x best peer: vs the fastest peer at the same shape "
                 "and thread count; x 1 thread: vs the same kernel on 1 thread; roofline el/ns: the paired "
                 "roofline's own rate.\n")
    lines.append("| kernel | ISA | shape | threads | elements/ns | GB/s | x roofline | x best peer | x 1 thread | "
                 "roofline el/ns | reps |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    rank = {"smax": 0, "peer": 1, "roofline": 2}
    for key in sorted(threaded, key=lambda k: (rank.get(threaded[k]["label"], 3), kernel_order(k[0]),
                                                isa_order(k[2]), k[1], shape_order(k[3]), k[4])):
        kernel, typ, isa, args, th = key
        r = threaded[key]
        if r["error"] or not r["items"]:
            lines.append("| %s | %s | %s | %d | skipped: %s | | | | | | |" % (
                kernel, isa, size_label(args), th, r["error"] or "no result"))
            continue
        peer = best_peer(threaded, typ, args, th) if r["label"] == "smax" else None
        one = one_thread_rate(threaded, key) if th != 1 else None
        lines.append("| %s | %s | %s | %d | %.3f | %s | %s | %s | %s | %s | %d |" % (
            kernel + ("" if typ == "f32" else " (%s)" % typ), isa, size_label(args), th, r["items"] / 1e9,
            fmt(r["bytes"] and r["bytes"] / 1e9, ".1f"), fmt(r["roof"], ".2f"),
            fmt(peer and r["items"] / peer[1], ".2f"), fmt(one and r["items"] / one, ".2f"),
            fmt(r["roof_items"] and r["roof_items"] / 1e9, ".2f"), r["reps"]))
    return lines


def threaded_targets(threaded, ctx=None):
    """The batched / multi-threaded targets (issue 7), evaluated on this run."""
    if not threaded:
        return []
    out = []

    def get(args, th, isa, kernel="softmax_batched/automatic"):
        r = threaded.get((kernel, "f32", isa, args, th))
        return r if r and r["items"] and not r["error"] else None

    # The best ISA this CPU runs (main.cpp records it), else the best present.
    cpu = [i for i in (ctx or {}).get("smax_isas_cpu", "").split(",") if i]
    present = sorted({k[2] for k in threaded if k[0] == "softmax_batched/automatic"}, key=isa_order)
    best = next((i for i in cpu if i in present), present[0] if present else None)
    if best is None:
        return ["- (no softmax_batched/automatic entry was run)"]

    def peer_part(r, args, th):
        peer = best_peer(threaded, "f32", args, th)
        if not peer:
            return "no peer run", None
        v = r["items"] / peer[1]
        return "%.2f x best peer (%s, %d thread%s)" % (v, peer[0], th, "" if th == 1 else "s"), v

    def verdict(ok):
        return "" if ok is None else (" -- met" if ok else " -- NOT met")

    big = (2048, 32768)
    for isa in [best] + [i for i in present if i != best]:
        r = get(big, 1, isa)
        if not r:
            continue
        text, vp = peer_part(r, big, 1)
        ok = None if r["roof"] is None or vp is None else (r["roof"] >= 0.9 and vp >= 1.3)
        out.append("- 2048 x 32768, 1 thread, %s: automatic = %s x the 1-thread copy roofline (target >= 0.90), "
                   "%s (target >= 1.3)%s" % (isa, fmt(r["roof"], ".2f"), text, verdict(ok)))

    row = (1, 1 << 26)
    r2, r1 = get(row, 2, best), get(row, 1, best)
    if r2:
        speedup = r2["items"] / r1["items"] if r1 else None
        allowed = (r2["roof_items"] / r1["roof_items"]) if r1 and r1["roof_items"] and r2["roof_items"] else None
        ok = None if r2["roof"] is None or speedup is None else (r2["roof"] >= 0.85 and speedup >= 1.5)
        out.append("- 64M-float single row, 2 threads, %s: automatic = %s x the 2-thread rw2 roofline (target >= "
                   "0.85), %s x its own 1-thread rate (target >= 1.5)%s; the 2-thread rw2 roofline moved %s x the "
                   "1-thread one's bandwidth (the most a second thread could give here); on 1 thread: %s x the "
                   "1-thread rw2 roofline" % (
                       best, fmt(r2["roof"], ".2f"), fmt(speedup, ".2f"), verdict(ok), fmt(allowed, ".2f"),
                       fmt(r1 and r1["roof"], ".2f")))

    for args in ((2048, 32768), (16384, 1024), (64, 1 << 20)):
        for th in (1, 2):
            if args == big and th == 1:
                continue  # the target line above
            r = get(args, th, best)
            if not r:
                continue
            text, _ = peer_part(r, args, th)
            r1x = get(args, 1, best) if th != 1 else None
            one = r["items"] / r1x["items"] if r1x else None
            out.append("- %s, %d thread%s, %s: automatic = %s x the %d-thread copy roofline, %s%s" % (
                size_label(args).replace("x", " x "), th, "" if th == 1 else "s", best, fmt(r["roof"], ".2f"), th,
                text, "" if one is None else ", %.2f x its 1-thread rate" % one))
    return out


def plot(results, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report.py: matplotlib not found (apt-get install python3-matplotlib); no plots", file=sys.stderr)
        return []
    files = []
    groups = defaultdict(dict)  # (type, isa) -> kernel -> [(n, items)]
    peers = defaultdict(dict)   # type -> kernel -> points
    roof = defaultdict(dict)
    for (kernel, typ, isa, args), r in results.items():
        if len(args) != 1 or not r["items"] or r["error"]:
            continue
        point = (args[0], r["items"] / 1e9)
        if r["label"] == "peer":
            peers[typ].setdefault(kernel.split("/")[0], []).append(point)
        elif r["label"] == "roofline":
            if kernel in ("roofline/rw2", "roofline/copy"):
                roof[typ].setdefault(kernel.split("/")[1], []).append(point)
        elif kernel.startswith("softmax/") or kernel == "log_softmax":
            groups[(typ, isa)].setdefault(kernel.replace("softmax/", ""), []).append(point)

    styles = {"three_pass_recompute": ("tab:blue", "o"), "three_pass_reload": ("tab:orange", "s"),
              "two_pass": ("tab:green", "^"), "online": ("tab:purple", "v"), "automatic": ("black", "D"),
              "log_softmax": ("tab:gray", "x"), "xnnpack": ("tab:red", "P"), "onednn": ("tab:brown", "X"),
              "libtorch": ("tab:pink", "*"), "rw2": ("tab:cyan", ""), "copy": ("tab:olive", "")}

    def draw(ax, typ, isa, legend):
        series = dict(groups.get((typ, isa), {}))
        for name, pts in sorted(series.items(), key=lambda kv: kernel_order("softmax/" + kv[0])):
            pts.sort()
            c, m = styles.get(name, ("gray", "."))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=c, marker=m, markersize=3, linewidth=1.2,
                    label=name)
        for name, pts in sorted(peers.get(typ, {}).items()):
            pts.sort()
            c, m = styles.get(name, ("gray", "."))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=c, marker=m, markersize=3, linewidth=1,
                    linestyle="--", label=name)
        if typ == "f32":
            for name, pts in sorted(roof.get(typ, {}).items()):
                if name != "rw2":
                    continue
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=styles[name][0], linewidth=2, alpha=0.5,
                        linestyle=":", label="roofline (read 2x, write 1x)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("elements (%s)" % typ)
        ax.set_ylabel("elements / ns")
        ax.set_title("softmax, %s, %s" % (typ, isa))
        ax.grid(True, which="both", alpha=0.3)
        if legend:
            ax.legend(fontsize=7, loc="lower left")

    for (typ, isa) in sorted(groups, key=lambda k: (k[0], isa_order(k[1]))):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        draw(ax, typ, isa, True)
        fig.tight_layout()
        path = os.path.join(outdir, "plot_%s_%s.png" % (typ, isa))
        fig.savefig(path, dpi=90)
        plt.close(fig)
        files.append(path)

    isas = sorted({isa for (typ, isa) in groups if typ == "f32"}, key=isa_order)
    if isas:
        fig, axes = plt.subplots(1, len(isas), figsize=(4.6 * len(isas), 3.8), sharey=True, squeeze=False)
        for i, isa in enumerate(isas):
            draw(axes[0][i], "f32", isa, i == 0)
        fig.tight_layout()
        path = os.path.join(outdir, "overview.png")
        fig.savefig(path, dpi=80)
        plt.close(fig)
        files.append(path)
    return files


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    ctx, results, threaded = load(args[0])
    os.makedirs(args[1], exist_ok=True)
    md = write_markdown(ctx, results, args[1], threaded)
    print("report.py: wrote %s" % md)
    if "--no-plots" not in argv:
        for p in plot(results, args[1]):
            print("report.py: wrote %s" % p)
    print("\n".join(targets(results) + threaded_targets(threaded, ctx)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
