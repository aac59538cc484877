"""Type stub for opskew._correct (csrc/ext/correct.c): the binding over
osk_correct_path (include/opskew_correct.h). Private; use
opskew.analyze.tracefile.correct, which raises opskew.errors.from_c_error's
exception for the failures this returns as data."""

from collections.abc import Iterable
from typing import Any

def correct(
    path: str,
    w_ns: float = 0,
    delta_ns: float = 0,
    out: str | None = None,
    categories: Iterable[str] | None = None,
    w_py_ns: float = 0,
    delta_py_ns: float = 0,
    py_categories: Iterable[str] | None = None,
    run_json: str | None = None,
    clock: tuple[int, float, float] | None = None,
    waits: int = -1,
    spans: dict[str, float | tuple[float, float] | tuple[float, float, float]] | None = None,
    progress: bytearray | None = None,
    classes: Iterable[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Compensates a Chrome trace: corrected = reported - delta(class) - sum
    over classes of W(class) x descendants(class), per operator, clamped at
    zero with the residual; writes the corrected trace to `out` when given
    (GIL released). classes=[{"name", "categories", "w_ns", "delta_ns",
    "python"}] (1 to 4) is the cost model (osk_cost_class_t); without it the
    default two: W, delta (categories) and W_py, delta_py (py_categories,
    the Python tracer's events). Per name, "cost_class" (its class's index)
    and "class_descendants"; in the stats, "class_events".

    clock=(origin_ns, offset_ns, drift): a rank's map to the reference clock.
    waits: the cross-thread rule, 1 on, 0 off, -1 where the trace holds GPU
    activity. spans={name: ns, (ns, w_scale) or (ns, w_scale, delta)}: events
    of that name span ns of the code they annotate (ns < 0: none), their
    reported time beyond it and delta is taken out too; the events of the
    top-level trees they root cost w_scale x W (x W_py) each; delta >= 0 is the
    name's own delta (above its W, its W is raised to it), < 0 its class's.
    progress: a bytearray(24) the read stores into as it goes, three
    native-endian uint64 (done, total, pass: osk_progress_t), for another
    thread to show (opskew.analyze.tracefile.Watch).

    Keys: status ("ok", "truncated", "invalid" or "error") and error (None, or
    {code, number, message, offset, sys_errno}); on "invalid" and "error"
    only those two. Otherwise also: ops (list of dicts: name, category,
    calls, reported_total_ns, reported_self_ns, corrected_total_ns,
    corrected_self_ns, descendants, py_descendants, python (bool), clamped,
    residual_ns, stretched_ns, waited_descendants, waited_py_descendants,
    waited_ns, trimmed_ns, scaled_ns, float_ns); stats (events, corrected_events,
    py_events, other_events, begin_end_events, unusable_events, threads,
    clamped, residual_ns, reported_top_ns, corrected_top_ns, overlaps,
    stretched, stretched_ns, held_peak, held_threads, passes, waited_ns,
    overlapping_threads, shortened, shortened_ns, trimmed, trimmed_ns,
    scaled_ns, relaid, relaid_ns, float_moved, float_moved_ns, passed_events,
    retimed_events); truncated (bool); warning (str, "" unless
    truncated); truncated_at (int, byte offset; 0 unless truncated).

    Raises TypeError when path, out or run_json is not a str, categories or
    py_categories is a str or not a sequence of str, clock is not (int,
    float, float), or spans is not a dict of str to ns, (ns, w_scale) or
    (ns, w_scale, delta); ValueError for a span with a non-finite ns or
    delta, or a w_scale that is not finite and > 0; MemoryError."""
