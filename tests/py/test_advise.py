"""`opskew advise`: the recommendation, the schedule and a snippet that runs as-is."""

import json
import os
import subprocess
import sys

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
    assert rec["options"] == {"record_shapes": True}  # shapes needed; nothing more
    assert set(r["candidates"]) == {"record_shapes", "with_flops"}
    sch = rec["schedule"]
    assert sch["wait"] >= 1 and sch["warmup"] == 1 and 1 <= sch["active"] <= 5 and sch["repeat"] == 1
    assert rec["estimate"]["trace_mb"] > 0
    assert "schedule=schedule(" in p.stdout and snip.read_text() == r["snippet"]
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
