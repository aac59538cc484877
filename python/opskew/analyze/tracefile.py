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
import os
import re
import stat
import struct
import threading

from opskew import _correct, _reader
from opskew.errors import from_c_error


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


# TensorBoard's profiler plugin (torch-tb-profiler) lists only the files whose
# name matches this pattern, copied from its source: pytorch/kineto,
# tb_plugin/torch_tb_profiler/consts.py, WORKER_PATTERN (the last version
# before kineto removed tb_plugin, commit 041e7ce99f1562dd81232ee58b7c454ef16bfae2;
# profiler/loader.py takes group 1 as the worker, group 2 as the span). It is
# what torch's tensorboard_trace_handler writes: WORKER.TS.pt.trace.json[.gz].
TB_WORKER_PATTERN = re.compile(r"""^(.*?) # worker name
        (\.\d+)? # optional timestamp like 1619499959628 used as span name
        \.pt\.trace\.json # the ending suffix
        (?:\.gz)?$""", re.X)

# The folder, beside a trace, that holds its corrected trace when the raw one
# lies among others that a viewer opens as a set (docs/profile-reference.md, "Where
# the corrected traces go"): HolisticTraceAnalysis reads every *.json and *.gz
# of the folder it is given as one trace per rank (hta/common/trace_file.py),
# so a raw and a corrected trace of one rank in the same folder would be one
# rank read twice, one of them dropped.
CORRECTED_DIR = "corrected"


def corrected_path(raw: str) -> str:
    """Where the corrected trace of the raw trace `raw` goes.

    - A name TensorBoard's plugin lists (TB_WORKER_PATTERN: WORKER[.TS].pt.trace.json[.gz],
      as tensorboard_trace_handler and opskew profile write) goes into the folder
      `corrected/` beside it, as its own worker: WORKER.corrected[.TS].pt.trace.json[.gz].
      The plugin shows that folder as a run of its own and the worker as WORKER.corrected;
      HTA reads the raw folder and the corrected one apart.
    - Any other NAME.json(.gz) gets NAME.corrected.json(.gz) next to it, as before.
    """
    folder, name = os.path.split(raw)
    m = TB_WORKER_PATTERN.match(name)
    if m:
        gz = ".gz" if name.endswith(".gz") else ""
        return os.path.join(folder, CORRECTED_DIR, f"{m.group(1)}.corrected{m.group(2) or ''}.pt.trace.json{gz}")
    for suffix in (".json.gz", ".json", ".gz"):
        if raw.endswith(suffix):
            return raw[: -len(suffix)] + ".corrected" + (".json.gz" if suffix != ".json" else ".json")
    return raw + ".corrected.json"


def corrected_candidates(raw: str) -> list:
    """Where a corrected trace of `raw` may lie: corrected_path(raw), then the
    name earlier opskew versions gave it beside the raw one
    (NAME.corrected.json for every name)."""
    out = [corrected_path(raw)]
    for suffix in (".json.gz", ".json", ".gz"):
        if raw.endswith(suffix):
            legacy = raw[: -len(suffix)] + ".corrected" + (".json.gz" if suffix != ".json" else ".json")
            break
    else:
        legacy = raw + ".corrected.json"
    return out + ([legacy] if legacy not in out else [])


def is_corrected_name(name: str) -> bool:
    """True for the name of a corrected trace opskew writes (corrected_path)."""
    return ".corrected." in os.path.basename(name)


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
        if self.path != "-":
            try:
                if stat.S_ISREG(os.stat(self.path).st_mode):
                    return self.path
            except OSError:
                pass  # osk_reader_spool names why it cannot open it
        fd, code, message, sys_errno = _reader.spool(self.path)
        if fd < 0:
            raise_unless_read({"status": "error", "error": {"message": message, "sys_errno": sys_errno,
                                                             "number": code, "offset": None}},
                               self.path, f"trace {self.path}")
        self.fd = fd
        return f"/dev/fd/{fd}"

    def __exit__(self, *exc) -> bool:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        return False


def raise_unless_read(result: dict, path: str, context: str) -> dict:
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


def watched(call, progress=None, every_s: float = 0.5):
    """call(buf) (a C read that releases the GIL, given `progress=buf`), with
    `progress(done, total, pass_)` told from this thread every `every_s`
    while it runs: the source's bytes read in the current pass, its size
    (0: unknown, a pipe), the pass (osk_progress_t). Without `progress`,
    call(None) on this thread. The call's exception is raised here."""
    if progress is None:
        return call(None)
    buf, box = bytearray(24), {}

    def run():
        try:
            box["result"] = call(buf)
        except BaseException as exc:  # raised on the caller's thread below
            box["error"] = exc

    worker = threading.Thread(target=run, name="opskew-read", daemon=True)
    worker.start()
    while True:
        worker.join(every_s)
        if not worker.is_alive():
            break
        progress(*struct.unpack_from("=QQQ", buf))
    if "error" in box:
        raise box["error"]
    return box["result"]


def summarize(path: str, categories=None, exclude_categories=DEFAULT_EXCLUDED, progress=None) -> dict:
    """Summarizes the trace at `path` (``.json`` or gzip, by content).

    Only events whose "cat" is in `categories` (default: all) and not in
    `exclude_categories` (default: Kineto's "Trace" span) are analyzed.
    Returns the reader's dict (see ``opskew._reader.summarize``) whose
    "status" is "ok" or "truncated"; raises TraceError, with the byte offset,
    when the file is missing or is not valid trace JSON. `progress`: told
    how far the read is while it runs (watched).
    """
    excluded = list(exclude_categories or ())
    result = watched(lambda buf: _reader.summarize(path, categories=categories, exclude_categories=excluded,
                                                   progress=buf), progress)
    return raise_unless_read(result, path, f"trace {path}")


def scan(path: str, *, header_only: bool = False) -> dict:
    """What the trace at `path` says about itself, from one C pass without
    analysis: "objects" (top-level objects such as opskew's "opskew" header,
    decoded), "metadata" (top-level scalars), "marks" (events per
    torch.profiler option sign), "stats", "status" ("ok" or "truncated") and
    "error". With `header_only`, the reader stops where "traceEvents" begins
    (opskew's writers put their "opskew" object before it), so the cost does
    not grow with the trace; the marks then count nothing. Raises as
    summarize() does."""
    return raise_unless_read(_reader.scan(path, header_only=header_only), path, f"trace {path}")


def correct(path: str, model, out: str | None = None, progress=None, *, end: int = 0, deltas: dict | None = None,
            **kw) -> dict:
    """``opskew._correct.correct`` with the cost model `model`
    (opskew.stats.costmodel.CostModel) at W's median (`end` 0), its lower
    (1) or upper end (2), `deltas` {class name: delta} for that end, and its
    failures raised through from_c_error; a truncated trace is corrected as
    far as it goes ("truncated" is then True in the result). Keywords:
    run_json, clock, spans and waits (the cross-thread rule: 1 on, 0 off,
    -1, the default, where the trace holds GPU activity; docs/correct.md,
    "Threads that wait"). `progress`: told how far each pass of the read is
    while it runs (watched)."""
    classes = model.for_c(end, deltas)
    result = watched(lambda buf: _correct.correct(path, out=out, progress=buf, classes=classes, **kw), progress)
    return raise_unless_read(result, path, f"correct {path}")


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
