"""The `opskew` command line: argument parsing and dispatch to subcommands.

Each subcommand lives in `opskew.cli.commands.<name>` and provides `HELP` (one
line), `DESCRIPTION` (the --help text), `add_arguments(parser)` and
`run(args) -> int` (the argparse dest `command` is taken by
the dispatcher). Errors derived from `opskew.errors.OpskewError` become a
one-line message on stderr and the documented exit code.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys

from opskew import __version__, _engine
from opskew.errors import EXIT_INTERRUPTED, EXIT_USAGE, OpskewError, from_c_error

COMMANDS = ("check", "matrix", "sweep", "advise", "record", "profile", "summary", "calibrate", "correct",
            "compare")

# What each exit code means, as `--help` prints it (errors.py holds the codes).
EXIT_LINES = {
    0: "  0    measured (or done)\n",
    2: "  2    bad input: one line on stderr says what is wrong\n",
    3: "  3    --fail-on-skew and the skew is significant\n",
    4: "  4    the workload raised: what was measured so far is reported, then the error\n",
    5: "  5    the trace ended early (a profiler killed mid-write): what was read is reported\n",
    6: ("  6    opskew failed while running, not because of the input or the workload (out of\n"
        "       memory{})\n"),
    7: ("  7    an output could not be written (disk full, no permission): one line names the\n"
        "       path and why; an output refused before any work (a directory, the input trace,\n"
        "       the script) is 2. Outputs: docs/outputs.md\n"),
    130: "  130  interrupted (Ctrl-C, or SIGTERM under record); what was measured so far is kept\n",
}

# The codes each command can return, read from its code paths. Every command
# can return 6 (cli.main turns a MemoryError into it) and 130 (Ctrl-C). `record`
# and `profile` are absent: they exit with their command's own status, and
# their --help says which codes are their own.
COMMAND_EXIT_CODES = {
    "check": (0, 2, 3, 4, 6, 7, 130),    # 3: --fail-on-skew; no user trace is read, so never 5
    "matrix": (0, 2, 4, 6, 7, 130),
    "sweep": (0, 2, 4, 6, 7, 130),       # 4: a user --op that raises
    "advise": (0, 2, 4, 6, 7, 130),
    "summary": (0, 2, 5, 6, 7, 130),     # reads a trace: 5; runs no workload: never 4
    "calibrate": (0, 2, 6, 7, 130),      # a workload that fails stores nothing: 2, not 4
    "correct": (0, 2, 5, 6, 7, 130),
    "compare": (0, 2, 5, 6, 7, 130),     # reads traces and results: 5; runs no workload: never 3 or 4
}


def epilog(codes=None, command: str | None = None) -> str:
    """The `exit codes:` section for `codes` (all of them: `opskew --help`)."""
    every = codes is None
    check_6 = ("; check --corrected-trace's extra window or correction failed after the\n"
               "       trials, whose figures are reported")
    lines = [EXIT_LINES[c].format(check_6 if every or command == "check" else "")
             for c in (sorted(EXIT_LINES) if every else codes)]
    text = "exit codes:\n" + "".join(lines)
    if every:
        text += ("record and profile exit with the command's own status; their own codes are in "
                 "`opskew record --help` and `opskew profile --help`.\n")
    return text


EPILOG = epilog()


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
            mod = importlib.import_module(f"opskew.cli.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"opskew.cli.commands.{name}":
                continue  # a command not built yet in this checkout
            raise
        p = sub.add_parser(
            name,
            help=mod.HELP,
            description=mod.DESCRIPTION,
            epilog=epilog(COMMAND_EXIT_CODES[name], name) if name in COMMAND_EXIT_CODES else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _subparser(parser: argparse.ArgumentParser, command):
    """The parser of subcommand `command`, or None."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices.get(command)
    return None


def unknown_flags(parser: argparse.ArgumentParser, extra: list) -> str:
    """argparse's "unrecognized arguments" line, with each unknown flag's
    close matches among `parser`'s own flags (an underscore for a dash
    first: --record_shapes is --record-shapes)."""
    flags = [f for a in parser._actions for f in a.option_strings if f.startswith("--")]
    hints = []
    for tok in extra:
        if not tok.startswith("--"):
            continue
        name = tok.split("=", 1)[0]
        dashed = name.replace("_", "-")
        close = [dashed] if dashed in flags else difflib.get_close_matches(dashed, flags, n=3, cutoff=0.6)
        if close:
            hints.append(f"{name}: did you mean {' or '.join(close)}?")
    return f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else "")


def main(argv=None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = _subparser(parser, getattr(args, "command", None))
        (sub or parser).error(unknown_flags(sub or parser, extra))
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args._run(args) or 0)
    except MemoryError:
        # Out of memory in Python (or in a binding building its result) exits
        # as the C's OSK_ENOMEM does, through the same route.
        exc = from_c_error(_engine.ENOMEM, "running")
        print(f"opskew {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except OpskewError as exc:
        print(f"opskew {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"opskew {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of standard output stopped (`| head`): what it took was
        # all it wanted. Later writes, and the flush at exit, go nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0

