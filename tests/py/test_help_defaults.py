"""--help defaults equal to what runs (issue 45: `check --help` said warm-up
0.3 s while the run printed 1.1 s), for every command: where an option's
help states a default and its parser holds one, they are the same value.
(test_check compares check's with what a default run records.)"""

import argparse

import pytest
from conftest import help_defaults, help_entries

from opskew.cli.main import COMMANDS, _subparser, build_parser


@pytest.mark.parametrize("command", COMMANDS)
def test_each_stated_default_is_the_parser_s(command):
    sub = _subparser(build_parser(), command)
    acts = {o: a for a in sub._actions for o in a.option_strings}
    said, compared, differ = help_defaults(command), 0, []
    for flag, text in said.items():
        d = acts[flag].default
        if d is None or d is argparse.SUPPRESS or isinstance(d, bool) or not isinstance(d, (int, float, str)):
            continue  # resolved at run time ("the cache", "as --max-events allows"), or a switch
        compared += 1
        try:
            same = type(d)(text) == d
        except ValueError:
            same = False
        if not same:
            differ.append((flag, text, d))
    assert differ == [], f"opskew {command} --help states other defaults than it runs with: {differ}"
    if command in ("check", "matrix", "sweep", "advise", "profile"):
        assert compared >= 2  # the rule still reads this command's help


def test_a_wrapped_default_is_read_whole():
    _, entries = help_entries("sweep")
    assert "opskew-sweep" in entries["--out"] and help_defaults("sweep")["--out"] == "opskew-sweep"
