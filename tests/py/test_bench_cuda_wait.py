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


def test_the_gpu_table_reads_both_benches(tmp_path):
    """bench/gpu_table.py: the table gpu_check.sh leaves, from the two benches' JSON."""
    wait = {"schema": "opskew.bench_cuda_wait/1", "device": "cuda", "workload": "cuda_train", "rounds": 2,
            "steps": 40, "settle": 8, "arms": {"bare": {"median_step_ns": 1.0e6, "over_bare": 1.0, "range": [1, 1]},
                                               "started": {"median_step_ns": 1.15e6, "over_bare": 1.15,
                                                           "range": [1.1, 1.2]}}}
    val = {"conditions": {"torch": "2.11.0+cu130", "machine": "H200", "schedule": "wait=21"},
           "rows": [{"workload": "cuda_train", "config": "minimal", "bare_step_ns": 1.0e6,
                     "report_corrected_step_ns": 1.05e6, "corrected_step_ns": 1.08e6,
                     "w_ns": {"median": 3000.0, "ci95": [2800.0, 3300.0]}, "marks": {"believable": 10},
                     "audit": {"stats": {"overhead_events": 2, "overhead_ns": 22400, "missing": 1, "orphans": 0,
                                         "bad_time": 0}, "warmup_short": False}},
                    {"workload": "cuda_launch", "config": "minimal", "error": "exit 1: boom"}]}
    (tmp_path / "w.json").write_text(json.dumps(wait))
    (tmp_path / "v.json").write_text(json.dumps(val))
    out = tmp_path / "table.md"
    p = subprocess.run([sys.executable, os.path.join(os.path.dirname(SCRIPT), "gpu_table.py"), "--wait",
                        str(tmp_path / "w.json"), "--validate", str(tmp_path / "v.json"), "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert "| started | 1150.0 us | 1.150x | [1.100, 1.200] |" in text
    assert "| cuda_train | minimal | 1000.0 us | 1050.0 us (+5.0%) | 1080.0 us (+8.0%) | 3000 ns [2800, 3300] | " \
           "believable 10 | overhead 2 (22.4 us); missing 1; orphans 0; bad time 0 |" in text
    assert "| cuda_launch | minimal | error: exit 1: boom |" in text
