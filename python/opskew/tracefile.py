"""Reading Chrome traces (torch.profiler's and opskew's) through the C reader.

A thin layer over ``opskew._reader`` and ``opskew._correct``: it turns their
outcomes into opskew's errors (by ``errors.from_c_error``, the one route from
the C's failures to exceptions), so every command that reads a trace reports
them the same way. The per-event work happens in C; nothing here loops over
events or reads the file itself.
"""

from __future__ import annotations

import os

from .errors import EXIT_TRUNCATED, TraceError, from_c_error  # noqa: F401  (EXIT_TRUNCATED, TraceError: for commands)


# Kineto's own bookkeeping: the "PyTorch Profiler (N)" span over the whole
# window (cat "Trace", pid "Spans"). key_averages() leaves it out too.
DEFAULT_EXCLUDED = ("Trace",)


def _check_path(path: str) -> None:
    if not os.path.exists(path):
        raise TraceError(f"trace not found: {path}")
    if os.path.isdir(path):
        raise TraceError(f"trace is a directory: {path}")


def _raise_unless_read(result: dict, path: str, context: str) -> dict:
    """The binding's result, or from_c_error's exception for its "error" when
    nothing usable was read (a truncated trace is usable: the caller warns)."""
    err = result["error"]
    if result["status"] not in ("ok", "truncated"):
        raise from_c_error(err["number"], context, message=err["message"], offset=err["offset"],
                           sys_errno=err["sys_errno"], path=path)
    return result


def summarize(path: str, categories=None, exclude_categories=DEFAULT_EXCLUDED) -> dict:
    """Summarizes the trace at `path` (``.json`` or gzip, by content).

    Only events whose "cat" is in `categories` (default: all) and not in
    `exclude_categories` (default: Kineto's "Trace" span) are analyzed.
    Returns the reader's dict (see ``opskew._reader.summarize``) whose
    "status" is "ok" or "truncated"; raises TraceError, with the byte offset,
    when the file is missing or is not valid trace JSON.
    """
    from . import _reader

    _check_path(path)
    result = _reader.summarize(path, categories=categories,
                               exclude_categories=list(exclude_categories or ()))
    return _raise_unless_read(result, path, f"trace {path}")


def scan(path: str, *, header_only: bool = False) -> dict:
    """What the trace at `path` says about itself, from one C pass without
    analysis: "objects" (top-level objects such as opskew's "opskew" header,
    decoded), "metadata" (top-level scalars), "marks" (events per
    torch.profiler option sign), "stats", "status" ("ok" or "truncated") and
    "error". With `header_only`, the reader stops where "traceEvents" begins
    (opskew's writers put their "opskew" object before it), so the cost does
    not grow with the trace; the marks then count nothing. Raises as
    summarize() does."""
    from . import _reader

    _check_path(path)
    return _raise_unless_read(_reader.scan(path, header_only=header_only), path, f"trace {path}")


def correct(path: str, w_ns: float, delta_ns: float, out: str | None = None, **kw) -> dict:
    """``opskew._correct.correct`` with its failures raised through
    from_c_error; a truncated trace is corrected as far as it goes ("truncated"
    is then True in the result)."""
    from . import _correct

    _check_path(path)
    return _raise_unless_read(_correct.correct(path, w_ns, delta_ns, out, **kw), path, f"correct {path}")


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
    if st.get("overlaps"):
        out.append(f"{st['overlaps']} events outlive an event they start in (improper nesting, as "
                   "annotations opened from Python under with_stack do); the outlived event was "
                   "closed at their start, so they are not its children")
    if st.get("unusable_events"):
        out.append(f"{st['unusable_events']} events lack a name, ts or dur, or have a "
                   "negative or out-of-range time, and were skipped")
    if st.get("bad_fields") and st.get("bad_fields") != st.get("unusable_events"):
        out.append(f"{st['bad_fields']} traceEvents elements had fields of the wrong type")
    resorted = [t for t in result.get("threads", []) if t.get("resorted")]
    if resorted:
        out.append(f"events of {len(resorted)} thread(s) were out of time order: the trace was "
                   f"read twice and {st.get('resorted_events', 0)} events were sorted in memory")
    if st.get("unmatched_end"):
        out.append(f"{st['unmatched_end']} 'E' events had no open 'B' event")
    if st.get("unclosed_begin"):
        out.append(f"{st['unclosed_begin']} 'B' events were never closed")
    if st.get("lone_surrogates"):
        out.append(f"{st['lone_surrogates']} unpaired \\u surrogate escapes were read as U+FFFD")
    return out
