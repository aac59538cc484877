"""The one way opskew writes a file: every output (JSON, CSV, traces, plots,
reports) goes through write_file, which calls the C writer (docs/outputs.md).
check_output refuses, before any work, a path the writer would refuse or that
would destroy an input."""

from __future__ import annotations

import errno
import json
import os
import sys

from opskew import _engine
from opskew.errors import OutputError, UsageError


def _reason(err: int, reason: str | None) -> str:
    """strerror's text as the middle of a sentence: "is a directory"."""
    text = reason or os.strerror(err or errno.EIO)
    return text[:1].lower() + text[1:]


def _refusal(path: str, t: dict) -> str:
    """One line for a target the writer refuses (out_target's dict)."""
    reason = t.get("reason") or ""
    if reason.startswith("a "):  # what it is, not an errno
        return (f"{path} is {reason}: opskew writes regular files and character devices such as "
                "/dev/null (docs/outputs.md)")
    return f"cannot write {path}: {_reason(t.get('errno', 0), reason)}"


def write_file(path, data) -> None:
    """Writes `data` (bytes, or str as UTF-8) to `path` through the one writer
    every opskew output uses (chrome_out.c, through _engine.write_file;
    gzipped when the name ends in .gz and the target is a file): a
    temporary file next to the target, created O_EXCL|O_NOFOLLOW with mode
    0666 less the umask (an existing file keeps its mode), fsynced and
    renamed into place, so a reader never sees half a file and a failure
    leaves the old one. "-" is standard output (sys.stdout); a character
    device is written through; a symbolic link to a regular file is written
    through to it; anything else is refused. Any failure raises OutputError
    (exit 7) with one line naming the path and the reason. The rules:
    docs/outputs.md."""
    if path == "-":
        try:
            if isinstance(data, str):
                sys.stdout.write(data)
            else:
                sys.stdout.flush()
                sys.stdout.buffer.write(data)
            sys.stdout.flush()
        except OSError as exc:
            raise OutputError(f"cannot write to standard output: {_reason(exc.errno, exc.strerror)}") from None
        return
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        _engine.write_file(os.fspath(path), data)
    except OSError as exc:
        reason = exc.strerror or ""
        if reason.startswith("a "):
            raise OutputError(_refusal(os.fspath(path), {"reason": reason})) from None
        raise OutputError(f"cannot write {os.fspath(path)}: {_reason(exc.errno, reason)}") from None


def write_failure(exc, path):
    """The OutputError (exit 7) for a C writer's failure to write `path`
    that came back through from_c_error (an EIO with its errno, on the
    output), or None when `exc` is about something else."""
    err = getattr(exc, "sys_errno", 0)
    # The C's message alone (never str(exc), which names the input's path):
    # compensate.c says "output file" or "writing the corrected trace" for
    # its output side, the reader says "the trace" for its input side.
    text = getattr(exc, "c_message", "")
    if not (path and err and ("output file" in text or "writing the corrected trace" in text)):
        return None
    return OutputError(f"cannot write {path}: {_reason(err, None)}")


def check_output(path, *, inputs=(), stdout: bool = True, what: str = "output") -> None:
    """Refuses, before any work, an output path the writer would refuse or
    that would destroy an input: raises UsageError (exit 2) with one line.
    `inputs`: (description, path) pairs that must not be overwritten ("the
    input trace", "the script"), compared by device and inode after links, so
    a symbolic or hard link to an input is caught too. `stdout`: whether "-"
    is allowed. None passes."""
    if path is None:
        return
    if os.fspath(path) == "":
        raise UsageError(f"the {what} path is empty: give a file name (or - for standard output)")
    if os.fspath(path).endswith(os.sep):
        raise UsageError(f"the {what} path {path} ends in {os.sep}, a directory: give a file name")
    if path == "-":
        if not stdout:
            raise UsageError(f"the {what} cannot go to standard output (-) here: give a file")
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"directory does not exist: {folder} (for {path})")
    t = _engine.out_target(os.fspath(path))
    if t["kind"] == "refused":
        raise UsageError(_refusal(os.fspath(path), t))
    if t["kind"] not in ("file", "new"):
        return  # a device or "-": two outputs may share it
    me = _identity(path, t)
    for desc, other in inputs:
        if not other or other == "-":
            continue
        if me == _identity(other):
            same = "" if os.path.abspath(other) == os.path.abspath(path) else f" ({other}, the same file)"
            raise UsageError(f"the {what} {path} is {desc}{same}: writing it would destroy it; "
                             "choose another path")


def _identity(path, t=None):
    """What a path will write to: (device, inode) for an existing file
    (after links: a hard or symbolic link to it is the same file), else the
    real folder and the name, so two outputs of one run that do not exist
    yet are still caught when they name one file."""
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        pass
    if t is not None and t.get("kind") == "file":
        return ("inode", t["dev"], t["ino"])
    folder, name = os.path.split(os.path.abspath(os.fspath(path)))
    return ("path", os.path.realpath(folder), name)


def write_json(obj, path: str) -> None:
    """Writes JSON to `path` ("-" for stdout) through write_file: a reader
    never sees half a file."""
    write_file(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
