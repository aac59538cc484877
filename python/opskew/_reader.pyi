"""Type stub for opskew._reader (csrc/ext/reader.c): the trace reader, the
analyzer and the CUDA audit (include/opskew_reader.h, opskew_job.h). Private;
use `opskew summary`, opskew.analyze.tracefile or opskew.analyze.audit.

The C's own failures are not raised: results carry them as data (read_error.h),
"status" ("ok", "truncated", "invalid" or "error") and "error" (None, or a
dict with keys code (str, "OSK_EFORMAT"), number (int, the OSK_E* value),
message (str), offset (int, byte in the JSON text), sys_errno (int)), for
opskew.errors.from_c_error. Only bad arguments raise (TypeError, ValueError)
and running out of memory (MemoryError)."""

from collections.abc import Iterable
from typing import Any, Final

from _typeshed import StrOrBytesPath

# The engine's version string (as opskew._engine.version).
version: Final[str]

def spool(path: StrOrBytesPath, /) -> tuple[int, int, str, int]:
    """A descriptor of path ("-": standard input) readable from the start more
    than once (osk_reader_spool): the file itself, or a pipe's whole copy in an
    unlinked temporary file. Returns (fd, code, message, sys_errno): fd is -1
    on failure, with the OSK_E* code, message and errno for
    opskew.errors.from_c_error (not raised). The caller closes fd. Raises
    TypeError for a path that is not str, bytes or os.PathLike."""

def summarize(
    path: StrOrBytesPath,
    categories: Iterable[str] | None = None,
    exclude_categories: Iterable[str] | None = None,
    chunk_bytes: int = 0,
    progress: bytearray | None = None,
) -> dict[str, Any]:
    """Reads a Chrome trace (.json or gzip) in C with the GIL released and
    aggregates its complete events by name. With categories, only events whose
    "cat" is listed are analyzed; events whose "cat" is in exclude_categories
    are not. chunk_bytes <= 0: the reader's default.

    Keys: status, error (see the module); ops (list of dicts: name, cat,
    calls, total_ns, self_ns, mean_ns, min_ns, max_ns, p50_ns, p99_ns,
    descendants, only_child_same_name; times in int ns, float for mean and
    quantiles); threads (list of dicts: pid, tid (int, str or None), name
    (str | None), complete_events, max_depth, overlaps, resorted (bool));
    processes (list of dicts: pid, name); metadata (the top-level scalars);
    objects (the top-level objects and arrays, decoded, such as opskew's
    "opskew" header); stats (events, complete_events, filtered_events,
    unusable_events, overlaps, unmatched_end, unclosed_begin,
    resorted_events, passes, first_ts_ns, last_end_ns and the reader's
    counters as in scan(); empty when nothing could be read); marks (as in
    scan()).

    Raises TypeError when categories or exclude_categories is not a sequence
    of str or path is not a path; MemoryError."""

def scan(path: StrOrBytesPath, chunk_bytes: int = 0, *, header_only: bool = False) -> dict[str, Any]:
    """Reads a Chrome trace in C without analyzing it: what it says about
    itself. With header_only=True the read stops where "traceEvents" begins:
    only the members before it are seen, no events.

    Keys: status, error (see the module); metadata (top-level scalars: str,
    int, float, bool, None, else their JSON text); objects (top-level objects
    and arrays, decoded; those nesting deeper than 64 levels are left out);
    marks (events per torch.profiler option sign: record_shapes, with_stack,
    profile_memory, with_modules, with_flops); stats (events, bytes,
    compressed_bytes, gzip, gzip_unterminated, gzip_corrupt, array_format,
    bad_fields, lone_surrogates, out_of_range, bytes_scanned,
    objects_not_kept, header_only_stopped, peak_buffer_bytes).

    Raises TypeError for a path that is not a path; MemoryError."""

def audit(path: StrOrBytesPath, max_records: int = 100, chunk_bytes: int = 0) -> dict[str, Any]:
    """The clean-window audit of a CUDA trace (osk_audit_* in
    include/opskew_reader.h; docs/reader.md, "The CUDA audit"), one read in
    C with the GIL released. max_records: entries each list keeps (0: none;
    the counts are whole); chunk_bytes <= 0: the reader's default.

    Keys: status, error (see the module; "truncated": what was read is
    audited); stats (events, device_events, device_uncorrelated, launches,
    matched_launches, missing, missing_head, orphans, bad_time,
    before_launch, external_id_mismatch, duplicate_launches, gap_min_ns,
    gap_p50_ns, gap_max_ns, overhead_events, overhead_ns,
    overhead_in_launch, overhead_in_launch_ns, overhead_in_op,
    overhead_in_op_ns, operators, steps, unusable, truncated (bool), and the
    reader's counters as in scan(); empty when nothing could be read);
    overhead_by_name (list of dicts: name, count, total_ns; largest total
    first); overhead (list of dicts, time order: name, ts_ns, dur_ns, op
    (str | None: the innermost cpu_op or user_annotation holding its start),
    launch (str | None: the launch it overlaps), correlation (int | None:
    that launch's)); missing, orphans, bad_time (lists of dicts, time order:
    name, correlation (int | None), ts_ns, dur_ns, launch_ts_ns (int | None:
    the device event's launch)); steps (list of dicts: step, ts_ns, dur_ns,
    every ProfilerStep#N in time order). Times in ns.

    Raises TypeError for a path that is not a path; ValueError for
    max_records < 0; MemoryError."""

def job(
    sources: Iterable[tuple[int, StrOrBytesPath]],
    costs: dict[int, tuple[float, float]] | None = None,
    align: bool = False,
    categories: Iterable[str] | None = None,
    exclude_categories: Iterable[str] | None = None,
) -> dict[str, Any]:
    """A multi-rank job's traces together (include/opskew_job.h): sources is a
    sequence of (rank, path), each rank's in order (its segments); costs a
    dict rank -> (W ns, W_py ns) for the cross-rank correction; align applies
    the estimated clock offsets.

    Keys: status, error (see the module); ranks (list of dicts: rank,
    sources (per file: status, error, threads, processes, metadata, objects,
    stats), status, ops, stats, collectives, steps, clock_origin_ns,
    offset_ns, drift_ppm, residual_ns, residual_max_ns, clock_points,
    wait_ns, last_arrivals, lateness_ns, costed, w_ns, w_py_ns (None unless
    costed), events, py_events, own_ns, own_before_sync_ns, absorbed_ns,
    corrected_wait_ns); merged (ops, stats: the table over ranks);
    collectives (list of dicts: segment, step, ordinal, name, p2p, sender,
    last, lateness_ns, enter_ns, exit_ns, wait_ns, own_ns, shift_ns,
    corrected_wait_ns; the lists per rank); steps (list of dicts: segment,
    step, dur_ns, corrected_ns); family, matched, unmatched, aligned,
    corrected. When a file could not be read: only status, error,
    failed_rank and failed_source. Times in ns.

    Raises TypeError when sources is not a sequence of (int, path), costs not
    a dict rank -> (float, float), or the categories not sequences of str;
    ValueError for a rank < 0 or out of range, or a bad cost (no such rank,
    W < 0); MemoryError."""
