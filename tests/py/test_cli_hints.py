"""An unknown flag is refused by its command with the close matches among
that command's flags (issue 45: `--record_shapes` was refused with a pointer
to the top-level help, not "did you mean --record-shapes")."""

import pytest

from opskew.cli.main import main


def refused(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_underscore_for_dash_and_typos_get_the_commands_own_flags(capsys):
    err = refused(capsys, "profile", "--record_shapes", "-o", "out", "--", "python", "train.py")
    assert "did you mean --record-shapes?" in err and "`opskew profile --help`" in err
    err = refused(capsys, "check", "--with_stack", "--trails", "3")
    assert "--with_stack: did you mean --with-stack?" in err and "--trails: did you mean --trials" in err
    assert "`opskew check --help`" in err
    err = refused(capsys, "summary", "trace.json", "--sortt=self")
    assert "--sortt: did you mean --sort" in err


def test_every_command_suggests(capsys):
    from opskew.cli.main import COMMANDS

    for cmd in COMMANDS:
        assert "did you mean --json" in refused(capsys, cmd, "--jsno", "x") or cmd in ("record", "profile"), cmd
