"""The `opskew` command line: arguments -> options -> the library -> text and
an exit code. Nothing in the library imports this package."""

from opskew.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
