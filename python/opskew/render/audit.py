"""The clean-window audit (opskew.analyze.audit's document) in words: the
lines a CUDA report prints and its notes carry."""

from __future__ import annotations

from opskew.render.units import count_of, fmt_ns

# Records named per kind in a line (the JSON keeps more).
NAMED = 3


def _where(r: dict) -> str:
    op = r.get("op")
    return f" in {op}" if op else " outside any operator"


def lines(doc: dict) -> list:
    """One line per finding; none for a clean trace or one without CUDA records."""
    if not doc.get("cuda"):
        return []
    st = doc["stats"]
    out = []
    if st["overhead_events"]:
        names = ", ".join(f"{o['name']} x{o['count']} ({fmt_ns(o['total_ns'])})" for o in doc["overhead_by_name"])
        first = "; ".join(f"{r['name']} {fmt_ns(r['dur_ns'])}{_where(r)}" for r in doc["overhead"][:NAMED])
        out.append(f"CUPTI overhead inside the trace: {count_of(st['overhead_events'], 'record')}, "
                   f"{fmt_ns(st['overhead_ns'])} ({names}); first: {first}. They are the profiler's own cost, "
                   "on a row of their own: no operator's time holds them (torch's key_averages() before "
                   "pytorch PR #193924 counted them as the surrounding operator's device time)")
    broken = [(st["missing"], "launch", "launches", "with no device record of the same correlation"),
              (st["orphans"], "device record", None, "that no launch in the trace made"),
              (st["bad_time"], "device record", None, "of zero length or starting before the launch"),
              (st["external_id_mismatch"], "device record", None, "with an External id other than the launch's")]
    said = [f"{count_of(n, what, plural)} {why}" for n, what, plural, why in broken if n]
    if st.get("missing_head"):
        said[0] += f", {st['missing_head']} of them before the first launch that has its kernel"
    if said:
        out.append(f"device records missing or malformed: {'; '.join(said)} (of {count_of(st['launches'], 'launch', 'launches')}"
                   f" and {count_of(st['device_events'], 'device record')}): a repeated profiler session drops or "
                   "corrupts the first kernels it records (pytorch #192021); their device times are not in the "
                   "trace's operators")
    if doc.get("warmup_short"):
        out.append(f"warm-up too short: the first ProfilerStep#N ran {doc['first_step_ratio']:.2f}x the median "
                   "of the others; raise the schedule's warmup so the first active step runs at speed")
    return out
