"""The per-operator verdict (opskew.analyze.verdict's) for people: the
skew verdict in words, where the skew lands in a sentence, the verdict's
table and its plot."""

from __future__ import annotations

from opskew.render.plots import pyplot, save
from opskew.render.tables import Col, op_table
from opskew.render.units import count_of
from opskew.stats.pricing import ADVICE


def skew_words(v: dict, enough: bool = True) -> str:
    """A skew verdict ({"skewed", "significant"}) in words, the same in
    every output: a sign test that finds nothing is "no significant skew
    detected", never "not skewed" (with few pairs it can hardly find
    anything); `enough` False: too few pairs for a 95% interval."""
    if v["skewed"]:
        return "SKEWED"
    if not enough:
        return "not made"
    return "significant but below threshold" if v["significant"] else "no significant skew detected"


def sentence(summary: dict) -> str:
    """The summary in plain words."""
    added = summary["added_ns"]
    if added <= 0:
        return "the instrument added nothing measurable (W is 0 within this run's precision)"
    leaves = summary["in_leaves_ns"] / added
    parents = summary["in_parents_ns"] / added
    between = summary["between_top_level_ns"] / added
    text = (f"of the time W adds, {100 * leaves:.0f}% lies inside leaf operators' own intervals "
            f"(leaves read {100 * summary['leaf_inflation']:+.1f}%), {100 * parents:.0f}% inside parents "
            f"between their children")
    p = summary.get("most_inflated_parent")
    if p and parents > 0:
        text += (f" ({p['name']} {100 * p['inflation']:+.0f}%)" if p["inflation"] is not None else
                 f" ({p['name']}: all of its reported time is instrument, its corrected total is 0)")
    text += f", {100 * between:.0f}% between top-level events, where only the step's wall time shows it"
    return text


def reconcile(skewed: bool, inflation, marks: dict, unit: str = "step") -> str | None:
    """One sentence that reconciles the verdict on the `unit` (a step,
    check's iteration: `skewed`, its `inflation`, profiled over bare, or
    None) with the per-operator marks ({mark: n}): where the skew is, and
    which figures to read. None without marks."""
    if not marks:
        return None
    n = {m: marks.get(m, 0) for m in MARK_COLOURS}
    step = (f"the {unit} is {100 * (inflation - 1):.0f}% longer profiled" if isinstance(inflation, (int, float))
            and inflation > 0 else f"the {unit} is longer profiled")
    if not (n["inflated"] or n["unresolved"] or n["unknowable"]):
        if skewed:
            return (f"skewed between operators: {step} while each operator's own time is right (every one "
                    f"believable); read operator times, not the {unit}'s")
        return (f"no skew in the {unit}, and each operator's own time is right (every one believable): read them "
                "as reported")
    parts = []
    if n["inflated"]:
        parts.append(f"{n['inflated']} inflated: read their corrected times")
    if n["unresolved"]:
        parts.append(f"{n['unresolved']} unresolved: W's interval is too wide to tell, so their times are "
                     f"not yet either; narrow W with more pairs ({ADVICE})")
    if n["unknowable"]:
        parts.append(f"{n['unknowable']} unknowable: mostly instrument, neither time measures them")
    head = f"skewed: {step}" if skewed else f"no skew found in the {unit}, yet of its operators"
    tail = f"; the {n['believable']} believable read as reported" if n["believable"] else ""
    return f"{head}; " + "; ".join(parts) + tail


VERDICT_COLUMNS = ("name", "calls", "total", "self", "added", "corrected total", "corrected self [95% CI]",
                   "verdict")


def verdict_rows(ops: list) -> list:
    """Rows of VERDICT_COLUMNS (times in ns) from the per-operator verdict."""
    rows = []
    for r in ops:
        a = r["added_ns"]
        cs = r["corrected_self_ns"]
        rows.append([r["name"], r["calls"], r["reported_total_ns"], r["reported_self_ns"],
                     a["inside"] + a["operators_below"] + a["python_below"] + a.get("other_threads", 0.0)
                     + a.get("span", 0.0) + a.get("scaled", 0.0),
                     r["corrected_total_ns"]["median"],
                     (cs["median"], cs["ci95"][0], cs["ci95"][1]),
                     r["mark"] + (f" (self: {r['marks']['self']})" if r["marks"]["self"] != r["mark"] else "")
                     + (" *" if "bytecode_factor" in r else "")
                     + (" \u2021" if (r.get("moved_ns") or {}).get("shown") else "")])
    return rows


def moved_sentence(ops: list) -> str | None:
    """The rows whose corrected total is not their total less added (the
    rows marked \u2021), in words; None where every row adds up."""
    shown = [r for r in ops if (r.get("moved_ns") or {}).get("shown")]
    if not shown:
        return None
    clamp = sum(1 for r in shown if abs(r["moved_ns"]["clamp"]) > abs(r["moved_ns"]["fit"]))
    return (f"\u2021 {count_of(len(shown), 'row')}: corrected total is not total less added; "
            f"{clamp} mostly by the clamp at 0 (calls whose instrument cost exceeded their duration: "
            f"each kept 0, not less), {len(shown) - clamp} mostly by the time line's fit (written longer "
            "where children outlast their parent, shorter where a parent's shortfall went into them); "
            "each row's moved_ns says by how much (docs/correct.md)")


def render(verdict: dict, out, top: int = 15, fmt=None) -> None:
    """A key_averages()-style table of the top operators by reported self
    time, through the one renderer (opskew.tables), then where the skew lands."""
    # The interval's title says its real coverage (that of W's CI).
    cov = f"{100 * verdict.get('ci_coverage', 0.95):.3g}% CI"
    cols = [Col(f"corrected self [{cov}]", "interval", "corrected_self_ns") if c == "corrected self [95% CI]"
            else c for c in VERDICT_COLUMNS]
    op_table(verdict_rows(verdict["ops"]), cols, top=top, out=out)
    note = bytecode_sentence(verdict)
    if note:
        out.write(f"* {note}\n")
    note = moved_sentence(verdict["ops"][:top] if top else verdict["ops"])
    if note:
        out.write(note + "\n")
    out.write(f"where the skew lands: {sentence(verdict['summary'])}\n")


def bytecode_sentence(verdict: dict) -> str | None:
    """The rows widened for the interpreter's slowdown under with_stack, in
    words; None where none were."""
    b = verdict.get("bytecode") or {}
    n = verdict.get("bytecode_rows") or 0
    if not n or not b.get("applies"):
        return None
    f = b["factor"]
    ci = f["ci95"]
    return (f"{n} name(s) whose self time runs Python code (Python frames, record_function ranges): "
            f"{b['python']} ran bytecode {f['median']:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}] slower under the profile "
            "function with_stack sets (measured in this process), which no cost per event removes; their "
            "corrected self time may be up to that factor lower, and their interval's low end says so "
            "(docs/profile.md)")


# One colour per mark, the same in every plot.
# The marks in opskew.analyze.verdict.MARKS's order (render imports no analyze).
MARK_COLOURS = {"believable": "#2a9d55", "inflated": "#e08a00", "unresolved": "#7f7f7f", "unknowable": "#c0392b"}


def marks_line(marks: dict) -> str:
    """A verdict's mark counts ({mark: n}) in words, every mark named, in
    MARK_COLOURS' order (a count a report lacks, one written before a mark
    existed, is 0)."""
    return ", ".join(f"{marks.get(m, 0)} {m}" for m in MARK_COLOURS)


def plot(verdict: dict, path: str, *, top: int = 15, title: str = "") -> None:
    """Per operator (top by reported self time): the reported total (hollow)
    against the corrected total (filled) with the interval W's CI gives it,
    coloured by trust mark; PNG or SVG by the suffix of `path`."""
    plt = pyplot()
    ops = verdict["ops"] if top == 0 else verdict["ops"][:top]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.38 * max(len(ops), 1)))
    dropped = draw_operators(ax, ops)
    note = f"; {dropped} corrected value(s) at or below 0 not drawn" if dropped else ""
    w = verdict["w_ns"]
    ax.set_title((title + "\n" if title else "")
                 + f"W {w['median']:.0f} ns [{w['ci95'][0]:.0f}, {w['ci95'][1]:.0f}] per event{note}", fontsize=9)
    save(plt, fig, path)


def draw_operators(ax, ops: list) -> int:
    """The operators on `ax`: per call, the reported total (hollow) against
    the corrected total (filled) with its interval, coloured by trust mark,
    on a log axis, with the marks' legend. Returns how many corrected values
    at or below 0 were not drawn."""
    from matplotlib.lines import Line2D

    dropped = 0
    for i, r in enumerate(ops):
        y = len(ops) - 1 - i
        colour = MARK_COLOURS[r["mark"]]
        rep = r["reported_total_ns"] / r["calls"] / 1e3
        c = r["corrected_total_ns"]
        med, lo, hi = (c["median"] / r["calls"] / 1e3, c["ci95"][0] / r["calls"] / 1e3,
                       c["ci95"][1] / r["calls"] / 1e3)
        ax.plot([rep], [y], marker="o", mfc="none", mec=colour, ms=7, ls="none")
        if med > 0:
            lo = max(lo, med * 1e-3)  # a log axis has no zero: a CI reaching it is drawn to 1/1000
            ax.errorbar([med], [y], xerr=[[med - lo], [max(hi - med, 0.0)]], fmt="o", color=colour, ms=6,
                        capsize=3)
            ax.plot([med, rep], [y, y], color=colour, lw=0.8, alpha=0.5)
        else:
            dropped += 1
    ax.set_yticks(range(len(ops)))
    ax.set_yticklabels([r["name"] if len(r["name"]) <= 40 else r["name"][:39] + "~" for r in reversed(ops)],
                       fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("time per call (µs), log scale: hollow = reported, filled = corrected [95% CI of W]")
    handles = [Line2D([], [], marker="o", color=col, ls="none", label=m) for m, col in MARK_COLOURS.items()]
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return dropped
