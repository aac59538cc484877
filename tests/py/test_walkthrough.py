"""docs/walkthrough.md, run as written: each ```sh block's commands in order,
in one folder, and each ```text block under them checked against what they
printed (numbers and time units stand for any; `...` for any text). A
command the page shows that fails, or a line it quotes that the command no
longer prints, fails here."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "walkthrough.md"
BLOCK = re.compile(r"^```(sh|text)\n(.*?)^```", re.M | re.S)
NUM = r"[-+]?\d+(?:\.\d+)?(?:e[+-]?\d+)?"
TIME = NUM + r" (?:ns|us|ms|s)"


def steps(text: str) -> list:
    """[(commands, quoted lines)]: each sh block with the text block after it."""
    out = []
    for kind, body in BLOCK.findall(text):
        lines = [x for x in body.splitlines() if x.strip()]
        if kind == "sh":
            out.append((lines, []))
        else:
            assert out, "a quoted output before any command"
            out[-1][1].extend(lines)
    return out


def pattern(quoted: str) -> re.Pattern:
    """A quoted line as a pattern: a time (number and unit) matches any time,
    a number any number, `...` any text; the rest as written."""
    parts = re.split(r"(\.\.\.|" + TIME + "|" + NUM + ")", quoted)
    rx = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            rx.append(re.escape(part))
        elif part == "...":
            rx.append(".*")
        elif " " in part:
            rx.append(TIME)
        else:
            rx.append(NUM)
    return re.compile("".join(rx))


def test_the_pattern_of_a_quoted_line():
    p = pattern("true step 750 us [584 us, 1.05 ms] (x1.26, -79.9%, ...)")
    assert p.fullmatch("true step 1.2 ms [-3 ns, 2 s] (x0.8, +5%, significant)")
    assert p.fullmatch("true step 1.2 ms [-3 ns, 2 s] (x0.8, -5%, within noise)")
    assert not p.fullmatch("true step 1.2 ms (x0.8, -5%)")
    assert [len(c) for c, _ in steps(PAGE.read_text())] == [1, 1, 1, 2]


def test_the_walkthrough_runs_as_written(tmp_path):
    """The page's commands, each as a user types them (opskew and python
    from this environment), in one folder holding the page's train.py."""
    shutil.copy(ROOT / "docs" / "examples" / "train.py", tmp_path / "train.py")
    env = dict(os.environ, OPSKEW_CACHE_DIR=str(tmp_path / "cache"), OPSKEW_PROGRESS="0")
    opskew = [sys.executable, "-m", "opskew"]
    for commands, quoted in steps(PAGE.read_text()):
        printed = []
        for line in commands:
            argv = shlex.split(line)
            argv = [sys.executable if a == "python" else a for a in argv]
            argv = opskew + argv[1:] if argv[0] == "opskew" else argv
            p = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, f"{line}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
            printed += (p.stdout + p.stderr).splitlines()
        for q in quoted:
            rx = pattern(q.strip())
            assert any(rx.fullmatch(x.strip()) for x in printed), \
                f"{commands}: no line reads like {q!r}:\n" + "\n".join(printed[-40:])
