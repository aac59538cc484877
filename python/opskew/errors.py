"""Errors that map to opskew's documented exit codes, and the one route by
which the C core's failures become them (`from_c_error`)."""

from __future__ import annotations

import os

from opskew import _engine

# The command line's exit codes (opskew/exitcodes.py is their one table, with
# the child bootstraps' EXIT_SETUP), re-exported here with the exceptions that
# carry them.
from opskew.exitcodes import (  # noqa: F401
    EXIT_INTERRUPTED, EXIT_OK, EXIT_OUTPUT, EXIT_RUNTIME, EXIT_SKEW, EXIT_TRUNCATED, EXIT_USAGE, EXIT_WORKLOAD)


class OpskewError(Exception):
    """Base class; `exit_code` is what the command line returns."""

    exit_code = 1


class UsageError(OpskewError):
    """Bad input from the user: a missing file, a bad TARGET, CUDA absent."""

    exit_code = EXIT_USAGE


class TraceError(UsageError):
    """The file is not a readable Chrome trace (exit 2)."""


class TruncatedTraceError(OpskewError):
    """The trace ends early where the caller needs all of it (exit 5). Most
    commands instead use what was read and only warn."""

    exit_code = EXIT_TRUNCATED


class RuntimeFailure(OpskewError):
    """opskew failed while running, through no fault of the input or the
    workload: out of memory, or a step after the measurement (exit 6)."""

    exit_code = EXIT_RUNTIME


class OutputError(OpskewError):
    """An output could not be written while writing it (exit 7): the message
    names the path and the reason ("no space left on device")."""

    exit_code = EXIT_OUTPUT


class WorkloadError(OpskewError):
    """The user's workload raised; `partial` holds what was measured so far."""

    exit_code = EXIT_WORKLOAD

    def __init__(self, message, partial=None, cause=None):
        super().__init__(message)
        self.partial = partial
        self.cause = cause


def from_c_error(code: int, context: str, *, message: str | None = None, offset: int | None = None,
                 sys_errno: int = 0, path: str | None = None) -> OpskewError:
    """The exception for a failure the C core reported, to raise.

    `code` is the OSK_E* value (negative), `context` says what was being done
    or on what ("trace t.json", "correct"), `message` is the C's message for
    this failure (default: the engine's osk_strerror for the code), `offset`
    the byte in the JSON text, `sys_errno` the errno of an I/O failure and
    `path` the trace the failure is about. The class follows the code:
    a trace that is not valid JSON, or has an event over the reader's limit:
    TraceError (exit 2), "invalid trace PATH: REASON at byte N"; an I/O
    failure, a bad argument, something this machine lacks: UsageError (exit 2);
    a trace that ends early: TruncatedTraceError (exit 5); out of memory and
    anything else: RuntimeFailure (exit 6). The result carries `code`,
    `name` (the C's symbolic name), `offset`, `sys_errno`, `path`, `context`.
    """
    text = message or _engine.strerror(code)
    name = _engine.err_name(code)
    at = f" at byte {offset}" if offset is not None else ""
    if code in (_engine.EFORMAT, _engine.ERANGE):
        exc: OpskewError = TraceError(f"invalid trace {path or context}: {text}{at}")
    elif code == _engine.ETRUNCATED:
        exc = TruncatedTraceError(f"truncated trace {path or context}: {text}{at}")
    elif code == _engine.EIO:
        cause = f": {os.strerror(sys_errno)}" if sys_errno else ""
        exc = UsageError(f"{context}: {text}{cause}")
    elif code in (_engine.EINVAL, _engine.EUNSUPPORTED):
        exc = UsageError(f"{context}: {text}")
    else:  # OSK_ENOMEM, OSK_ETOOFEW, a code this Python does not know
        exc = RuntimeFailure(f"{context}: {text} ({name})")
    exc.code, exc.name, exc.offset, exc.sys_errno = code, name, offset, sys_errno
    exc.path, exc.context = path, context
    exc.c_message = text  # the C's own words, without the paths around them
    return exc

