"""The text of opskew.profile's per-cycle report (what it prints to its
report_file after each trace), from the report dict alone, and the notes
the report's figures are said in."""

from __future__ import annotations

from opskew.render.audit import lines as audit_lines
from opskew.render.notes import all_words, priced
from opskew.render.units import fmt_ns
from opskew.render.verdict import bytecode_sentence, marks_line, reconcile, skew_words
from opskew.stats.pricing import COLD_STEP_MIN_CYCLES, level

def stretch_note(st: dict) -> str:
    """The note on ProfilerStep#N ranges the corrected trace writes longer
    than the model's figure (the report's trace_step_stretch)."""
    return (f"the corrected trace's ProfilerStep#N ranges are {st['median_ns'] / 1e3:.1f} us ({st['share']:.0%}) "
            "longer than the model's figure (median over its steps): W - delta does not fit between the events of "
            "a step, which the trace writes stretched (docs/correct.md); corrected_step_ns and the per-operator "
            "table are the model's")


def step_line(rep: dict, corrected_ns: float, band) -> str:
    """The answer of a cycle's report: the true (corrected) step
    `corrected_ns` with its band at W's CI ends, against `rep`'s profiled
    and wait steps."""
    band = f" [{fmt_ns(band[0])}, {fmt_ns(band[1])} at W's 95% CI]" if band else ""
    seen = [f"{what} {fmt_ns(rep[k])}" for what, k in (("profiled", "active_step_ns"),
                                                       ("unprofiled wait steps", "baseline_step_ns"))
            if rep.get(k) is not None]
    by = f"; a step: {rep['step_marked_by']}" if rep.get("step_marked_by") else ""
    return f"true step {fmt_ns(corrected_ns)}{band}" + "".join(", " + x for x in seen) + f" (medians{by})"


def _answer(rep: dict) -> str:
    """The first line's text after "cycle N: ": the true step, or why there is none yet."""
    if rep.get("corrected_step_ns") is not None and (rep.get("w_ns") or {}).get("ci95"):
        return step_line(rep, rep["corrected_step_ns"], rep.get("corrected_step_w_ci_ns"))
    if rep.get("error"):
        return "no answer: opskew's analysis of this trace failed (below)"
    if rep.get("corrected_trace") and rep.get("corrected_step_ns") is None:
        return ("corrected, no true step (no step() marked a step); the operators below and the corrected "
                "trace are the answer")
    seen = [f"{what} {fmt_ns(rep[k])}" for what, k in (("profiled", "active_step_ns"),
                                                       ("unprofiled wait steps", "baseline_step_ns"))
            if rep.get(k) is not None]
    why = (f"W has no 95% interval from {rep.get('pairs') or 0} pair(s) yet" if not (rep.get("w_ns") or {}).get("ci95")
           else "not corrected")
    return f"no true step yet ({why})" + (f"; {', '.join(seen)} (medians)" if seen else "")


def moved_line(rep: dict, lead: str = "  moved most") -> str:
    """"LEAD (self time in the trace, reported -> corrected): NAME R -> C, ..." or ""."""
    top = rep.get("moved_most")
    if not top:
        return ""
    return (f"{lead} (self time in the trace, reported -> corrected): "
            + ", ".join(f"{name} {fmt_ns(r)} -> {fmt_ns(c)}" for name, r, c in top))


def notes_of(rep: dict) -> list:
    """A report's notes in words (render.notes), with its CUDA audit's
    findings (render.audit), each once, in the order of their words."""
    audit = rep.get("audit") or {}
    found = audit_lines(audit) if audit.get("stats") else []
    return sorted(set(all_words(rep.get("notes"))) | set(found))


def _once(lines: list, seen, key: str, line: str) -> None:
    """Appends `line` unless `seen` (a run's set of printed notes) has `key`."""
    if seen is not None:
        if key in seen:
            return
        seen.add(key)
    lines.append(line)


VERBOSE_HINT = ("  (each cycle's detail: opskew profile --verbose, opskew.profile(verbose=True); "
                "the report keeps it all)")


def render(rep: dict, verbose: bool = True, seen: set | None = None) -> str:
    """A cycle's report: its answer first (the true step against the
    profiled one, the operators that moved most), then W, the verdict and
    the trace; `verbose` adds each figure behind them. Notes (whose text
    repeats from cycle to cycle) are printed once per run: `seen`, the
    run's set of those printed, is updated (None: all printed)."""
    who = f" rank {rep['rank']}/{rep['world_size']}" if rep.get("rank") is not None else ""
    lines = [f"opskew.profile{who} cycle {rep['cycle']}: {_answer(rep)}"]
    if moved_line(rep):
        lines.append(moved_line(rep))
    if verbose:
        _details(lines, rep, seen)
    else:
        w = rep.get("w_ns")
        if w is not None:
            lines.append(w_line(rep, w))
    cold = rep.get("cold_step") or {}
    if (cold.get("extra_ns") or 0) > 0 and (cold.get("cycles") or 0) >= COLD_STEP_MIN_CYCLES:
        _once(lines, seen, "cold_step", f"  {cold['name']} (the cycle's first active step, cold): {priced(cold['why'])}")
    if not rep.get("w_py_ns") and rep.get("w_py_note"):
        _once(lines, seen, rep["w_py_note"], f"  note: {rep['w_py_note']}")
    classes = rep.get("cost_classes") or {}
    if classes.get("not_separable"):
        names = ", ".join(classes["not_separable"])
        _once(lines, seen, "not_separable " + names,
              f"  note: {names} priced at W with the operators, not measured apart (cost_classes in the report "
              "and the corrected trace's metadata say why)")
    if rep.get("error"):
        lines.append(f"  opskew's analysis of this trace failed ({rep['error']}); the training goes on")
        return "\n".join(lines) + "\n"
    v = rep["verdict"]
    lines.append(f"  verdict: {skew_words(v, v['enough_pairs'])} ({v['test']})")
    if rep.get("operators"):
        lines.append(f"  operators: {marks_line(rep['operators']['marks'])}")
        what = reconcile(v["skewed"], rep.get("inflation"), rep["operators"]["marks"])
        if what:
            lines.append(f"  what to read: {what}")
        note = bytecode_sentence({"bytecode": rep.get("bytecode"),
                                  "bytecode_rows": rep["operators"].get("bytecode_rows")})
        if note:
            _once(lines, seen, "bytecode", f"  {note}")
    if rep.get("corrected_trace"):
        lines.append(f"  corrected trace: {rep['corrected_trace']}")
    for k in ("advice", "fallback"):
        if rep.get(k):
            _once(lines, seen, f"{k}: {rep[k]}", f"  {k}: {rep[k]}")
    for n in notes_of(rep):
        _once(lines, seen, n, f"  note: {n}")
    if (rep.get("trace_step_stretch") or {}).get("said"):
        lines.append(f"  note: {stretch_note(rep['trace_step_stretch'])}")
    if not verbose:
        _once(lines, seen, "verbose", VERBOSE_HINT)
    return "\n".join(lines) + "\n"


def w_line(rep: dict, w: dict) -> str:
    ci = w.get("ci95")
    cis = f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci else " (no 95% CI)"
    return f"  W {fmt_ns(w['median'])}{cis} per operator event ({rep['w_source']})"


def _details(lines: list, rep: dict, seen) -> None:
    """The figures behind a cycle's answer (render's verbose part)."""
    if rep.get("steps"):
        lines.append(f"  steps so far: {rep['steps']['active']} active, {rep['steps']['wait']} wait, "
                     f"{rep['steps']['warmup']} warmup")
    if rep.get("inflation") is not None:
        lines.append(f"  in-window inflation {100 * (rep['inflation'] - 1):+.1f}% "
                     f"({rep['pairs']} active step(s) against their wait steps)")
    priced = [p for p in rep.get("position_steps") or [] if p.get("w_scale", 1.0) != 1.0]
    if priced:
        lines.append("  active steps priced by position in the cycle (W of their pairs there, over W): "
                     + ", ".join(f"{p['position'] + 1}: {p['w_scale']:.2f}" for p in priced))
    for c in rep.get("w_by_cycle") or []:
        if level(c) != 1.0:
            lines.append(f"  this cycle's own level: its operator events at {c['factor']:.2f} x their position's W "
                         f"(all {c['pairs']} of its pairs {'above' if c['factor'] > 1 else 'below'} it)")
    w = rep.get("w_ns")
    if w is not None:
        lines.append(w_line(rep, w))
    wp = rep.get("w_py_ns")
    if wp:
        lines.append(f"  W_py {fmt_ns(wp['median'])} [{fmt_ns(wp['ci95'][0])}, {fmt_ns(wp['ci95'][1])}] per "
                     f"Python event ({wp['source']})")
    ld = rep.get("leaf_delta")
    if ld and ld.get("names"):
        lo, hi = ld["range_ns"]
        lines.append(f"  leaf delta: own for {ld['names']} of {ld['leaves']} leaf operators, from opskew's tracer on "
                     f"{ld['tracer_steps']} wait steps (median {fmt_ns(ld['median_ns'])}, {fmt_ns(lo)} to "
                     f"{fmt_ns(hi)}); other operators {fmt_ns(rep.get('delta_ns') or 0.0)}")
        refused = ld.get("refused")
        if refused:
            lines.append(f"  leaf delta refused as noise for {len(refused['names'])} name(s) (median "
                         f"{fmt_ns(refused['median_ns'])}, above {fmt_ns(refused['limit_ns'])}: {refused['why']}): "
                         + ", ".join(refused["names"][:5])
                         + (f" and {len(refused['names']) - 5} more" if len(refused["names"]) > 5 else ""))
        below = ld.get("below_tracer") or []
        if below:
            lines.append(f"  faster in the trace than under opskew's tracer on the wait steps, beyond doubt (no "
                         f"instrument cost shortens an event: the profiled steps ran them faster, or the wait steps "
                         f"slower, than they run; their intervals reach the tracer's time): {', '.join(below[:5])}"
                         + (f" and {len(below) - 5} more" if len(below) > 5 else ""))
    elif ld and ld.get("why"):
        _once(lines, seen, "leaf delta " + ld["why"],
              f"  leaf delta: {fmt_ns(rep.get('delta_ns') or 0.0)} for every operator ({ld['why']})")
    if rep.get("opskew_ns") is not None:
        lines.append(f"  opskew's own time in this step() call: {fmt_ns(rep['opskew_ns'])}"
                     + (f", of which measuring W_py {fmt_ns(rep['w_py_measure_ns'])}" if rep.get("w_py_measure_ns")
                        else "") + " (not in any step)")
    sh = rep.get("share_of_active_time")
    if sh:
        lines.append(f"  against this cycle's active-step time: instrument {100 * sh['instrument']:.1f}% (in the "
                     f"steps); outside them, stop {100 * sh['stop']:.1f}%, on_trace_ready/export "
                     f"{100 * sh['on_trace_ready']:.1f}%")


def _marks(m) -> str:
    return "/".join(str((m or {}).get(k, 0)) for k in ("believable", "inflated", "unresolved", "unknowable"))


def _leaf(ld) -> str:
    if not ld or not ld.get("names"):
        return "none"
    return f"{fmt_ns(ld['median_ns'])} for {ld['names']} on {ld['tracer_steps']} tracer steps"


# The printed figures whose change at stop() is said with both values (the
# rest are named): (label, how to read it from a report).
_SAID = (("true step", lambda r: fmt_ns(r["corrected_step_ns"]) if r.get("corrected_step_ns") is not None
          else "not corrected"),
         ("the trace's W", lambda r: fmt_ns((r.get("corrected_w_ns") or r["w_ns"])["median"])
          if r.get("corrected_w_ns") or r.get("w_ns") else "none"),
         ("operators (believable/inflated/unresolved/unknowable)",
          lambda r: _marks((r.get("operators") or {}).get("marks"))),
         ("leaf delta", lambda r: _leaf(r.get("leaf_delta"))),
         ("other operators' delta", lambda r: fmt_ns(r.get("delta_ns") or 0.0)),
         ("moved most", lambda r: ", ".join(m[0] for m in r.get("moved_most") or []) or "none"))
_SAID_KEYS = {"corrected_step_ns", "w_ns", "operators", "leaf_delta", "delta_ns", "moved_most",
              # what a recorrection always changes, said in the first line
              "corrected_with", "corrected_w_ns", "corrected_step_w_ci_ns", "op_deltas_ns", "trace_step_stretch",
              "corrected_step_pairs_ns", "corrected_step_pairs_w_ci_ns"}


def changes(now: dict, was: dict) -> str:
    """What changed from the report as printed (`was`) to `now`: each
    printed figure that moved, as was -> now, then the other fields by name."""
    parts = []
    for label, get in _SAID:
        a, b = get(was), get(now)
        if a != b:
            parts.append(f"{label} {a} -> {b}")
    notes = set(notes_of(was)), set(notes_of(now))
    if notes[0] != notes[1]:
        parts.append(f"notes {len(notes[1] - notes[0])} new, {len(notes[0] - notes[1])} gone")
    other = sorted(set(now.get("as_printed") or {}) - _SAID_KEYS - {"notes"})
    if other:
        parts.append("also " + ", ".join(other))
    return "; ".join(parts) or "nothing printed changed"


def render_recorrected(reports: list, final: dict | None, as_printed) -> str:
    """What stop() prints when it corrected the run's traces again with the
    run's final W: for each such cycle, what it printed (`as_printed(rep)`,
    the report as it was printed) against what its report, report.json and
    its trace on disk now hold, figure by figure, so that the two can
    always be reconciled."""
    redone = [r for r in reports if "final_w" in (r.get("revised_by") or ())]
    if not redone or not final:
        return ""
    w = final["w_ns"]
    lines = [f"opskew.profile: at stop(), {len(redone)} trace(s) corrected again with the run's W "
             f"{fmt_ns(w['median'])} [{fmt_ns(w['ci95'][0])}, {fmt_ns(w['ci95'][1])}] from all {final['pairs']} "
             "pairs; as printed -> now" + (f" (the latest 5; {len(redone) - 5} earlier)" if len(redone) > 5 else "")
             + ":"]
    for r in redone[-5:]:
        lines.append(f"  cycle {r['cycle']}: {changes(r, as_printed(r))}")
    lines.append("  (each report keeps what it printed, where that differs, as as_printed)")
    return "\n".join(lines) + "\n"


def run_answer(doc: dict) -> str:
    """`opskew profile`'s last line but its report's path: the run's true
    step with its interval (report.json's `final`, else its latest
    `report`), against the profiled and unprofiled steps; "" when no cycle
    was corrected."""
    for src in (doc.get("final") or {}, doc.get("report") or {}):
        if src.get("corrected_step_ns") is not None:
            band = src.get("corrected_step_w_ci_ns")
            seen = [f"{what} {fmt_ns(src[k])}" for what, k in (("profiled", "active_step_ns"),
                                                               ("unprofiled wait steps", "baseline_step_ns"))
                    if src.get(k) is not None]
            return (f"true step {fmt_ns(src['corrected_step_ns'])}"
                    + (f" [{fmt_ns(band[0])}, {fmt_ns(band[1])}]" if band else " (no interval)")
                    + (f" ({', '.join(seen)})" if seen else ""))
    return ""
