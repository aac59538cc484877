"""The picture of opskew.profile's report (CycleReport.plot; `opskew
profile` writes it as report.png): per operator, the reported time against
the corrected one with its interval, coloured by trust mark (the verdict's
plot, opskew.render.verdict); beside it W per cycle with its interval; the
conditions in the title."""

from __future__ import annotations


from opskew.render.plots import pyplot, save
from opskew.render.units import count_of, fmt_ns
from opskew.render.verdict import draw_operators
from opskew.vocab import STEP_NAME

TOP = 15  # operators drawn, by reported self time
STEP = STEP_NAME


def conditions_line(c: dict | None) -> str:
    """What the run ran on, in one line: torch, device, processor, threads,
    the profiler's options and schedule (what the report's conditions hold)."""
    if not c:
        return ""
    parts = [f"torch {c['torch']}" if c.get("torch") else "",
             str(c.get("device") or "") + (f" ({c['cpu']})" if c.get("cpu") else ""),
             count_of(c["threads"], "thread") if c.get("threads") else ""]
    opts = c.get("options")
    if isinstance(opts, dict):
        parts.append("torch.profiler(" + ("+".join(k for k, v in opts.items() if v) or "minimal") + ")")
    sch = c.get("schedule")
    if isinstance(sch, dict):
        parts.append("schedule " + ", ".join(f"{k} {v}" for k, v in sch.items() if v is not None))
    return ", ".join(p for p in parts if p)


def plot(rep: dict, history: list, path: str, *, conditions: dict | None = None) -> str:
    """`rep`'s operators and W per cycle over `history` (the run's reports,
    `rep` among them) to `path` (.png or .svg)."""
    if not path.lower().endswith((".png", ".svg")):
        raise ValueError(f"plot path must end in .png or .svg, not {path!r}")
    plt = pyplot()
    # The step ranges are the step, said in the title: one row each would crowd the operators out.
    ops = [o for o in (rep.get("operators") or {}).get("ops") or [] if not STEP.match(o["name"])][:TOP]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 1.8 + 0.38 * max(len(ops), 6)),
                                      gridspec_kw={"width_ratios": [3, 2]})
    if ops:
        dropped = draw_operators(left, ops)
        left.set_title(f"cycle {rep.get('cycle')}: the top {len(ops)} operators by reported self time"
                       + (f"; {dropped} corrected value(s) at or below 0 not drawn" if dropped else "")
                       + "\n(the ProfilerStep#N ranges: the step, in the title)", fontsize=9)
    else:
        why = rep.get("error") or rep.get("fallback") or "no per-operator table"
        left.text(0.5, 0.5, f"cycle {rep.get('cycle')}: no corrected table\n{why[:200]}", ha="center",
                  va="center", wrap=True, fontsize=8, transform=left.transAxes)
        left.set_axis_off()
    draw_w(right, history)
    cond = conditions_line(conditions)
    step = ""
    if rep.get("corrected_step_ns") is not None:
        band = rep.get("corrected_step_w_ci_ns")
        step = (f"\nstep: {fmt_ns(rep.get('active_step_ns'))} profiled, {fmt_ns(rep['corrected_step_ns'])}"
                + (f" [{fmt_ns(band[0])}, {fmt_ns(band[1])}]" if band else "")
                + f" corrected, {fmt_ns(rep.get('baseline_step_ns'))} in the wait steps (medians)")
    fig.suptitle(f"opskew.profile: reported against corrected, cycle {rep.get('cycle')}{step}"
                 + (f"\n{cond}" if cond else ""), fontsize=9)
    save(plt, fig, path)
    return path


def draw_w(ax, history: list) -> None:
    """W per cycle: each cycle's W (filled with its interval; hollow where
    its pairs were too few for one), and the run's final W as a band where
    stop() corrected the traces with it."""
    from matplotlib.ticker import MaxNLocator

    xs = [r for r in history if (r.get("w_ns") or {}).get("median") is not None]
    for r in xs:
        w = r["w_ns"]
        ci = w.get("ci95")
        if ci:
            ax.errorbar([r["cycle"]], [w["median"]], yerr=[[w["median"] - ci[0]], [ci[1] - w["median"]]], fmt="o",
                        color="#1f5fa8", ms=5, capsize=3)
        else:
            ax.plot([r["cycle"]], [w["median"]], marker="o", mfc="none", mec="#1f5fa8", ls="none", ms=6)
    final = next((r["corrected_w_ns"] for r in reversed(history) if r.get("corrected_w_ns")), None)
    if final and final.get("ci95"):
        ax.axhline(final["median"], color="#555555", lw=1, label="the run's final W")
        ax.axhspan(final["ci95"][0], final["ci95"][1], color="#555555", alpha=0.15)
        ax.legend(loc="best", fontsize=8)
    if xs:
        # Each W and the final band in view; a wider interval runs off the axis.
        vals = [r["w_ns"]["median"] for r in xs] + (list(final["ci95"]) if final and final.get("ci95") else [])
        lo, hi = min(vals + [0.0]), max(vals)
        pad = 0.5 * (hi - lo) or 1.0
        ax.set_ylim(lo - (pad if lo < 0 else 0.1 * pad), hi + pad)
    else:
        ax.text(0.5, 0.5, "W unknown in every cycle", ha="center", va="center", transform=ax.transAxes, fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("cycle")
    ax.set_ylabel("W per operator event (ns)")
    ax.set_title("W per cycle [95% CI] (hollow: too few pairs for one;\nan interval past the axis runs off it)",
                 fontsize=9)
    ax.grid(alpha=0.3)
