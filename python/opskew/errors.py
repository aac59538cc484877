"""Errors that map to opskew's documented exit codes."""

# Exit codes, documented in docs/cli.md and `opskew --help`.
EXIT_OK = 0          # measured (or done)
EXIT_USAGE = 2       # bad input: one line on stderr says why
EXIT_SKEW = 3        # --fail-on-skew and a significant skew was found
EXIT_WORKLOAD = 4    # the user's workload raised; what was measured is still reported
EXIT_TRUNCATED = 5   # the trace ended early (a profiler killed mid-write): what was read is used
EXIT_INTERRUPTED = 130


class OpskewError(Exception):
    """Base class; `exit_code` is what the command line returns."""

    exit_code = 1


class UsageError(OpskewError):
    """Bad input from the user: a missing file, a bad TARGET, CUDA absent."""

    exit_code = EXIT_USAGE


class WorkloadError(OpskewError):
    """The user's workload raised; `partial` holds what was measured so far."""

    exit_code = EXIT_WORKLOAD

    def __init__(self, message, partial=None, cause=None):
        super().__init__(message)
        self.partial = partial
        self.cause = cause
