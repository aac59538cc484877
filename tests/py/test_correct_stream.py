"""`opskew correct -o` in bounded memory, writing in time order (docs/correct.md,
"Memory"): real torch.profiler traces and a synthetic one, end to end."""

import json
import os
import subprocess
import sys

import pytest

from conftest import run_opskew

HERE = os.path.dirname(__file__)

MAKE_TRACE = r"""
import sys, torch
sys.path.insert(0, {wl!r})
import wl
torch.set_num_threads(1)
s = wl.mlp_setup()
for _ in range(3): wl.mlp_step(s)
with torch.profiler.profile(with_stack={stack}) as p:
    for _ in range(6):
        with torch.profiler.record_function("opskew::iteration"):
            wl.mlp_step(s)
p.export_chrome_trace(sys.argv[1])
"""


def torch_trace(path, stack):
    code = MAKE_TRACE.format(wl=os.path.join(HERE, "workloads"), stack=stack)
    p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                       env=dict(os.environ, KINETO_LOG_LEVEL="6"))
    assert p.returncode == 0, p.stderr
    return path


def calibration(path, config, w, delta, w_py=0.0, delta_py=0.0):
    """A calibration file with the figures given (the command's only input
    besides the trace)."""
    import torch

    from opskew.calibration.store import make_key

    cal = {"schema": "opskew.calibration/1",
           "key": make_key("torch.profiler", config, torch.__version__, "cpu", 1),
           "w_ns": {"median": w}, "delta_ns": {"median": delta}}
    if w_py:
        cal.update(w_py_ns={"median": w_py}, delta_py_ns={"median": delta_py})
    path.write_text(json.dumps(cal))
    return path


def correct(trace, cal, out, tmp_path):
    js = tmp_path / "r.json"
    p = run_opskew("correct", str(trace), "--calibration", str(cal), "-o", str(out), "--json", str(js))
    assert p.returncode == 0, p.stderr
    return json.loads(js.read_text())


def summary(path, tmp_path):
    js = tmp_path / "s.json"
    p = run_opskew("summary", str(path), "--top", "0", "--json", str(js))
    assert p.returncode == 0, p.stderr
    return json.loads(js.read_text())


def per_thread_in_time_order(out):
    """The corrected trace's corrected events, per thread, never go back in time
    (Kineto's own span, on a row of its own, is there as read)."""
    last = {}
    for e in json.loads(out.read_text())["traceEvents"]:
        if e["ph"] != "X" or "descendants" not in e.get("args", {}):
            continue
        k = (e["pid"], e["tid"])
        assert e["ts"] >= last.get(k, e["ts"])
        last[k] = e["ts"]
    return len(last)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    return {"minimal": torch_trace(d / "minimal.json", False), "with_stack": torch_trace(d / "stack.json", True)}


def test_torch_trace_streams_in_one_read(traces, tmp_path):
    """Kineto writes a thread's operators parents first, in time order: the
    correction reads the trace once and holds one iteration's tree at a time,
    not the trace; the corrected trace is in time order (the summary reads it
    in one pass) and agrees with the table operator by operator."""
    w = 2.0  # half of W - delta is 1 ns: boundaries move by whole nanoseconds
    cal = calibration(tmp_path / "cal.json", "minimal", w, 0.0)
    out = tmp_path / "corr.json"
    r = correct(traces["minimal"], cal, out, tmp_path)
    st = r["stats"]
    assert st["passes"] == 1 and st["held_threads"] == 0
    iters = next(o for o in r["ops"] if o["name"] == "opskew::iteration")
    assert iters["calls"] == 6
    # One iteration's tree and the event after it, of six.
    assert st["held_peak"] <= iters["descendants"] / 6 + 2 < st["corrected_events"] / 4
    assert per_thread_in_time_order(out) == st["threads"]
    s = summary(out, tmp_path)
    assert s["stats"]["passes"] == 1
    table = {o["name"]: o for o in r["ops"]}
    assert set(table) == {o["name"] for o in s["ops"]}
    for o in s["ops"]:
        t = table[o["name"]]
        assert o["calls"] == t["calls"] and o["descendants"] == t["descendants"]
        # Where two boundaries of the time line fall on the same nanosecond,
        # the later one cannot move back past the earlier: at most W per call.
        assert abs(o["total_ns"] - t["corrected_total_ns"]) <= w * o["calls"]
        assert abs(o["self_ns"] - t["corrected_self_ns"]) <= 2 * w * o["calls"]


def test_with_stack_thread_is_held_in_a_second_read(traces, tmp_path):
    """with_stack: Kineto writes the Python tracer's events after all the
    operators, so the thread breaks the gap rule; a second read holds it
    whole. The corrected trace is still in time order, with every event."""
    cal = calibration(tmp_path / "cal.json", "with_stack", 100.0, 10.0, 50.0, 6.0)
    out = tmp_path / "corr.json"
    r = correct(traces["with_stack"], cal, out, tmp_path)
    st = r["stats"]
    assert st["passes"] == 2 and st["held_threads"] >= 1 and st["py_events"] > 0
    assert st["held_peak"] <= st["corrected_events"]
    assert per_thread_in_time_order(out) == st["threads"]
    s = summary(out, tmp_path)
    assert s["stats"]["passes"] == 1
    assert sum(o["calls"] for o in s["ops"]) == st["corrected_events"]
    assert {o["name"]: o["calls"] for o in s["ops"]} == {o["name"]: o["calls"] for o in r["ops"]}


def synthetic(path, roots=300):
    """Nested operators on two threads, parents first, at least 1 us between
    any two boundaries (nothing clamps); leading and trailing members."""
    evs = []

    def tree(tid, t, depth, k):
        i = len(evs)
        evs.append({"ph": "X", "cat": "cpu_op", "name": f"op{depth}.{k % 3}", "pid": 1, "tid": tid,
                    "ts": t / 1000, "dur": 0})
        end = t + 1000
        for c in range(2 if depth < 3 else 0):
            end = tree(tid, end, depth + 1, k + c) + 1000
        if depth == 3:
            end = t + 2000 + 37 * (k % 11)
        evs[i]["dur"] = (end - t) / 1000
        return end

    cursor = {1: 10_000, 2: 10_333}
    for r in range(roots):
        for tid in (1, 2):
            cursor[tid] = tree(tid, cursor[tid], 0, r) + 5000
    path.write_text(json.dumps({"schemaVersion": 1, "displayTimeUnit": "ms", "deviceProperties": DEVICES,
                                "traceEvents": evs, "traceName": "synthetic", "distributedInfo": DIST}))
    return len(evs)


# Kineto's members that HTA reads (an array and an object): kept where they were.
DEVICES = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045379072}]
DIST = {"backend": "nccl", "rank": 3, "world_size": 8}


def test_table_and_trace_agree_to_the_nanosecond(tmp_path):
    """Every operator's corrected total and self time in the table equal the
    corrected trace's, as the summary reads them back, to the nanosecond."""
    n = synthetic(tmp_path / "syn.json")
    cal = calibration(tmp_path / "cal.json", "minimal", 100.0, 10.0)
    out = tmp_path / "corr.json"
    r = correct(tmp_path / "syn.json", cal, out, tmp_path)
    st = r["stats"]
    assert st["corrected_events"] == n and st["clamped"] == 0
    assert st["passes"] == 1 and st["held_threads"] == 0 and st["held_peak"] <= 2 * (15 + 1)
    s = summary(out, tmp_path)
    assert s["stats"]["passes"] == 1
    table = {o["name"]: o for o in r["ops"]}
    assert len(s["ops"]) == len(table) == 12
    for o in s["ops"]:
        t = table[o["name"]]
        assert o["calls"] == t["calls"]
        assert o["total_ns"] == t["corrected_total_ns"]
        assert o["self_ns"] == t["corrected_self_ns"]
    text = out.read_text()
    # displayTimeUnit stays before the events (Perfetto reads it only there).
    assert text.index('"displayTimeUnit"') < text.index('"traceEvents"') < text.index('"traceName"')
    # The top-level arrays and objects too (they were dropped), on the same side of the events.
    doc = json.loads(text)
    assert doc["deviceProperties"] == DEVICES and doc["distributedInfo"] == DIST
    assert text.index('"deviceProperties"') < text.index('"traceEvents"') < text.index('"distributedInfo"')


def test_begin_end_and_unusable_events_are_named_not_dropped_silently(tmp_path):
    """B/E pairs of operator categories: summary analyses them, correct reads
    complete events only. It said nothing and wrote an empty trace; now it
    counts them and warns, and writes them as they were read (the twin), as
    the other categories. Events it cannot use (a negative dur, a string ts)
    are counted and warned about, as summary does, and written as read."""
    trace = tmp_path / "be.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "B", "cat": "cpu_op", "name": "p", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "B", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 2},
        {"ph": "E", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "E", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": 20, "dur": -1},
        {"ph": "X", "cat": "cpu_op", "name": "str", "pid": 1, "tid": 1, "ts": "21", "dur": 1}]}))
    cal = calibration(tmp_path / "cal.json", "minimal", 100.0, 10.0)
    js = tmp_path / "r.json"
    p = run_opskew("correct", str(trace), "--calibration", str(cal), "-o", str(tmp_path / "c.json"),
                   "--json", str(js))
    assert p.returncode == 0, p.stderr
    st = json.loads(js.read_text())["stats"]
    assert st["begin_end_events"] == 4 and st["other_events"] == 1 and st["unusable_events"] == 2
    text = p.stdout + p.stderr
    assert '4 "B"/"E" events of operator categories were not corrected (written as they were read)' in text
    assert "1 complete events of other categories not corrected" in text
    written = json.loads((tmp_path / "c.json").read_text())["traceEvents"]
    assert sorted(json.dumps(e, sort_keys=True) for e in written) == sorted(
        json.dumps(e, sort_keys=True) for e in json.loads(trace.read_text())["traceEvents"])
    assert "2 events lack a name, ts or dur, or have a negative or out-of-range time" in text


def test_corrected_header_survives_many_members_and_overlaps_keep_children_inside(tmp_path):
    """The reader keeps the first 8 top-level objects and arrays: with 8 of
    the input's before traceEvents, the corrected trace's "opskew" header was
    the 9th, was not read back, and the trace could be corrected again. And
    an event closed early by an overlap (with a W too large for its short
    gaps) ended before its own child's corrected end."""
    from opskew.analyze.correct import detect
    from opskew.errors import UsageError
    from opskew.analyze.tracefile import correct as c_correct
    from opskew.stats.costmodel import CostModel

    evs = [{"ph": "X", "cat": "python_function", "name": "enter", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
           {"ph": "X", "cat": "cpu_op", "name": "c1", "pid": 1, "tid": 1, "ts": 0.5, "dur": 1.5},
           {"ph": "X", "cat": "cpu_op", "name": "c2", "pid": 1, "tid": 1, "ts": 2.2, "dur": 1.0},
           {"ph": "X", "cat": "user_annotation", "name": "iter", "pid": 1, "tid": 1, "ts": 4, "dur": 30}]
    doc = {f"arr{i}": [i] for i in range(8)}
    doc["traceEvents"] = evs
    src, out = tmp_path / "t.json", tmp_path / "c.json"
    src.write_text(json.dumps(doc))
    c_correct(str(src), CostModel.default(1500.0, 0.0), out=str(out))
    with pytest.raises(UsageError, match="written by `opskew correct` already"):
        detect(str(out))
    got = {e["name"]: e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"}
    assert got.keys() >= {"enter", "c1", "c2"}
    end = {n: got[n]["ts"] + got[n]["dur"] for n in got}
    assert got["c2"]["ts"] >= got["enter"]["ts"] and end["c2"] <= end["enter"] + 0.0015, got
    assert json.loads(out.read_text())["arr7"] == [7]


def test_piped_input_keeps_members_on_their_side_of_the_events(tmp_path):
    """From a pipe the whole read is held and the header written at the end:
    every kept member went before traceEvents. The reader now says which
    came before."""
    import subprocess
    import sys

    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0}],
           "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 5}],
           "traceName": "x", "distributedInfo": {"rank": 0}}
    cal = calibration(tmp_path / "cal.json", "minimal", 100.0, 10.0)
    out = tmp_path / "c.json"
    p = subprocess.run([sys.executable, "-m", "opskew", "correct", "-", "--calibration", str(cal), "-o", str(out)],
                       input=json.dumps(doc), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert text.index('"deviceProperties"') < text.index('"traceEvents"') < text.index('"traceName"')
    assert text.index('"traceEvents"') < text.index('"distributedInfo"')
    assert json.loads(text)["distributedInfo"] == {"rank": 0}
