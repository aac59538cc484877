"""What the command line does with a run's result: print it, write its
JSON, and end with the run's exit code."""

from __future__ import annotations

import sys

from opskew.errors import EXIT_INTERRUPTED
from opskew.experiments.common import Computed


def finish(done: Computed, print_human, json_path: str | None, write_json) -> int | None:
    """Prints and writes what was measured, then raises the workload's error
    or returns the interrupt exit code; None when the run completed."""
    result, err = done.result, done.error
    if json_path != "-":
        print_human(result)
    if json_path:
        write_json(result, json_path)
    if err is not None:
        if err.user_traceback:
            # The user's own frames first, as Python would print them; the
            # one-line error and its exit code follow (cli.main).
            sys.stderr.write(err.user_traceback)
        raise err
    if done.interrupted:
        return EXIT_INTERRUPTED
    return None
