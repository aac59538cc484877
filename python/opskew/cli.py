"""The `opskew` command line: argument parsing and dispatch to subcommands.

Each subcommand lives in `opskew.commands.<name>` and provides `HELP` (one
line), `DESCRIPTION` (the --help text), `add_arguments(parser)` and
`run(args) -> int` (the argparse dest `command` is taken by
the dispatcher). Errors derived from `opskew.errors.OpskewError` become a
one-line message on stderr and the documented exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import EXIT_INTERRUPTED, EXIT_USAGE, OpskewError, from_c_error

COMMANDS = ("check", "matrix", "sweep", "advise", "record", "summary", "calibrate", "correct", "compare")

EPILOG = """\
exit codes:
  0    measured (or done)
  2    bad input: one line on stderr says what is wrong
  3    --fail-on-skew and the skew is significant
  4    the workload raised: what was measured so far is reported, then the error
  5    the trace ended early (a profiler killed mid-write): what was read is reported
  6    opskew failed while running, not because of the input or the workload (out of
       memory; check --corrected-trace's extra window or correction failed after the
       trials, whose figures are reported)
  7    an output could not be written (disk full, no permission): one line names the
       path and why; an output refused before any work (a directory, the input trace,
       the script) is 2. Outputs: docs/outputs.md
  130  interrupted (Ctrl-C, or SIGTERM under record); what was measured so far is kept
record exits with the command's own status; its own codes are in `opskew record --help`.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # exit 2 with one line, not the usage dump
        self.exit(EXIT_USAGE, f"opskew: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="opskew",
        description="Measure, minimize and correct the overhead profilers add to "
        "high-frequency, lightweight PyTorch operators.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"opskew {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"opskew.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"opskew.commands.{name}":
                continue  # a command not built yet in this checkout
            raise
        p = sub.add_parser(
            name,
            help=mod.HELP,
            description=mod.DESCRIPTION,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args._run(args) or 0)
    except MemoryError:
        # Out of memory in Python (or in a binding building its result) exits
        # as the C's OSK_ENOMEM does, through the same route.
        from . import _engine

        exc = from_c_error(_engine.ENOMEM, "running")
        print(f"opskew {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except OpskewError as exc:
        print(f"opskew {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"opskew {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
