"""The text and plots of `opskew sweep`."""

from __future__ import annotations

import sys
import zlib

from opskew.output import write_file
from opskew.render import answers
from opskew.render.plots import figure_bytes, plot_unavailable
from opskew.vocab import NO_MATPLOTLIB, SWEEP_ANNOTATION as ANNOTATION
from opskew.render.units import columns, count_of, fmt_time


BUILTIN_OPS = ("add", "mul", "matmul")


# One colour per instrument, the same in every plot of every run.
INSTRUMENT_COLORS = {"torch": "#1f77b4", "torch:record_shapes,with_stack": "#d62728",
                     "opskew": "#2ca02c", "opskew-native": "#9467bd"}
_OTHER_COLORS = ("#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def instrument_color(spec: str) -> str:
    """The fixed colour of an instrument spec: the known ones by name, any
    other (torch:OPT...) by a stable hash of its spec, never by its position."""
    return INSTRUMENT_COLORS.get(spec) or _OTHER_COLORS[zlib.crc32(spec.encode()) % len(_OTHER_COLORS)]


def dropped_note(curve, labels: dict) -> str | None:
    d = curve.get("dropped_from_plot") or {}
    if not d:
        return None
    return ("not drawn on the log axis (added cost <= 0, not resolved): "
            + "; ".join(f"{labels.get(k, k)} at size(s) {', '.join(str(x) for x in v)}" for k, v in d.items()))


def plot(result, prefix) -> list:
    if plot_unavailable():
        raise ImportError(f"the sweep's plot {NO_MATPLOTLIB}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = result["curves"]
    fig, axes = plt.subplots(2, len(curves), figsize=(8 * len(curves), 11), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]})
    c = result["conditions"]
    for k, curve in enumerate(curves):
        ax, sk = axes[0][k], axes[1][k]
        pts = curve["points"]
        if not pts:
            continue
        xs = [p["size"] for p in pts]
        ax.plot(xs, [p["true_per_call_s"] * 1e6 for p in pts], "k-o", lw=2, ms=4,
                label="true time per call, no instrument (Python + dispatch + op)")
        floor = min([p["true_per_call_s"] for p in pts] + [d["added_per_call_s"] for p in pts
                    for d in p["by"].values() if d["added_per_call_s"] > 0]) * 1e6 / 10
        for iname in pts[0]["by"]:
            col = instrument_color(iname)
            label = result["instruments"][iname]
            rep = [(x, p["by"][iname]["reported_per_call_s"]) for x, p in zip(xs, pts)
                   if p["by"][iname]["reported_per_call_s"]]
            if rep:
                ax.plot([r[0] for r in rep], [r[1] * 1e6 for r in rep], "--", color=col,
                        label=f"{label}: operator time in its trace")
            add = [(x, p["by"][iname]) for x, p in zip(xs, pts) if p["by"][iname]["added_per_call_s"] > 0]
            if add:
                ax.plot([a[0] for a in add], [a[1]["added_per_call_s"] * 1e6 for a in add], "-", color=col,
                        lw=1.5, marker=".", label=f"{label}: cost it adds per call")
                noisy = [a for a in add if a[1].get("noisy")]
                if noisy:
                    ax.plot([a[0] for a in noisy], [a[1]["added_per_call_s"] * 1e6 for a in noisy], "o",
                            mfc="none", color=col, ms=8, label=f"{label}: noisy point (CI includes 0, or under 95%)")
            # The CI band of the added cost; an end at or below 0 is drawn at the axis floor.
            band = [(x, p["by"][iname]["added_per_call_ci95_s"]) for x, p in zip(xs, pts)]
            ax.fill_between([b[0] for b in band], [max(b[1][0] * 1e6, floor) for b in band],
                            [max(b[1][1] * 1e6, floor) for b in band], color=col, alpha=0.15, lw=0,
                            label=f"{label}: CI of the added cost")
            x = curve["crossover"][iname]["vs_op_duration"]
            if x:
                ax.axvline(x, color=col, ls="-.", lw=1.2, label=f"{label}: crossover at {x:.3g} elements")
            leaf = [(x, p["by"][iname].get("reported_over_op")) for x, p in zip(xs, pts)]
            leaf = [q for q in leaf if q[1]]
            if leaf:
                sk.plot([q[0] for q in leaf], [q[1] for q in leaf], "-", color=col, marker=".",
                        label=f"{label}: leaf skew (operator's trace time / its true time)")
            enc = [(x, p["by"][iname].get("enclosing")) for x, p in zip(xs, pts)]
            enc = [q for q in enc if q[1]]
            if enc:
                sk.plot([q[0] for q in enc], [q[1]["skew"] for q in enc], ":", color=col, marker="s", ms=3,
                        label=f"{label}: enclosing skew (annotation's trace time / the calls' true time)")
        ax.set_ylim(bottom=floor)
        note = dropped_note(curve, result["instruments"])
        if note:
            ax.text(0.01, 0.01, note, transform=ax.transAxes, fontsize=7, va="bottom", wrap=True)
        for a in (ax, sk):
            a.set_xscale("log")
            a.grid(True, which="both", alpha=0.3)
            a.set_xlabel("operator size: elements per input tensor"
                         + (" (n x n matrices)" if curve["op"] == "matmul" else ""))
        ax.set_yscale("log")
        sk.set_yscale("log")
        sk.axhline(1.0, color="k", lw=0.8)
        ax.set_ylabel("time per call (microseconds)")
        sk.set_ylabel("skew: trace time / true time (1 = exact)")
        ax.set_title(f"torch.{curve['op']}: instrument cost vs operator time"
                     if curve["op"] in BUILTIN_OPS else curve["op"])
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1, frameon=False)
        sk.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1, frameon=False)
    fig.suptitle(f"opskew sweep: torch {c['torch']}, {c['device']} ({c.get('gpu') or c['cpu']}), "
                 f"{count_of(c['threads'], 'thread')}; medians of {c['trials']} rounds per size. Left of a "
                 "crossover the instrument costs more than the operator.", fontsize=9)
    fig.tight_layout()
    paths = []
    for ext in ("png", "svg"):
        path = f"{prefix}.{ext}"
        write_file(path, figure_bytes(fig, ext, dpi=110, bbox_inches="tight"))
        paths.append(path)
    plt.close(fig)
    return paths


def _skew(x, ci=None) -> str:
    if not x:
        return "n/a"
    return f"x{x:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def print_human(result, out=None):
    out = out or sys.stdout  # looked up per call: a redirected or captured stdout is honoured
    out.write(answers.lead(answers.sweep(result)))
    c = result["conditions"]
    cov = next((d["added_per_event_ns"].get("ci_coverage") for cv in result["curves"] for p in cv["points"]
                for d in p["by"].values()), None)
    cov_txt = f"{100 * cov:.1f}% CI" if cov else "CI"
    op_source = "opskew's trace" if "opskew" in result["instruments"] else "the profiler's trace"
    out.write(f"opskew sweep: torch {c['torch']}, {c['device']} ({c.get('gpu') or c['cpu']}), "
              f"{count_of(c['threads'], 'thread')}; medians of {c['trials']} rounds per size\n"
              "  true: the call without instrument (Python and dispatch included); op: the operator's\n"
              f"  own duration (from {op_source}); "
              f"added: W x events per call [{cov_txt} of W, sign test];\n"
              "  reported: the op time in the instrument's trace; leaf skew: reported / op;\n"
              "  enclosing skew: the time the trace shows for the annotation around the calls\n"
              f"  ({ANNOTATION}) / the true time of the same calls; skews are medians of the\n"
              "  rounds' ratios [sign-test CI]\n")
    for curve in result["curves"]:
        for n, label in result["instruments"].items():
            out.write(f"\n{curve['op']} under {label}\n")
            rows = []
            for p in curve["points"]:
                d = p["by"][n]
                ci = d["added_per_event_ns"]["ci95"]
                rows.append([str(p["size"]), fmt_time(p["true_per_call_s"]), fmt_time(p["op_duration_s"]),
                             fmt_time(d["added_per_call_s"]),
                             "[%s, %s]" % (fmt_time(ci[0] * 1e-9), fmt_time(ci[1] * 1e-9)),
                             fmt_time(d["reported_per_call_s"]),
                             _skew(d.get("reported_over_op"), d.get("reported_over_op_ci95")),
                             _skew((d.get("enclosing") or {}).get("skew"), (d.get("enclosing") or {}).get("skew_ci95")),
                             "noisy" if d.get("noisy") else ""])
            for line in columns(["size", "true/call", "op", "added/call", "W CI per event", "reported",
                                 "leaf skew", "enclosing skew", "note"], rows, right={0}):
                out.write(line + "\n")
            noisy = sorted({d["noisy"] for p in curve["points"] for d in [p["by"][n]] if d.get("noisy")})
            for why in noisy:
                out.write(f"  noisy: {why}; its W, added cost and skews are not to be read\n")
            x = curve["crossover"][n]
            a, b = x["vs_op_duration"], x["vs_whole_call"]
            if a:
                out.write(f"  crossover: {a:.3g} elements; below it {label} adds more per call "
                          "than the operator's own duration\n")
            else:
                first = curve["points"][0] if curve["points"] else None
                above = first and first["op_duration_s"] and first["by"][n]["added_per_call_s"] >= first["op_duration_s"]
                out.write("  crossover: none in the measured range; the added cost per call stays "
                          + ("above" if above else "below") + " the operator's own duration\n")
            if b:
                out.write(f"  vs the whole call (Python and dispatch included): crossover at {b:.3g} elements\n")
            if result.get("plots") and (curve.get("dropped_from_plot") or {}).get(n):
                out.write(f"  plot: sizes {', '.join(str(s) for s in curve['dropped_from_plot'][n])} not drawn "
                          "(added cost <= 0 on a log axis)\n")
    if result.get("plots"):
        out.write(f"\nplot: {', '.join(result['plots'])}\n")
    elif result.get("plot_skipped"):
        out.write(f"\n{result['plot_skipped']}\n")
    if result.get("error"):
        out.write(f"\nerror: {result['error']}\n")
