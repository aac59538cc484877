"""What a reading of a trace counted, in words: the warnings a command
prints (and its JSON lists) for the C reader's counts, the line for the
events opskew's tracer lost while recording, and the sentence a corrected
trace carries about itself (corrected_note)."""

from __future__ import annotations

from opskew.render.units import count_of, fmt_ci, fmt_ns


def warnings_of(result: dict) -> list[str]:
    """Human-readable warnings for what the reader and analyzer counted."""
    st = result.get("stats", {})
    out = []
    if result["status"] == "truncated":
        err = result["error"]
        out.append(f"{err['message']} at byte {err['offset']}; "
                   f"the summary covers the {st.get('events', 0)} events before that point")
    if st.get("gzip_unterminated"):
        out.append("the gzip stream ends before its trailer (the compressed file was cut)")
    if st.get("out_of_range"):
        out.append(f"{st['out_of_range']} events have a ts, dur or end (ts + dur) that is not representable "
                   "in int64 nanoseconds (or an absurd exponent) and were skipped")
    if st.get("overlaps"):
        out.append(f"{st['overlaps']} events outlive an event they start in (improper nesting, as "
                   "annotations opened from Python under with_stack do); the outlived event was "
                   "closed at their start, so they are not its children")
    if st.get("unusable_events"):
        out.append(f"{st['unusable_events']} events lack a name, ts or dur, or have a "
                   "negative or out-of-range time (beyond 2^62 ns for a correction), and were skipped")
    if st.get("bad_fields") and st.get("bad_fields") != st.get("unusable_events"):
        out.append(f"{st['bad_fields']} traceEvents elements had fields of the wrong type")
    resorted = [t for t in result.get("threads", []) if t.get("resorted")]
    if resorted:
        out.append(f"events of {count_of(len(resorted), 'thread')} were out of time order: the trace was "
                   f"read twice and {st.get('resorted_events', 0)} events were sorted in memory")
    if st.get("unmatched_end"):
        out.append(f"{st['unmatched_end']} 'E' events had no open 'B' event")
    if st.get("unclosed_begin"):
        out.append(f"{st['unclosed_begin']} 'B' events were never closed")
    if st.get("lone_surrogates"):
        out.append(f"{st['lone_surrogates']} unpaired \\u surrogate escapes were read as U+FFFD")
    return out


def losses_line(losses: dict) -> str:
    """One line for a trace's losses (losses_of)."""
    causes = ", ".join(f"{k} {v}" for k, v in losses.items() if k != "total")
    return (f"{losses['total']} events were lost while recording"
            + (f" (by cause: {causes})" if causes else "")
            + "; the summary cannot include them")


def corrected_note(model, *, by: str, source: str | None = None) -> str:
    """The sentence a corrected trace carries in its "opskew" header
    ("run": {"about": ...}), so that whoever opens the file (Perfetto, an
    editor, HTA's metadata) knows it is not the profiler's raw record: what
    was taken out under the cost model `model` (opskew.stats.costmodel: W
    with its 95% interval where it has one, delta, the Python class's W) and
    where it came from (`by`)."""
    op, python = model.operator, model.python
    ci = op.w.get("ci95")
    w = fmt_ns(op.w["median"]) + (f" (95% CI {fmt_ci(*ci)})" if ci and ci[0] != ci[1] else "")
    delta_ns = min(max(op.delta_ns, 0.0), max(op.w["median"], 0.0))
    w_py_ns = max(python.w["median"], 0.0) if python is not None else 0.0
    py = f", and W_py = {fmt_ns(w_py_ns)} for each Python event" if w_py_ns else ""
    raw = f" The raw trace: {source}." if source else ""
    return (f"Corrected by opskew: not the profiler's raw record. Each event's time has the profiler's own cost "
            f"taken out: W = {w} per operator event ({by}), of which delta = {fmt_ns(delta_ns)} lies inside the "
            f"event's own interval{py}; corrected = reported - delta - W x operator descendants - W_py x Python "
            f"descendants, and the gaps between events shrink by the rest. Operators whose cost the profiler "
            f"inflated read shorter than in the raw trace; the time line is opskew's estimate of the run without "
            f"the profiler (docs/correct.md).{raw}")
