"""`opskew summary` and the C reader against real torch.profiler traces.

The traces are recorded here with torch.profiler (a loop of tiny ops and a
small MLP training step with backward), so the tests follow whatever the
installed torch writes.
"""

import errno
import gzip
import json
import os
import random
import re

import pytest

torch = pytest.importorskip("torch")

from conftest import one_line_error  # noqa: E402
from opskew import _reader  # noqa: E402


def record(path):
    """Profiles a small workload, exports the trace; returns key_averages counts."""
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    a = torch.ones(4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("tiny_loop"):
            for _ in range(40):
                a = torch.add(a, a)
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
    prof.export_chrome_trace(str(path))
    return {e.key: e.count for e in prof.key_averages()}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    path = d / "mlp.pt.trace.json"
    counts = record(path)
    return path, counts


def summary_json(opskew, tmp_path, trace_path, *extra, expect_rc=0):
    out = tmp_path / f"s{len(list(tmp_path.iterdir()))}.json"
    p = opskew("summary", str(trace_path), "--json", str(out), *extra)
    assert p.returncode == expect_rc, (p.returncode, p.stdout, p.stderr)
    return p, json.loads(out.read_text())


def reference(doc, exclude=("Trace",)):
    """Per-name calls/total/self in ns from the parsed JSON, in plain Python."""
    threads = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") not in exclude:
            ts, dur = round(e["ts"] * 1000), round(e["dur"] * 1000)
            threads.setdefault((e["pid"], e["tid"]), []).append((ts, -dur, e["name"]))
    calls, total, self_t = {}, {}, {}
    for evs in threads.values():
        evs.sort(key=lambda t: (t[0], t[1]))
        stack = []

        def close():
            end, name, dur, child = stack.pop()
            self_t[name] = self_t.get(name, 0) + max(dur - child, 0)
            if stack:
                stack[-1][3] += dur

        for ts, ndur, name in evs:
            while stack and stack[-1][0] <= ts:
                close()
            calls[name] = calls.get(name, 0) + 1
            total[name] = total.get(name, 0) + -ndur
            stack.append([ts - ndur, name, -ndur, 0])
        while stack:
            close()
    return calls, total, self_t


def test_counts_match_key_averages(opskew, tmp_path, trace):
    path, counts = trace
    p, s = summary_json(opskew, tmp_path, path)
    assert s["schema"] == "opskew.summary/1" and s["status"] == "ok"
    ops = {o["name"]: o for o in s["ops"]}
    # key_averages() folds an op into a parent of the same name when it is
    # that parent's only child (EventList._remove_dup_nodes).
    for name, n in counts.items():
        assert name in ops, name
        assert ops[name]["calls"] - ops[name]["only_child_same_name"] == n, (name, ops[name], n)
    assert set(ops) == set(counts)
    assert ops["aten::add"]["calls"] >= 40 and ops["tiny_loop"]["calls"] == 1
    assert ops["tiny_loop"]["descendants"] >= 40
    assert "aten::add" in p.stdout and "calls" in p.stdout


def test_times_match_a_python_reference(opskew, tmp_path, trace):
    path, _ = trace
    _, s = summary_json(opskew, tmp_path, path)
    calls, total, self_t = reference(json.loads(path.read_text()))
    ops = {o["name"]: o for o in s["ops"]}
    for name, o in ops.items():
        assert o["calls"] == calls[name]
        # Python's float reading may round a ns fraction differently: 1 ns per call.
        assert abs(o["total_ns"] - total[name]) <= o["calls"], name
        assert abs(o["self_ns"] - self_t[name]) <= 3 * o["calls"] + o["descendants"], name
        assert 0 <= o["self_ns"] <= o["total_ns"]
        assert o["min_ns"] <= o["p50_ns"] <= o["p99_ns"] <= o["max_ns"]
        assert o["mean_ns"] == pytest.approx(o["total_ns"] / o["calls"])
    assert ops["aten::add"]["self_ns"] == ops["aten::add"]["total_ns"]  # a leaf
    assert s["stats"]["passes"] == 1 and s["stats"]["overlaps"] == 0
    assert s["metadata"]["schemaVersion"] == 1
    main = [t for t in s["threads"] if t["complete_events"]]
    assert main and all(isinstance(t["tid"], int) for t in main)
    assert main[0]["name"] and main[0]["max_depth"] >= 3


def test_gzip_gives_the_same_summary(opskew, tmp_path, trace):
    path, _ = trace
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    _, plain = summary_json(opskew, tmp_path, path)
    _, packed = summary_json(opskew, tmp_path, gz)
    assert packed["ops"] == plain["ops"]
    assert packed["stats"]["gzip"] and packed["stats"]["compressed_bytes"] == gz.stat().st_size


def test_out_of_order_events_are_sorted(opskew, tmp_path, trace):
    path, _ = trace
    doc = json.loads(path.read_text())
    random.Random(1).shuffle(doc["traceEvents"])
    shuffled = tmp_path / "shuffled.json"
    shuffled.write_text(json.dumps(doc))
    _, a = summary_json(opskew, tmp_path, path)
    p, b = summary_json(opskew, tmp_path, shuffled)
    key = lambda s: sorted((o["name"], o["calls"], o["total_ns"], o["self_ns"], o["descendants"]) for o in s["ops"])
    assert key(a) == key(b)
    assert b["stats"]["passes"] == 2 and any(t["resorted"] for t in b["threads"])
    assert "out of time order" in p.stderr


def test_truncated_trace_exit_5(opskew, tmp_path, trace):
    path, _ = trace
    data = path.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) * 6 // 10])
    p, s = summary_json(opskew, tmp_path, cut, expect_rc=5)
    assert s["status"] == "truncated" and s["error"]["offset"] == len(data) * 6 // 10
    assert s["error"]["code"] == "OSK_ETRUNCATED"
    assert 0 < s["stats"]["events"] < len(json.loads(data)["traceEvents"])
    assert "warning" in p.stderr and "truncated" in p.stderr
    assert "calls" in p.stdout  # what was read is still printed
    p = opskew("summary", str(cut))
    assert p.returncode == 5 and "aten::" in p.stdout


def test_invalid_json_one_line_with_offset(opskew, tmp_path, trace):
    path, _ = trace
    data = bytearray(path.read_bytes())
    at = data.index(b'"ph": "X"', len(data) // 2) + 8  # the closing quote of "X"
    data[at:at + 1] = b"'"
    bad = tmp_path / "bad.json"
    bad.write_bytes(bytes(data))
    line = one_line_error(opskew("summary", str(bad)), "invalid trace")
    m = re.search(r"at byte (\d+)", line)
    assert m, line
    # The offset is the first byte that makes the text invalid JSON.
    with pytest.raises(json.JSONDecodeError):
        json.loads(bytes(data))
    off = int(m.group(1))
    assert at <= off <= at + 2, (at, off)
    (tmp_path / "empty.json").write_text("")
    p = opskew("summary", str(tmp_path / "empty.json"))
    assert p.returncode == 5 and "empty" in p.stderr
    (tmp_path / "text.txt").write_text("hello")
    one_line_error(opskew("summary", str(tmp_path / "text.txt")), "at byte 0")


def test_bad_input(opskew, tmp_path):
    one_line_error(opskew("summary", str(tmp_path / "missing.json")), "missing.json: not found")
    one_line_error(opskew("summary", str(tmp_path)), "directory")
    (tmp_path / "t.json").write_text('{"traceEvents": []}')
    one_line_error(opskew("summary", str(tmp_path / "t.json"), "--top", "-1"), "--top")
    one_line_error(opskew("summary", str(tmp_path / "t.json"), "--sort", "nope"), "invalid choice")
    one_line_error(opskew("summary"), "TRACE")


def test_sort_top_and_json_to_stdout(opskew, tmp_path, trace):
    path, _ = trace
    for key, field, rev in (("calls", "calls", True), ("self", "self_ns", True), ("name", "name", False)):
        p = opskew("summary", str(path), "--json", "-", "--sort", key)
        assert p.returncode == 0, p.stderr
        s = json.loads(p.stdout)  # nothing but JSON on stdout
        vals = [o[field] for o in s["ops"]]
        assert vals == sorted(vals, reverse=rev)
    p = opskew("summary", str(path), "--top", "3", "--sort", "calls")
    assert p.returncode == 0
    rows = [ln for ln in p.stdout.splitlines() if ln.startswith("aten::") or ln.startswith("autograd")]
    assert len(rows) == 3 and rows[0].startswith("aten::add ")
    n = len(summary_json(opskew, tmp_path, path)[1]["ops"])
    assert f"... {n - 3} more (--top 0 shows all)" in p.stdout


def test_category_filter(opskew, tmp_path, trace):
    path, _ = trace
    _, s = summary_json(opskew, tmp_path, path, "--cat", "user_annotation")
    assert {o["cat"] for o in s["ops"]} == {"user_annotation"}
    assert s["stats"]["filtered_events"] > 0
    # Kineto's own span is left out by default and kept on request.
    _, s = summary_json(opskew, tmp_path, path)
    assert not any(o["cat"] == "Trace" for o in s["ops"])
    _, s = summary_json(opskew, tmp_path, path, "--cat", "Trace")
    assert [o["name"] for o in s["ops"]] == ["PyTorch Profiler (0)"]
    # A space after the comma is not part of the name; a category nothing has is named, not silent.
    _, both = summary_json(opskew, tmp_path, path, "--cat", "cpu_op, user_annotation")
    assert both["categories"] == ["cpu_op", "user_annotation"]
    assert {o["cat"] for o in both["ops"]} == {"cpu_op", "user_annotation"} and not both["warnings"]
    p, typo = summary_json(opskew, tmp_path, path, "--cat", "cpu-op")
    assert typo["ops"] == [] and len(typo["warnings"]) == 1 and "'cpu-op'" in typo["warnings"][0]
    assert "warning: --cat: no complete event of category 'cpu-op'" in p.stderr
    import opskew as api

    with pytest.raises(ValueError, match="cat=3: expected text"):
        api.summary(path, cat=3)
    assert api.summary(path, cat=["cpu_op", "user_annotation"]).to_dict()["ops"] == both["ops"]


def test_reader_module_direct(tmp_path):
    t = tmp_path / "u.json"
    t.write_text(json.dumps({"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": "gpu 0", "tid": 7, "args": {"name": "stream \u00e9"}},
        {"ph": "X", "name": "\u4e2d\u6587 \U0001F600", "pid": "gpu 0", "tid": 7, "ts": 1.5, "dur": 2.25},
        {"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 1e0, "dur": 25e-1, "args": {"a": [None, {}]}},
    ], "traceName": "u", "weird": 1.5e3}, ensure_ascii=True))
    r = _reader.summarize(str(t))
    assert r["status"] == "ok" and r["error"] is None
    names = {o["name"]: o for o in r["ops"]}
    assert names["\u4e2d\u6587 \U0001F600"]["total_ns"] == 2250
    assert names["x"]["total_ns"] == 2500
    th = {(x["pid"], x["tid"]): x for x in r["threads"]}
    assert th[("gpu 0", 7)]["name"] == "stream \u00e9"
    assert r["metadata"] == {"traceName": "u", "weird": 1500.0}
    # The binding raises nothing for the C's failures: it hands them over
    # as data, and opskew.errors.from_c_error makes the exception.
    missing = _reader.summarize(str(tmp_path / "none.json"))
    assert missing["status"] == "error" and missing["ops"] == []
    assert missing["error"]["code"] == "OSK_EIO" and missing["error"]["sys_errno"] == errno.ENOENT
    with pytest.raises(TypeError):
        _reader.summarize(str(t), categories=[1])
    assert _reader.summarize(os.fspath(t), categories=["nothing"])["ops"] == []


def test_scan_header_only_and_deep_objects(tmp_path):
    # header_only stops where traceEvents begins: the header is read, no
    # event, and the (here unfinished) rest is never looked at.
    t = tmp_path / "h.json"
    t.write_text('{"opskew":{"version":"x"},"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":1},{"ph')
    r = _reader.scan(str(t), header_only=True)
    assert r["status"] == "ok" and r["objects"] == {"opskew": {"version": "x"}}
    assert r["stats"]["events"] == 0 and r["stats"]["header_only_stopped"] is True
    assert _reader.scan(str(t))["status"] == "truncated"
    # A hostile header nested past what json.loads takes is skipped and
    # counted, not a RecursionError.
    deep = tmp_path / "d.json"
    deep.write_text('{"deep":' + '{"a":' * 1010 + '{}' + '}' * 1010 + ',"opskew":{"v":1},"traceEvents":[]}')
    r = _reader.scan(str(deep))
    assert r["status"] == "ok" and r["objects"] == {"opskew": {"v": 1}}
    assert r["stats"]["objects_not_kept"] == 1
