"""What opskew adds to a training framework's profiler output
(opskew.integrations: Lightning's summary, the Hugging Face callback's
log): the corrected table's heading, why there is none, and the note on
the schedule opskew chose."""

from __future__ import annotations

from opskew.render.units import fmt_ns
from opskew.stats.pricing import ADVISED_SCHEDULE, ADVISED_WHY, schedule_call


def schedule_note(call: str, framework: str, framework_default: str) -> str:
    """One line: no schedule was given, so opskew's was used."""
    return (f"opskew: no schedule given: profiling with {call}, whose wait steps give opskew its own W in the run "
            f"({framework}'s default, {framework_default}, gives none)")


def corrected_heading(w: dict | None, source: str | None) -> str:
    """What the corrected table was corrected with."""
    if not w:
        return "corrected by opskew"
    ci = w.get("ci95")
    band = f" [{fmt_ns(ci[0])}, {fmt_ns(ci[1])}]" if ci else " (no 95% CI)"
    return f"corrected by opskew with W {fmt_ns(w['median'])}{band} per operator event ({source or 'in-run'})"


def no_corrected_table(rep: dict | None, why: str) -> str:
    """Why there is no corrected table, and what to change, from the latest report."""
    if rep is None:
        return f"opskew: no corrected table: {why}"
    said = rep.get("error") or rep.get("advice") or why
    fallback = rep.get("fallback")
    return f"opskew: no corrected table (no W for cycle {rep.get('cycle')}): {said}" + (
        f"; {fallback}" if fallback else "")


def one_cycle_note(framework: str) -> str:
    """One line: the framework records one cycle, so a schedule without 6
    warm pairs in it gets no W in the run."""
    return (f"opskew: {framework} records the first cycle of each stage only, so a schedule gets a W in the run "
            f"where that cycle has enough settled wait steps and active steps to pair: leave `schedule` out for "
            f"opskew's advised one, {schedule_call(ADVISED_SCHEDULE)} ({ADVISED_WHY})")
