"""bench/bench_wait_steps.py, bench/bench_wait_positions.py,
bench/bench_pairing.py, bench/bench_after_effect.py, bench/bench_verdict.py and
bench/bench_tracer_ir.py, the diagnostic benchmarks behind docs/profile-validation.md
("What it is", run I, "The leaf outside in every run"), docs/profile.md ("The verdict")
and docs/tracer.md (the instruction counts): they run, refuse bad input, and
print a row per kind. Behaviour only: no speed threshold."""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from conftest import seed_native_cache  # noqa: E402

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


def run(script, args, tmp_path, timeout=300):
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"), OPSKEW_CACHE_DIR=str(tmp_path / "cache"))
    os.makedirs(env["TMPDIR"], exist_ok=True)
    seed_native_cache(env["OPSKEW_CACHE_DIR"])  # opskew.profile's ranges use the shim: built once per run
    return subprocess.run([sys.executable, os.path.join(BENCH, script), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_wait_steps_times_pairs_of_bodies_under_each_kind(tmp_path):
    p = run("bench_wait_steps.py", ["--workloads", "tiny_loop", "--configs", "minimal", "--rounds", "1"], tmp_path)
    assert p.returncode == 0, p.stderr
    rows = [ln for ln in p.stdout.splitlines() if ln.startswith("tiny_loop")]
    assert [ln.split()[2] for ln in rows] == ["bare", "torch", "opskew"], p.stdout
    for ln in rows:
        m = re.search(r"first slower in (\d+)/(\d+)", ln)
        assert m and int(m.group(2)) == 36, ln  # 6 cycles x 6 warm wait steps, or 36 bare pairs
    # step() is timed only where a profiler runs
    assert rows[0].rstrip().endswith("-") and rows[1].rstrip().endswith("us")
    left = [n for n in os.listdir(tmp_path / "tmp") if n.startswith("opskew-")]
    assert not left, f"temporary folders left behind: {left}"


def test_wait_positions_prints_each_kind_by_position(tmp_path):
    p = run("bench_wait_positions.py", ["--workload", "tiny_loop", "--wait", "6", "--rounds", "1"], tmp_path)
    assert p.returncode == 0, p.stderr
    rows = {ln.split()[0]: ln for ln in p.stdout.splitlines() if ln.split()[:1] in (["torch"], ["torch+export"],
                                                                                 ["opskew"])}
    assert list(rows) == ["torch", "torch+export", "opskew"], p.stdout
    for ln in rows.values():
        cells = ln.split("paired")[0].split()[1:]
        assert len(cells) == 6 + 1 + 7, ln  # every position of a cycle: wait, warmup, active
        assert re.search(r"paired \(last 6 wait\) [+-]\d+\.\d%, positions 2-7 [+-]\d+\.\d%$", ln), ln
    left = [n for n in os.listdir(tmp_path / "tmp") if n.startswith("opskew-")]
    assert not left, f"temporary folders left behind: {left}"


def test_pairing_compares_two_bare_processes_each_way(tmp_path):
    p = run("bench_pairing.py", ["--workload", "tiny_loop", "--pairs", "1", "--turns", "3", "--chunk", "4"],
            tmp_path, timeout=180)
    assert p.returncode == 0, p.stderr
    for kind in ("sequential", "lockstep"):
        assert re.search(kind + r" +\|second/first - 1\|: median \d+\.\d%, largest \d+\.\d% over 1 pairs",
                         p.stdout), p.stdout
        assert re.search(r"pair 1 " + kind + r" +\d+\.\d +\d+\.\d us", p.stderr), p.stderr
    left = [n for n in os.listdir(tmp_path / "tmp") if n.startswith("opskew-")]
    assert not left, f"temporary folders left behind: {left}"


def test_after_effect_prints_every_burst_against_none(tmp_path):
    p = run("bench_after_effect.py", ["--workload", "tiny_loop", "--rounds", "1", "--steps", "18"], tmp_path)
    assert p.returncode == 0, p.stderr
    kinds = ["none", "py-objects", "c-heap", "big-block", "profiler", "opskew-trace"]
    tables = p.stdout.split("\n\n")[1:]
    assert len(tables) == 2 and tables[0].startswith("probe:") and tables[1].startswith("step body"), p.stdout
    for t in tables:
        rows = t.strip().splitlines()[2:]
        assert [r.split()[0] for r in rows] == kinds, t
        for r in rows:
            ratios = re.findall(r"\d+\.\d (\d+\.\d\d)x", r)
            assert len(ratios) == 8, r  # steps 1, 2, 3, 5, 9, 13, 17 and the last
            if r.startswith("none"):
                assert set(ratios) == {"1.00"}, r
    assert "torch 2." in p.stdout.splitlines()[0] and "tiny_loop" in p.stdout.splitlines()[0]


def test_verdict_prints_both_arms_per_trace(tmp_path):
    p = run("bench_verdict.py", ["--steps", "2", "--configs", "minimal", "--repeat", "1"], tmp_path)
    assert p.returncode == 0, p.stderr
    rows = [ln.split() for ln in p.stdout.splitlines() if ln.startswith("minimal")]
    assert len(rows) == 1 and rows[0][1] == "2", p.stdout
    serial, threads, ratio, rss1, rss2 = rows[0][3:8]
    assert float(serial) > 0 and float(threads) > 0 and ratio.endswith("x")
    assert float(rss1) > 10 and float(rss2) > 10  # MiB of a process with torch imported
    assert not [n for n in os.listdir(tmp_path / "tmp") if n.startswith("opskew-")]


# Each bench's refusals: (its arguments, what its one-line usage error says).
BAD_ARGUMENTS = {
    "bench_verdict.py": [("--steps 0", "--steps and --repeat must be at least 1"),
                         ("--configs nope", "--configs: unknown nope")],
    "bench_after_effect.py": [("--steps 17", "--steps at least 18"), ("--workload cuda_train", "--workload: one of")],
    "bench_pairing.py": [("--chunk 1", "--chunk at least 2"), ("--workload cuda_train", "--workload: one of")],
    "bench_wait_positions.py": [("--wait 5", "--wait must be at least 6"),
                                ("--workload nope", "--workload is one of")],
    "bench_wait_steps.py": [("--workloads nope", "unknown: nope"), ("--rounds 0", "--rounds must be at least 1")],
    "bench_tracer_ir.py": [("--rows nope", "unknown rows: nope"), ("--ops 0", "--ops must be at least 1")],
}


@pytest.mark.parametrize("script,args,want", [(script, args.split(), want)
                                              for script, cases in BAD_ARGUMENTS.items() for args, want in cases])
def test_bad_arguments_are_usage_errors(tmp_path, script, args, want):
    p = run(script, args, tmp_path, timeout=120)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert want in p.stderr
