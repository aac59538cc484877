"""`opskew record` end to end, against real torch (no mocks): the issue's
acceptance runs, plus failure paths (exception, SIGTERM, SIGINT, bad input)."""

import collections
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time

import pytest

from conftest import communicate_or_diagnose, exited, kill_tree, threaded_adds

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


THREADS = threaded_adds(4, 50000)


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


def test_a_gz_trace_is_gzip(tmp_path):
    """-o NAME.json.gz writes gzip, as the name says (HTA and gzip.open read
    it); opskew summary reads it too."""
    import gzip

    out = tmp_path / "t.json.gz"
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(out), "--", PY, "-c",
                        "import torch; a = torch.ones(1)\nfor _ in range(10): a + a"],
                       capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(gzip.open(out).read())
    assert sum(1 for e in complete_events(doc) if e["name"] == "aten::add") == 10
    s = subprocess.run([PY, "-m", "opskew", "summary", str(out), "--json", "-"], capture_output=True, text=True)
    assert s.returncode == 0 and any(o["name"] == "aten::add" and o["calls"] == 10
                                     for o in json.loads(s.stdout)["ops"]), s.stderr


def test_trace_written_when_script_raises(tmp_path):
    code = "import torch\na=torch.ones(1)\nfor _ in range(1000): torch.add(a,a)\nraise RuntimeError('boom')"
    p, out = record(tmp_path, PY, "-c", code)
    assert p.returncode == 1, p.stderr  # the script's own status (an uncaught exception: 1)
    assert "RuntimeError: boom" in p.stderr
    adds = [e for e in complete_events(json.loads(out.read_text())) if e["name"] == "aten::add"]
    assert len(adds) == 1000
    # The traceback reads as without opskew: the script's frames, not the
    # bootstrap's or runpy's (one line of the bootstrap re-raising comes first).
    frames = re.findall(r'^  File "([^"]+)", line \d+, in (\S+)', p.stderr, re.M)
    assert frames[-1] == ("<string>", "<module>") and "runpy" not in p.stderr, p.stderr
    assert sum(1 for f, _ in frames if f.endswith(os.path.join("_entry", "record_boot.py"))) == 1, p.stderr


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
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONFAULTHANDLER="1"), **popen_kw)
    deadline = time.monotonic() + 120
    try:
        while not (tmp_path / "started").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
    except BaseException:
        kill_tree(proc)
        raise
    return proc, out


def test_trace_written_on_sigterm_to_opskew(tmp_path):
    proc, out = _run_until_started(tmp_path)
    proc.send_signal(signal.SIGTERM)  # forwarded to the child
    _, err = communicate_or_diagnose(proc)
    assert proc.returncode == 130, err
    trace = json.loads(out.read_text())
    adds = [e for e in complete_events(trace) if e["name"] == "aten::add"]
    assert len(adds) >= 2000
    assert trace["opskew"]["lost"]["total"] == 0


def _sigint(disposition):
    """A preexec_fn: the started command gets SIGINT with this disposition,
    whatever this test run inherited (a background job of a shell without
    job control starts with SIGINT ignored, and so would every child)."""
    return lambda: signal.signal(signal.SIGINT, disposition)


def test_trace_written_on_ctrl_c(tmp_path):
    # A terminal's Ctrl-C signals the whole foreground process group.
    proc, out = _run_until_started(tmp_path, start_new_session=True, preexec_fn=_sigint(signal.SIG_DFL))
    os.killpg(proc.pid, signal.SIGINT)
    _, err = communicate_or_diagnose(proc)
    assert proc.returncode == 130, err
    assert "KeyboardInterrupt" in err
    adds = [e for e in complete_events(json.loads(out.read_text())) if e["name"] == "aten::add"]
    assert len(adds) >= 2000


def test_ignored_sigint_stays_ignored(tmp_path):
    """Started with SIGINT ignored, the script alone would not stop on it:
    nor does it under opskew record (which neither acts on it nor forwards
    it). SIGTERM still ends it, with the trace written."""
    proc, out = _run_until_started(tmp_path, start_new_session=True, preexec_fn=_sigint(signal.SIG_IGN))
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(2.0)  # past record's one-second grace before it would forward a SIGINT
    if proc.poll() is not None:
        pytest.fail(f"stopped on an ignored SIGINT: {proc.communicate()}")
    # Ignored by record itself, not caught by a handler of its own.
    with open(f"/proc/{proc.pid}/status") as f:
        ign = int(next(line for line in f if line.startswith("SigIgn:")).split()[1], 16)
    if not ign & (1 << (signal.SIGINT - 1)):
        kill_tree(proc)
        pytest.fail("opskew record does not ignore the SIGINT it was started ignoring")
    proc.send_signal(signal.SIGTERM)
    _, err = communicate_or_diagnose(proc)
    assert proc.returncode == 130, err
    adds = [e for e in complete_events(json.loads(out.read_text())) if e["name"] == "aten::add"]
    assert len(adds) >= 2000


def test_summary_table_and_json(tmp_path):
    code = "import torch; a=torch.ones(2); [torch.mul(torch.add(a,a),a) for _ in range(500)]"
    p, _ = record(tmp_path, PY, "-c", code, extra=("--summary",))
    assert p.returncode == 0, p.stderr
    # Rendered by the parent from the child's JSON, through opskew.tables.
    assert "aten::add" in p.stdout and "corrected self" in p.stdout and "p99" in p.stdout
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


# ---------------------------------------------------- outputs and exit codes


def test_exit_status_is_the_scripts_own(tmp_path):
    p, out = record(tmp_path, PY, "-c", "import sys, torch; torch.add(torch.ones(1), 1); sys.exit(3)")
    assert p.returncode == 3, p.stderr
    assert "exited with status 3" in p.stderr
    assert any(e["name"] == "aten::add" for e in complete_events(json.loads(out.read_text())))


def test_old_trace_is_never_removed_and_never_passes_for_this_runs(tmp_path):
    out = tmp_path / "t.json"
    out.write_text("old trace")
    # The script ends without the atexit write: nothing written, the old file
    # stays as it was, and the run says so (exit 7: the script exited 0).
    p, _ = record(tmp_path, PY, "-c", "import os, torch; torch.ones(1); os._exit(0)")
    assert p.returncode == 7, p.stderr
    assert "no trace was written" in p.stderr and "from before this run" in p.stderr
    assert out.read_text() == "old trace"
    # A run that ends normally replaces it.
    p, _ = record(tmp_path, PY, "-c", "import torch; torch.add(torch.ones(1), 1)")
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["opskew"]["instrument"] == "itt"


def test_output_onto_the_script_is_refused_before_running(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("open('ran', 'w').close()\n")
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(script), "--", PY, str(script)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert p.returncode == 2, p.stderr
    assert "is the script to run" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert script.read_text() == "open('ran', 'w').close()\n" and not (tmp_path / "ran").exists()


def test_output_onto_a_directory_is_one_line(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(d), "--", PY, "-c", "pass"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "is a directory" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert d.is_dir() and list(d.iterdir()) == []


def test_a_failed_trace_write_is_one_line_with_its_reason(tmp_path):
    full = tmp_path / "full"  # a copy of /dev/full: writing it fails with ENOSPC
    try:
        os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except PermissionError as exc:
        pytest.skip(f"mknod not permitted here: {exc}")
    code = "import torch; torch.add(torch.ones(1), 1)"
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(full), "--instrument", "itt", "--", PY, "-c", code],
                       capture_output=True, text=True, cwd=tmp_path, timeout=240)
    assert p.returncode == 7, p.stderr  # the script succeeded; its trace could not be written
    lines = [ln for ln in p.stderr.splitlines() if "opskew" in ln]
    assert lines == [f"opskew record: cannot write the trace to {full}: no space left on device"], p.stderr
    assert "input/output error" not in p.stderr
    # The script's own failure keeps its status; the write's reason is still said.
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(full), "--instrument", "itt", "--", PY, "-c",
                        code + "; raise SystemExit(5)"], capture_output=True, text=True, cwd=tmp_path, timeout=240)
    assert p.returncode == 5 and "no space left on device" in p.stderr, p.stderr
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_killed_record_leaves_no_orphan_and_no_temporary_folder(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp_path / "loop.py").write_text(LOOP.replace('open("started", "w").close()',
                                                   'open("started", "w").write(str(os.getpid()))'))
    env = dict(os.environ, TMPDIR=str(tmp))
    proc = subprocess.Popen([PY, "-m", "opskew", "record", "-o", str(tmp_path / "t.json"), "--instrument", "itt",
                             "--", PY, "loop.py"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = tmp_path / "started"
    deadline = time.monotonic() + 120
    try:
        while not (started.exists() and started.read_text()):
            assert proc.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child = int(started.read_text())
        assert [n for n in os.listdir(tmp) if n.startswith("opskew-record-")]
    except BaseException:
        kill_tree(proc)
        raise
    proc.kill()  # record alone: its child must stop by itself
    proc.wait()

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if exited(child):
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the traced command outlived the killed `opskew record`")
    deadline = time.monotonic() + 10  # the folder goes as the child exits
    while [n for n in os.listdir(tmp) if n.startswith("opskew-record-")] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [n for n in os.listdir(tmp) if n.startswith("opskew-record-")] == []


PROFILES = """
import torch
a = torch.ones(4)
with torch.profiler.profile() as prof:
    for _ in range(10):
        a + a
print("own profiler ok")
"""


def test_a_scripts_own_profiler_under_itt_is_named_in_one_line(tmp_path):
    (tmp_path / "prof.py").write_text(PROFILES)
    p, _ = record(tmp_path, PY, "prof.py")
    assert p.returncode == 1, p.stderr
    hint = [ln for ln in p.stderr.splitlines() if "starts its own torch profiler" in ln]
    assert len(hint) == 1 and "--instrument native" in hint[0], p.stderr


def test_a_scripts_own_profiler_runs_under_native(tmp_path):
    from opskew.tracer import native

    if native.shim(torch)[0] is None:
        pytest.skip("the native shim cannot be built here")
    (tmp_path / "prof.py").write_text(PROFILES)
    out = tmp_path / "t.json"
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(out), "--instrument", "native", "--", PY, "prof.py"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "own profiler ok" in p.stdout and "starts its own torch profiler" not in p.stderr
    assert json.loads(out.read_text())["opskew"]["instrument"] == "native"
