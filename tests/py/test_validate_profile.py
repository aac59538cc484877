"""bench/validate_profile.py, the validation suite of opskew.profile: it runs
end to end on one small workload with tiny settings and writes the rows and
fields its documentation (docs/profile-validation.md) reads. Behaviour only:
no speed or accuracy threshold (CI machines are noisy)."""

import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from conftest import seed_native_cache  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "validate_profile.py")
TINY = ["--workloads", "tiny_loop", "--rounds", "1", "--wait", "8", "--active", "7", "--repeat", "2",
        "--bare-s", "0.2", "--warmup-s", "0.1", "--min-bare-steps", "10", "--tracer-steps", "5",
        "--no-calibrate"]


def run(args, tmp_path, timeout=240):
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"), OPSKEW_CACHE_DIR=str(tmp_path / "cache"))
    os.makedirs(env["TMPDIR"], exist_ok=True)
    seed_native_cache(env["OPSKEW_CACHE_DIR"])  # opskew.profile's ranges use the shim: built once per run
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_help_explains_the_suite(tmp_path):
    p = run(["--help"], tmp_path, timeout=60)
    assert p.returncode == 0, p.stderr
    for word in ("opskew.profile", "--configs", "--workloads", "--json", "bare", "tracer", "schedule"):
        assert word in p.stdout


def test_unknown_workload_is_a_usage_error(tmp_path):
    p = run(["--workloads", "nope"], tmp_path, timeout=60)
    assert p.returncode == 2
    assert "unknown workload" in p.stderr


def test_one_workload_end_to_end(tmp_path):
    out = tmp_path / "rows.json"
    p = run([*TINY, "--configs", "minimal,record_shapes+with_stack", "--json", str(out)], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    # Progress on stderr, the table on stdout.
    assert "[1/1] tiny_loop" in p.stderr
    assert "| tiny_loop | minimal |" in p.stdout
    assert "| tiny_loop | record_shapes+with_stack |" in p.stdout
    assert "rows within 10% of the bare step" in p.stdout

    data = json.loads(out.read_text())
    assert data["schema"] == "opskew.validate_profile/1"
    assert "validate_profile.py" in data["command"]
    cond = data["conditions"]
    for k in ("torch", "machine", "threads", "schedule", "calibrated", "wall_s"):
        assert k in cond
    assert cond["pairing"] == "lockstep" and cond["chunk"] == 16
    assert cond["calibrated"] is False
    rows = data["rows"]
    assert [(r["workload"], r["config"]) for r in rows] == [("tiny_loop", "minimal"),
                                                             ("tiny_loop", "record_shapes+with_stack")]
    for r in rows:
        assert "error" not in r, r.get("error")
        assert r["threads"] == 1
        assert len(r["rounds"]) == 1
        # 2 cycles of 7 active steps, the first of each cold: 12 pairs at most.
        assert 6 <= r["pairs"] <= 12
        assert r["w_source"].startswith("in-run")
        assert set(r["w_ns"]) >= {"median", "ci95", "ci_coverage"} and len(r["w_ns"]["ci95"]) == 2
        assert r["w_micro_ns"] is None  # --no-calibrate
        assert r["events_per_active_step"] == 200
        for k in ("bare_step_ns", "raw_step_ns", "corrected_step_ns", "in_loop_wait_step_ns",
                  "in_loop_active_step_ns", "report_corrected_step_ns"):
            assert r[k] > 0, k
        assert isinstance(r["corrected_step_err"], float) and isinstance(r["raw_step_err"], float)
        assert isinstance(r["pass"], bool)
        inside, rounds = r["bare_in_w_band_rounds"]
        assert rounds == 1 and inside in (0, 1)
        lo, hi = r["rounds"][0]["report_corrected_step_w_ci_ns"]
        assert lo <= r["report_corrected_step_ns"] <= hi
        assert r["rounds"][0]["bare_in_w_band"] == (lo <= r["rounds"][0]["bare_step_ns"] <= hi)
        assert r["corrected_cycles"] >= 1
        rd = r["rounds"][0]
        # Lockstep: one bare partner, which took a turn before the tracers
        # and one before each of the 2 cycles.
        assert len(rd["bare_runs_ns"]) == 1
        assert len(rd["bare_turn_medians_ns"]) == 3 and all(t > 0 for t in rd["bare_turn_medians_ns"])
        cycles = rd["cycles"]
        assert len(cycles) == 2
        # Every corrected trace's ProfilerStep#N events were read: 7 active
        # steps per cycle.
        assert all(len(c["corrected_steps_ns"]) == 7 for c in cycles if "corrected_steps_ns" in c)
        leaf = r["leaf"]
        assert leaf["compared"] >= 1 and 0 <= leaf["agree"] <= leaf["compared"]
        assert leaf["worst"]["name"] == "aten::add"
        # Only disagreeing leaves are counted inside their interval, and
        # only where the tracer's figure lies in it (each end within the tolerance).
        dis = {d["name"] for d in leaf["disagree"]}
        assert set(leaf["within_interval"]) <= dis
        for a in leaf["all"]:
            lo, hi = a["interval_ns"]
            assert lo <= a["profile_ns"] <= hi
            tol = max(0.15 * a["opskew_ns"], 100.0)
            assert (a["name"] in leaf["within_interval"]) == (a["name"] in dis and lo - tol <= a["opskew_ns"] <= hi + tol)
    assert re.search(r"leaves within 15% or 100 ns of opskew's tracer; of the others, \d+ lie inside opskew's 95% "
                     r"interval", p.stdout)
    # The suite removes its temporary folder (traces, cache, children's output).
    assert not [n for n in os.listdir(tmp_path / "tmp") if n.startswith("opskew-validate-profile-")]


def test_sequential_pairing_compares_with_the_processes_around(tmp_path):
    out = tmp_path / "rows.json"
    p = run([*TINY, "--configs", "minimal", "--pairing", "sequential", "--tracer-steps", "0", "--json", str(out)],
            tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "between two bare ones" in p.stdout
    (r,) = json.loads(out.read_text())["rows"]
    assert "error" not in r, r.get("error")
    rd = r["rounds"][0]
    assert len(rd["bare_runs_ns"]) == 2 and all(b > 0 for b in rd["bare_runs_ns"])  # before and after
    assert "bare_turn_medians_ns" not in rd and r["bare_step_ns"] > 0


def _load():
    import importlib.util

    spec = importlib.util.spec_from_file_location("validate_profile", SCRIPT)
    vp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vp)
    return vp


def test_a_partner_that_dies_does_not_hang_the_other(tmp_path, monkeypatch):
    """Lockstep: the bare partner exits at once (as a crash would); the
    profiled process reads the end of the pipe, goes on alone and finishes;
    the bare side reports its failure."""
    vp = _load()
    seed_native_cache(str(tmp_path / "cache"))  # from the run's cache: before OPSKEW_CACHE_DIR names this one
    for k, v in (("TMPDIR", str(tmp_path / "tmp")), ("OPSKEW_CACHE_DIR", str(tmp_path / "cache"))):
        monkeypatch.setenv(k, v)
    os.makedirs(tmp_path / "tmp")
    real = vp._child_cmd

    def cmd(kind, *a, **k):
        c, out = real(kind, *a, **k)
        return ([sys.executable, "-c", "import sys; sys.exit(3)"] if kind == "bare" else c), out

    monkeypatch.setattr(vp, "_child_cmd", cmd)
    args = vp.parse([*TINY, "--configs", "minimal", "--tracer-steps", "0", "--child-timeout", "120"])
    prof, bare = vp.run_pair("tiny_loop", args, str(tmp_path), "minimal")
    assert "error" in bare and "exit 3" in bare["error"]
    assert "error" not in prof, prof.get("error")
    assert prof["corrected_cycles"] >= 1 and prof["steps"] == 32


def test_the_cuda_workload_runs_only_when_named(tmp_path):
    """cuda_train needs a GPU: not in the default list; named without one,
    its row fails with the reason and the run still ends with the table."""
    vp = _load()
    assert "cuda_train" in vp.WORKLOADS and "cuda_train" not in vp.parse([]).workloads
    assert vp.parse(["--workloads", "cuda_train"]).workloads == ["cuda_train"]
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here: the no-GPU row is not checked")
    p = run(["--workloads", "cuda_train", "--configs", "minimal", "--rounds", "1", "--no-calibrate",
             "--bare-s", "0.1", "--warmup-s", "0.1"], tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "this torch sees no CUDA device" in p.stdout and "0/1 rows" in p.stdout
