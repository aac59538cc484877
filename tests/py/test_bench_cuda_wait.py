"""bench/bench_cuda_wait.py (issue 36's diagnosis): it refuses bad input,
skips cleanly without a GPU, and an arm times its steps in its own process."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "bench_cuda_wait.py")


def _run(*args, timeout=120):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args", [("--rounds", "0"), ("--steps", "2"), ("--settle", "30", "--wait", "21")])
def test_bad_input_is_refused(args):
    p = _run("--device", "cpu", *args)
    assert p.returncode == 2 and "must be at least" in p.stderr, p.stderr


def test_without_a_gpu_the_cuda_run_says_so_and_succeeds(has_cuda):
    if has_cuda:
        pytest.skip("a CUDA device is present")
    p = _run("--device", "cuda")
    assert p.returncode == 0 and "no CUDA device" in p.stderr, p.stderr


@pytest.mark.parametrize("arm", ["bare", "started", "between-cycles"])
def test_an_arm_times_its_steps(arm):
    p = _run("--child", arm, "--device", "cpu", "--steps", "5", "--settle", "1", "--wait", "3",
             "--trace-steps", "1")
    assert p.returncode == 0, p.stderr
    steps = json.loads(p.stdout.strip().splitlines()[-1])
    # between-cycles: the wait steps of cycles 2 and 3 past the settle (2 each).
    assert len(steps) == (4 if arm == "between-cycles" else 5) and all(s > 0 for s in steps)
