"""`--setup` whose result is a tuple or a dict: passed as TARGET's
positional or keyword arguments where TARGET takes them so, else whole
(docs/commands.md, "`--setup`"): `advise train.py:train_step --setup batch`
with `batch()` returning `(x, y)` was refused."""

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import one_line_error, run_opskew
from opskew.errors import UsageError
from opskew.measure.workload import load_target

pytest.importorskip("torch")

WORKLOAD = """
    import torch
    calls = []
    def batch():
        return torch.ones(4), torch.ones(4)
    def named():
        return {"x": torch.ones(4), "y": torch.ones(4)}
    def pair_and_more():
        return torch.ones(4), torch.ones(4), torch.ones(4)
    def state():
        return {"model": torch.nn.Linear(4, 4), "x": torch.ones(1, 4)}
    def single():
        return torch.ones(4)
    def train_step(x, y):
        calls.append(("train_step", len(x), len(y)))
        torch.add(x, y)
    def takes_state(s):
        calls.append(("takes_state", type(s).__name__))
    def takes_any(*args):
        calls.append(("takes_any", len(args)))
"""


@pytest.fixture
def wl(tmp_path):
    f = tmp_path / "train.py"
    f.write_text(textwrap.dedent(WORKLOAD))
    return f


@pytest.mark.parametrize("fn,setup,how,call", [
    ("train_step", "batch", "positional", ("train_step", 4, 4)),
    ("train_step", "named", "keywords", ("train_step", 4, 4)),
    ("takes_state", "state", "whole", ("takes_state", "dict")),       # a dict of other keys: whole, as before
    ("takes_state", "batch", "whole", ("takes_state", "tuple")),      # one parameter, a tuple of 2: whole
    ("takes_state", "single", "whole", ("takes_state", "Tensor")),
    ("takes_any", "pair_and_more", "positional", ("takes_any", 3)),
])
def test_the_setup_result_is_passed_by_the_rule(wl, fn, setup, how, call):
    w = load_target(f"{wl}:{fn}", device="cpu", setup=setup)
    assert w.params["setup_passes"] == how
    calls = w.namespace["calls"]
    calls.clear()
    w.iteration()
    assert calls == [call]


def test_a_target_that_cannot_take_the_result_is_refused_in_one_line(wl):
    with pytest.raises(UsageError, match=r"train_step\(x, y\) cannot take what --setup returned, a tuple of 3"):
        load_target(f"{wl}:train_step", device="cpu", setup="pair_and_more")
    with pytest.raises(UsageError, match="a Tensor"):
        load_target(f"{wl}:train_step", device="cpu", setup="single")
    p = run_opskew("check", f"{wl}:train_step", "--setup", "single", "--trials", "2", "--iters", "1")
    one_line_error(p, "cannot take what --setup returned")


def test_advise_with_a_tuple_setup_and_its_snippet(wl, tmp_path):
    snip = tmp_path / "snippet.py"
    p = run_opskew("advise", f"{wl}:train_step", "--setup", "batch", "--trials", "3", "--iters", "3",
                   "--cold-iters", "8", "--no-budget", "--snippet-out", str(snip), "--json", "-", cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["conditions"]["workload"]["setup_passes"] == "positional"
    assert "workload.train_step(*state)" in r["snippet"]
    s = subprocess.run([sys.executable, str(snip)], cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert s.returncode == 0, s.stderr


def test_help_states_the_rule():
    for cmd in ("check", "matrix", "advise", "calibrate"):
        text = " ".join(run_opskew(cmd, "--help").stdout.split())
        assert "a tuple is passed as positional arguments and a dict as keyword arguments" in text, cmd
