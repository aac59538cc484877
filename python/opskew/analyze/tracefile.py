"""Reading Chrome traces (torch.profiler's and opskew's) through the C reader.

A thin layer over ``opskew._reader`` and ``opskew._correct``: it turns their
outcomes into opskew's errors (by ``errors.from_c_error``, the one route from
the C's failures to exceptions), so every command that reads a trace reports
them the same way. The per-event work happens in C; nothing here loops over
events, opens the file or reads any of it (the C reader opens it, so pipes,
``/dev/stdin`` and ``-`` for standard input work, and why an open failed comes
from its errno).
"""

from __future__ import annotations

import errno

from opskew.errors import EXIT_TRUNCATED, TraceError, from_c_error  # noqa: F401  (EXIT_TRUNCATED, TraceError: for commands)


# Kineto's own bookkeeping: the "PyTorch Profiler (N)" span over the whole
# window (cat "Trace", pid "Spans"). key_averages() leaves it out too.
DEFAULT_EXCLUDED = ("Trace",)


# Why the C reader could not open a trace, by errno: each is one line, exit 2
# (EXIT_USAGE, through from_c_error's OSK_EIO rule); docs/reader.md lists them.
OPEN_ERRORS = {
    errno.ENOENT: "not found",
    errno.ENOTDIR: "not found (a component of the path is not a directory)",
    errno.EISDIR: "is a directory, not a trace file",
    errno.ELOOP: "too many levels of symbolic links (a symbolic link loop?)",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENXIO: "not a regular file or a stream (a socket?)",
    errno.EOPNOTSUPP: "not a regular file or a stream (a socket?)",
}


class rereadable:
    """`with rereadable(path) as src:` a path to read the trace at `path`
    ("-": standard input) more than once, for a command that reads it in
    several passes (correct: detection, then correction). A regular file is
    its own path; a pipe is copied whole, in C, into an unlinked temporary
    file of opskew's own (osk_reader_spool), read as /dev/fd/N and closed on
    exit."""

    def __init__(self, path: str):
        self.path = path
        self.fd = -1

    def __enter__(self) -> str:
        import os
        import stat

        if self.path != "-":
            try:
                if stat.S_ISREG(os.stat(self.path).st_mode):
                    return self.path
            except OSError:
                pass  # osk_reader_spool names why it cannot open it
        from opskew import _reader

        fd, code, message, sys_errno = _reader.spool(self.path)
        if fd < 0:
            _raise_unless_read({"status": "error", "error": {"message": message, "sys_errno": sys_errno,
                                                             "number": code, "offset": None}},
                               self.path, f"trace {self.path}")
        self.fd = fd
        return f"/dev/fd/{fd}"

    def __exit__(self, *exc) -> bool:
        import os

        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        return False


def _raise_unless_read(result: dict, path: str, context: str) -> dict:
    """The binding's result, or from_c_error's exception for its "error" when
    nothing usable was read (a truncated trace is usable: the caller warns).
    An open that failed is named by its errno (OPEN_ERRORS)."""
    err = result["error"]
    if result["status"] not in ("ok", "truncated"):
        message, sys_errno = err["message"], err["sys_errno"]
        if message == "cannot open the trace" and sys_errno in OPEN_ERRORS:
            message, sys_errno = OPEN_ERRORS[sys_errno], 0
            context = f"trace {path}"
        raise from_c_error(err["number"], context, message=message, offset=err["offset"],
                           sys_errno=sys_errno, path=path)
    return result


def summarize(path: str, categories=None, exclude_categories=DEFAULT_EXCLUDED) -> dict:
    """Summarizes the trace at `path` (``.json`` or gzip, by content).

    Only events whose "cat" is in `categories` (default: all) and not in
    `exclude_categories` (default: Kineto's "Trace" span) are analyzed.
    Returns the reader's dict (see ``opskew._reader.summarize``) whose
    "status" is "ok" or "truncated"; raises TraceError, with the byte offset,
    when the file is missing or is not valid trace JSON.
    """
    from opskew import _reader

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
    from opskew import _reader

    return _raise_unless_read(_reader.scan(path, header_only=header_only), path, f"trace {path}")


def correct(path: str, w_ns: float, delta_ns: float, out: str | None = None, **kw) -> dict:
    """``opskew._correct.correct`` with its failures raised through
    from_c_error; a truncated trace is corrected as far as it goes ("truncated"
    is then True in the result). Keywords: out's path, categories,
    w_py_ns, delta_py_ns, py_categories, run_json, clock, and waits (the
    cross-thread rule: 1 on, 0 off, -1, the default, where the trace holds GPU
    activity; docs/correct.md, "Threads that wait")."""
    from opskew import _correct

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
        from opskew.render.units import count_of

        out.append(f"events of {count_of(len(resorted), 'thread')} were out of time order: the trace was "
                   f"read twice and {st.get('resorted_events', 0)} events were sorted in memory")
    if st.get("unmatched_end"):
        out.append(f"{st['unmatched_end']} 'E' events had no open 'B' event")
    if st.get("unclosed_begin"):
        out.append(f"{st['unclosed_begin']} 'B' events were never closed")
    if st.get("lone_surrogates"):
        out.append(f"{st['lone_surrogates']} unpaired \\u surrogate escapes were read as U+FFFD")
    return out


def losses_of(result: dict) -> dict | None:
    """The events the tracer lost while recording, as its "opskew" header
    says ({"total": N, cause: n, ...}, causes as OSK_TRACE_LOSS_MAP's keys,
    only those above 0), or None when the trace says none were lost (or has
    no such header: torch.profiler's exports do not count losses)."""
    header = (result.get("objects") or {}).get("opskew")
    lost = header.get("lost") if isinstance(header, dict) else None
    if not isinstance(lost, dict):
        return None
    total = lost.get("total")
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        return None
    out = {"total": total}
    out.update({k: v for k, v in lost.items()
                if k != "total" and isinstance(v, int) and not isinstance(v, bool) and v > 0})
    return out


def losses_line(losses: dict) -> str:
    """One line for a trace's losses (losses_of)."""
    causes = ", ".join(f"{k} {v}" for k, v in losses.items() if k != "total")
    return (f"{losses['total']} events were lost while recording"
            + (f" (by cause: {causes})" if causes else "")
            + "; the summary cannot include them")
