"""`opskew advise`: the recommendation, the schedule and a snippet that runs as-is."""

import json
import os
import subprocess
import sys

import pytest

WL = os.path.join(os.path.dirname(__file__), "workloads", "wl.py")
FAST = ("--trials", "3", "--iters", "3", "--cold-iters", "8")


def run_snippet(path, cwd):
    p = subprocess.run([sys.executable, str(path)], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    trace = json.loads((cwd / "opskew-advised-trace.json").read_text())
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]


def test_snippet_for_user_training_step_runs_and_traces(opskew, tmp_path):
    snip = tmp_path / "snippet.py"
    js = tmp_path / "a.json"
    p = opskew("advise", f"{WL}:mlp_step", "--setup", "mlp_setup", "--need", "shapes", *FAST,
               "--snippet-out", str(snip), "--json", str(js))
    assert p.returncode == 0, p.stderr
    r = json.loads(js.read_text())
    rec = r["recommended"]
    # Shapes needed, nothing more: both candidates record shapes (with_flops
    # implies them); which is cheaper is a timing, so the test checks the rule
    # (the smallest measured W wins) rather than which one a noisy run picks.
    assert set(r["candidates"]) == {"record_shapes", "with_flops"}
    assert rec["options"] in ({"record_shapes": True}, {"with_flops": True})
    cheapest = min(r["candidates"], key=lambda k: r["candidates"][k]["in_window_per_event_ns"]["median"])
    assert rec["name"] == cheapest and rec["options"] == r["candidates"][cheapest]["options"]
    for opt in rec["options"]:
        assert f"    {opt}=True," in r["snippet"]
    for opt in ("with_stack", "profile_memory", "with_modules"):
        assert opt not in r["snippet"]
    sch = rec["schedule"]
    assert sch["wait"] >= 1 and sch["warmup"] == 1 and 1 <= sch["active"] <= 5 and sch["repeat"] == 1
    assert rec["estimate"]["trace_mb"] > 0
    # The snippet pays stop and export, never key_averages()'s post-processing.
    c, est = r["candidates"][rec["name"]], rec["estimate"]
    assert est["stop_export_s"] == pytest.approx(est["events"] * (c["stop_per_event_ns"]
                                                                  + c["export_per_event_ns"]) * 1e-9)
    assert "schedule=schedule(" in p.stdout and snip.read_text() == r["snippet"]
    # The same options under opskew.profile, with the wait its pairing needs.
    from opskew.profiler import REF_WAIT

    sc = rec["self_correcting"]
    assert sc["schedule"]["wait"] == REF_WAIT and sc["schedule"]["active"] >= 2
    # What each capture shape gets, as opskew.profile's evidence rule gives it.
    for shape in ("start()/stop() with unprofiled steps", "outermost module's forward", "in-process model"):
        assert shape in sc["captures"]
    flag = "--" + next(iter(rec["options"])).replace("_", "-")
    assert sc["command"].startswith("opskew profile -o OUT") and flag in sc["command"]
    assert sc["command"].endswith(" -- python train.py") and "--device" not in sc["command"]
    assert f"{next(iter(rec['options']))}=True" in sc["python"] and f"wait={REF_WAIT}" in sc["python"]
    assert sc["command"] in p.stdout and "corrected traces:" in p.stdout
    ops = run_snippet(snip, tmp_path)
    names = {e["name"] for e in ops}
    assert "aten::addmm" in names or "aten::linear" in names
    assert any("Input Dims" in e.get("args", {}) for e in ops)  # shapes were recorded
    # Only the active iterations are in the trace: about active x events per iteration.
    per_iter = r["events_per_iter"]
    assert 0.5 * sch["active"] * per_iter <= len(ops) <= 2 * sch["active"] * per_iter + 50


def test_snippet_for_builtin_workload_minimal(opskew, tmp_path):
    snip = tmp_path / "s.py"
    p = opskew("advise", "--calls", "100", *FAST, "--snippet-out", str(snip))
    assert p.returncode == 0, p.stderr
    text = snip.read_text()
    assert "record_shapes" not in text and "with_stack" not in text  # the cheapest: minimal
    ops = run_snippet(snip, tmp_path)
    assert sum(e["name"] == "aten::add" for e in ops) % 100 == 0 and ops


def test_scope_compares_submodule_with_whole_step(opskew, tmp_path):
    js = tmp_path / "s.json"
    p = opskew("advise", f"{WL}:mlp_step", "--setup", "mlp_setup", "--scope", "model.encoder", *FAST,
               "--json", str(js))
    assert p.returncode == 0, p.stderr
    assert "Toggling" not in p.stderr
    sc = json.loads(js.read_text())["scope"]
    assert sc["path"] == "model.encoder"
    # The encoder's forward (3 layers) records far fewer events than the whole step.
    assert 0 < sc["scoped_events_per_iter"] < sc["whole_events_per_iter"] / 2
    assert len(sc["difference_ci95_s"]) == 2


def test_scope_errors(opskew):
    p = opskew("advise", f"{WL}:mlp_step", "--setup", "mlp_setup", "--scope", "nothing.here", *FAST)
    assert p.returncode == 2 and "is not a global" in p.stderr
    p = opskew("advise", f"{WL}:mlp_step", "--setup", "mlp_setup", "--scope", "opt", *FAST)
    assert p.returncode == 2 and "not a torch.nn.Module" in p.stderr


def _result_for(stable_from, wait):
    from opskew.experiments.advise import wait_reason

    st = {"first_iter_s": 1e-3, "steady_per_iter_s": 1e-3, "stable_from_iter": stable_from,
          "cold_iters_timed": 8, "rule": "running median of 3 within 20% of the last third's median"}
    sch = {"wait": wait, "warmup": 1, "active": 2, "repeat": 1}
    return {"conditions": {"workload": {"description": "w"}, "torch": "t", "device": "cpu", "cpu": "c",
                           "threads": 1},
            "status": "complete", "stabilization": st, "baseline_per_iter_s": 1e-3, "events_per_iter": 10,
            "candidates": {},
            "recommended": {"name": "minimal", "label": "minimal", "schedule": sch,
                            "why": "cheapest; " + wait_reason(sch, st) + "; active=2",
                            "estimate": {"events": 20, "trace_mb": 0.01, "active_slowdown": 0.1,
                                         "stop_export_s": 1e-3}}}


def test_wait_wording_agrees_with_the_stabilization():
    """Issue 13: 'stable from iteration 0' and 'wait skips the 1 iteration(s)
    before the time stabilizes' were printed together."""
    import io

    from opskew.experiments.advise import schedule_for
    from opskew.render.advise import print_human

    for stable_from in (0, 1, 4):
        sch = schedule_for(10, stable_from, 50_000)
        res = _result_for(stable_from, sch["wait"])
        buf = io.StringIO()
        print_human(res, buf)
        text = buf.getvalue()
        assert f"stable from iteration {stable_from} " in text
        if stable_from == 0:
            assert "before the time stabilizes" not in text and "only a margin" in text
        else:
            assert f"skips the {stable_from} iteration(s) before the time stabilizes" in text
        assert "15%" not in text  # one rule, one threshold (20%)


def test_budget_line_through_two_sizes():
    from opskew.measure import budget

    pts = [{"iters": 10, "trace_bytes": 1_000_000 + 10 * 50_000, "stop_s": 0.01, "export_s": 0.02,
            "peak_added_bytes": None}] * 2 + [
          {"iters": 40, "trace_bytes": 1_000_000 + 40 * 50_000, "stop_s": 0.04, "export_s": 0.05,
           "peak_added_bytes": None}] * 2
    m = {k: budget._line(pts, k) for k in ("trace_bytes", "stop_s", "export_s", "peak_added_bytes")}
    assert m["trace_bytes"] == pytest.approx({"fixed": 1_000_000, "per_iter": 50_000})
    assert m["peak_added_bytes"] is None  # not measured: no line
    c = budget.at(m, 100)
    assert c["trace_bytes"] == pytest.approx(6_000_000) and c["stop_export_s"] == pytest.approx(0.1 + 0.11)
    assert c["peak_added_bytes"] is None
    assert any("symbolizes each distinct Python stack" in w for w in budget.weak_points({"with_stack": True}, "cpu", True))


def test_budget_before_capture_against_the_capture(opskew, tmp_path):
    """`--active 20`: the budget of a cycle of 20 active iterations, from
    probes of 5 and 20 iterations; the advised snippet's trace lands within
    30% of the size it gives (sizes are steady; the times and memory are
    checked against the capture by bench/bench_capture_budget.py)."""
    snip, js = tmp_path / "s.py", tmp_path / "a.json"
    p = opskew("advise", f"{WL}:mlp_step", "--setup", "mlp_setup", *FAST, "--active", "20",
               "--snippet-out", str(snip), "--json", str(js))
    assert p.returncode == 0, p.stderr
    rec = json.loads(js.read_text())["recommended"]
    assert rec["schedule"]["active"] == 20
    b = rec["budget"]
    assert [pt["iters"] for pt in b["probes"]] == [5, 20, 5, 20]
    c = b["cycle"]
    assert c["iters"] == 20 and c["trace_bytes"] > 0 and c["stop_export_s"] > 0
    assert c["peak_added_bytes"] > 0  # Linux lets the process reset its peak (clear_refs)
    assert b["profile_cycle"]["iters"] == 7
    assert "budget per cycle of 20 active iteration(s): trace " in p.stdout and "weak where: " in p.stdout
    run_snippet(snip, tmp_path)
    size = (tmp_path / "opskew-advised-trace.json").stat().st_size
    assert abs(c["trace_bytes"] / size - 1) <= 0.3, (c["trace_bytes"], size)
    p = opskew("advise", "--active", "0", *FAST)
    assert p.returncode == 2 and "--active must be at least 1" in p.stderr
