"""`opskew record` end to end, against real torch (no mocks): the issue's
acceptance runs, plus failure paths (exception, SIGTERM, SIGINT, bad input)."""

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.profiler.itt.is_available(), reason="torch built without ITT")

PY = sys.executable


def record(tmp_path, *cmd, extra=(), timeout=240, **kw):
    # These are the ITT route's acceptance runs, named explicitly now that
    # auto means native (test_native.py holds the native route's).
    out = tmp_path / "t.json"
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(out), "--instrument", "itt", *extra, "--", *cmd],
                       capture_output=True, text=True, timeout=timeout, cwd=tmp_path, **kw)
    return p, out


def complete_events(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def assert_nested(events):
    """Every event at depth d > 0 lies inside an event at depth d-1 of its thread."""
    by_tid = collections.defaultdict(list)
    for e in events:
        by_tid[e["tid"]].append(e)
    for tid, evs in by_tid.items():
        evs.sort(key=lambda e: (e["ts"], e["args"]["depth"]))
        stack = []
        for e in evs:
            d = e["args"]["depth"]
            while stack and stack[-1]["args"]["depth"] >= d:
                stack.pop()
            if d > 0:
                assert stack and stack[-1]["args"]["depth"] == d - 1, f"orphan on {tid}: {e}"
                parent = stack[-1]
                # microsecond strings with 3-digit fractions: compare in ns
                assert round(e["ts"] * 1000) >= round(parent["ts"] * 1000)
                assert round((e["ts"] + e["dur"]) * 1000) <= round((parent["ts"] + parent["dur"]) * 1000) + 1
            stack.append(e)


def test_acceptance_100000_adds(tmp_path):
    code = "import torch; a=torch.ones(1); [torch.add(a,a) for _ in range(100000)]"
    p, out = record(tmp_path, PY, "-c", code)
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    trace = json.loads(text)
    adds = [e for e in complete_events(trace) if e["name"] == "aten::add"]
    lost = trace["opskew"]["lost"]["total"]
    # Exactly 100000, or every missing one counted as lost (the test says which).
    assert len(adds) + lost == 100000, f"{len(adds)} events + {lost} lost"
    assert lost == 0, f"{lost} events lost: {trace['opskew']['lost']}"
    assert len(adds) == 100000
    # Kineto's conventions.
    assert trace["schemaVersion"] == 1 and "baseTimeNanoseconds" in trace
    e = adds[0]
    assert e["cat"] == "cpu_op" and e["pid"] > 0 and e["tid"] > 0 and e["dur"] >= 0
    assert re.search(r'"ts":\d+\.\d{3},"dur":\d+\.\d{3}', text)
    assert not re.search(r'"(ts|dur)":-?\d+(,|\.\d{1,2}[,}]|\.\d{4})', text)
    meta = [m for m in trace["traceEvents"] if m["ph"] == "M"]
    assert {m["name"] for m in meta} == {"process_name", "thread_name"}
    osk = trace["opskew"]
    assert osk["instrument"] == "itt" and osk["events"] == len(complete_events(trace))
    assert osk["calibration"]["w_ns"] > 0 and osk["calibration"]["delta_ns"] >= 0
    assert osk["clock"]["kind"] in ("tsc", "monotonic_raw") and osk["clock"]["ns_per_tick"] > 0
    assert "100003 events" in p.stderr and "lost 0" in p.stderr


MLP = """
import threading, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 16), torch.randn(8, 4)
opt.zero_grad()
loss = torch.nn.functional.mse_loss(model(x), y)
loss.backward()
opt.step()
# On CPU, autograd runs the backward graph on the thread that called
# backward(); record which one, and do a second step from another thread.
open("tids.txt", "w").write(str(threading.get_native_id()))
def step():
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    open("tids.txt", "a").write(" " + str(threading.get_native_id()))
t = threading.Thread(target=step); t.start(); t.join()
"""


def test_mlp_training_step_backward_nested(tmp_path):
    (tmp_path / "mlp.py").write_text(MLP)
    p, out = record(tmp_path, PY, "mlp.py")
    assert p.returncode == 0, p.stderr
    trace = json.loads(out.read_text())
    events = complete_events(trace)
    assert trace["opskew"]["lost"]["total"] == 0
    main_tid, worker_tid = map(int, (tmp_path / "tids.txt").read_text().split())
    names = collections.Counter(e["name"] for e in events)
    for n in ("aten::linear", "aten::addmm", "aten::relu", "aten::mse_loss",
              "AddmmBackward0", "ReluBackward0", "MseLossBackward0"):
        assert names[n] >= 1, n
    assert any(n.startswith("Optimizer.step#SGD") for n in names) or names["aten::add_"] >= 1
    backward = [e for e in events if e["name"].startswith("autograd::engine::evaluate_function: ")]
    assert backward
    tids = {e["tid"] for e in backward}
    # Backward ran on autograd's thread for each call: the calling thread (CPU).
    assert tids == {main_tid, worker_tid}
    for e in backward:  # each engine step wraps its node, which wraps aten ops
        node = e["name"].split(": ", 1)[1]
        inner = [c for c in events if c["tid"] == e["tid"] and c["name"] == node and c["args"]["depth"] == e["args"]["depth"] + 1
                 and c["ts"] >= e["ts"] and c["ts"] + c["dur"] <= e["ts"] + e["dur"] + 0.001]
        assert inner, f"{node} not nested in its engine step"
    addmm_bw = [e for e in events if e["name"] == "AddmmBackward0"]
    assert any(c["name"] == "aten::mm" and c["tid"] == b["tid"] and c["args"]["depth"] > b["args"]["depth"]
               and b["ts"] <= c["ts"] <= b["ts"] + b["dur"] for b in addmm_bw for c in events)
    assert_nested(events)
    threads = {m["tid"] for m in trace["traceEvents"] if m["ph"] == "M" and m["name"] == "thread_name"}
    assert {main_tid, worker_tid} <= threads


THREADS = """
import threading, torch
a = torch.ones(1)
def work():
    for _ in range(50000):
        torch.add(a, a)
ts = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
"""


def test_four_threads_200000_events(tmp_path):
    (tmp_path / "threads.py").write_text(THREADS)
    p, out = record(tmp_path, PY, "threads.py")
    assert p.returncode == 0, p.stderr
    trace = json.loads(out.read_text())
    assert trace["opskew"]["lost"]["total"] == 0
    adds = [e for e in complete_events(trace) if e["name"] == "aten::add"]
    assert len(adds) == 200000
    per_tid = collections.Counter(e["tid"] for e in adds)
    assert sorted(per_tid.values()) == [50000] * 4
    for e in adds:  # none torn: every field intact
        assert e["cat"] == "cpu_op" and e["args"]["depth"] == 0 and e["dur"] >= 0 and e["ts"] >= 0
    # Within a thread, events do not overlap (they are sequential leaves).
    for tid in per_tid:
        evs = sorted((e for e in adds if e["tid"] == tid), key=lambda e: e["ts"])
        for a, b in zip(evs, evs[1:]):
            assert round((a["ts"] + a["dur"]) * 1000) <= round(b["ts"] * 1000)


def test_trace_written_when_script_raises(tmp_path):
    code = "import torch\na=torch.ones(1)\nfor _ in range(1000): torch.add(a,a)\nraise RuntimeError('boom')"
    p, out = record(tmp_path, PY, "-c", code)
    assert p.returncode == 4, p.stderr  # EXIT_WORKLOAD
    assert "RuntimeError: boom" in p.stderr
    adds = [e for e in complete_events(json.loads(out.read_text())) if e["name"] == "aten::add"]
    assert len(adds) == 1000


LOOP = """
import os, torch
a = torch.ones(1)
n = 0
while True:
    torch.add(a, a)
    n += 1
    if n == 2000:
        open("started", "w").close()
"""


def _run_until_started(tmp_path, **popen_kw):
    (tmp_path / "loop.py").write_text(LOOP)
    out = tmp_path / "t.json"
    proc = subprocess.Popen([PY, "-m", "opskew", "record", "-o", str(out), "--instrument", "itt", "--", PY, "loop.py"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen_kw)
    deadline = time.monotonic() + 120
    while not (tmp_path / "started").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return proc, out


def test_trace_written_on_sigterm_to_opskew(tmp_path):
    proc, out = _run_until_started(tmp_path)
    proc.send_signal(signal.SIGTERM)  # forwarded to the child
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    trace = json.loads(out.read_text())
    adds = [e for e in complete_events(trace) if e["name"] == "aten::add"]
    assert len(adds) >= 2000
    assert trace["opskew"]["lost"]["total"] == 0


def test_trace_written_on_ctrl_c(tmp_path):
    # A terminal's Ctrl-C signals the whole foreground process group.
    proc, out = _run_until_started(tmp_path, start_new_session=True)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "KeyboardInterrupt" in err
    adds = [e for e in complete_events(json.loads(out.read_text())) if e["name"] == "aten::add"]
    assert len(adds) >= 2000


def test_summary_table_and_json(tmp_path):
    code = "import torch; a=torch.ones(2); [torch.mul(torch.add(a,a),a) for _ in range(500)]"
    p, _ = record(tmp_path, PY, "-c", code, extra=("--summary",))
    assert p.returncode == 0, p.stderr
    assert "aten::add" in p.stdout and "Self corr us" in p.stdout and "p99 us" in p.stdout
    p, _ = record(tmp_path, PY, "-c", code, extra=("--json",))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == "opskew.trace.summary/1" and doc["instrument"] == "itt"
    ops = {o["name"]: o for o in doc["ops"]}
    assert ops["aten::add"]["calls"] == 500 and ops["aten::mul"]["calls"] == 500
    for o in doc["ops"]:
        assert 0 <= o["self_ns"] <= o["total_ns"] and o["p50_ns"] <= o["p99_ns"] <= o["max_ns"]
        assert 0 <= o["self_corrected_ns"] <= o["self_ns"]
    assert doc["calibration"]["w_ns"] > 0


@pytest.mark.parametrize("argv,msg", [
    ([], "no command given"),
    (["--", "ls", "-l"], "must start with a Python interpreter"),
    (["--", PY, "does_not_exist.py"], "script not found"),
    (["--", PY], "a script, -c CODE or -m MODULE"),
])
def test_usage_errors(tmp_path, argv, msg):
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(tmp_path / "t.json"), *argv],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert p.returncode == 2, p.stderr
    assert msg in p.stderr


def test_module_and_script_args(tmp_path):
    (tmp_path / "mymod.py").write_text(
        "import sys, torch\nassert sys.argv[1:] == ['x', '--y'], sys.argv\ntorch.add(torch.ones(1), 1)\n")
    p, out = record(tmp_path, PY, "-m", "mymod", "x", "--y")
    assert p.returncode == 0, p.stderr
    assert any(e["name"] == "aten::add" for e in complete_events(json.loads(out.read_text())))
