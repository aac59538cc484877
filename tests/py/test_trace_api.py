"""opskew.trace(): the in-process tracer. Each case runs in a fresh
interpreter, because whether torch was imported first is the point."""

import json
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.profiler.itt.is_available(), reason="torch built without ITT")


def py(code, tmp_path, timeout=180):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=timeout)
    return p


def test_import_opskew_does_not_import_torch(tmp_path):
    p = py("import sys, opskew; assert 'torch' not in sys.modules; print(opskew.trace)", tmp_path)
    assert p.returncode == 0, p.stderr


def test_trace_in_process(tmp_path):
    p = py("""
        import json, threading, opskew
        with opskew.trace("t.json") as t:
            import torch
            a = torch.ones(1)
            for _ in range(1000):
                torch.add(a, a)
            def work():
                for _ in range(300):
                    torch.mul(a, a)
            th = threading.Thread(target=work); th.start(); th.join()
        ev = t.events
        names = [e.name for e in ev]
        assert names.count("aten::add") == 1000, names.count("aten::add")
        assert names.count("aten::mul") == 300
        assert len({e.tid for e in ev if e.name == "aten::mul"}) == 1
        assert {e.tid for e in ev if e.name == "aten::mul"} != {e.tid for e in ev if e.name == "aten::add"}
        assert t.lost["total"] == 0 and t.calibration["w_ns"] > 0
        rows = {r["name"]: r for r in t.summary.rows}
        assert rows["aten::add"]["calls"] == 1000
        assert "aten::add" in str(t.summary)
        doc = json.load(open("t.json"))
        assert sum(e["name"] == "aten::add" for e in doc["traceEvents"]) == 1000
        # Nothing is recorded between sessions; a second session is clean.
        torch.add(a, a)
        with opskew.trace() as t2:
            torch.sub(a, a)
        assert [e.name for e in t2.events] == ["aten::sub"], list(t2.events)
        t2.write("t2.json")
        assert json.load(open("t2.json"))["opskew"]["events"] == 1
        print("ok")
    """, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ok" in p.stdout


def test_trace_after_torch_import_says_what_to_do(tmp_path):
    # ITT only: the default (native) needs no import order (test_native.py).
    p = py("""
        import torch, opskew
        try:
            with opskew.trace(instrument="itt"):
                pass
        except opskew.tracer.session.TracerSetupError as e:
            print("ERR", e)
        else:
            raise SystemExit("no error raised")
    """, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "ERR torch was imported before opskew" in p.stdout
    assert "before `import torch`" in p.stdout and "INTEL_LIBITTNOTIFY64=" in p.stdout
    assert "opskew record" in p.stdout


def test_trace_with_env_set_after_torch_import_is_detected(tmp_path):
    # The variable is set, but only after torch created (or not) its domain.
    p = py("""
        import os, torch, opskew
        os.environ["INTEL_LIBITTNOTIFY64"] = opskew.tracer.session.collector_path()
        try:
            with opskew.trace(instrument="itt"):
                pass
        except opskew.tracer.session.TracerSetupError as e:
            print("ERR", e)
    """, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "ERR torch was imported before opskew" in p.stdout


def test_trace_records_even_if_block_raises(tmp_path):
    p = py("""
        import opskew
        t = None
        try:
            with opskew.trace("t.json") as t:
                import torch
                torch.add(torch.ones(1), 1)
                raise KeyError("x")
        except KeyError:
            pass
        import json
        assert any(e["name"] == "aten::add" for e in json.load(open("t.json"))["traceEvents"])
        assert any(e.name == "aten::add" for e in t.events)
        print("ok")
    """, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_gz_name_is_written_gzipped(tmp_path):
    """opskew.trace("t.json.gz") writes gzip, as the name says (the C writer
    compresses as it writes), so that gzip.open and HTA read it."""
    p = py("""
        import gzip, json, opskew
        with opskew.trace("t.json.gz") as t:
            import torch
            a = torch.ones(1)
            for _ in range(500):
                torch.add(a, a)
        raw = open("t.json.gz", "rb").read()
        assert raw[:2] == b"\\x1f\\x8b", raw[:20]
        doc = json.loads(gzip.decompress(raw))
        assert sum(e.get("name") == "aten::add" for e in doc["traceEvents"]) == 500
        print("ok")
    """, tmp_path)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr


def test_sessions_of_different_instruments_do_not_nest_either(tmp_path):
    """Each instrument's library has its own copy of the runtime: a pyhook
    session inside an ITT one started (and its probe and calibration ran in
    the outer window). Any active session refuses another."""
    p = py("""
        import opskew, opskew.tracer.session
        with opskew.trace(instrument="itt") as t:
            import torch
            a = torch.ones(2)
            torch.add(a, a)
            try:
                with opskew.trace(instrument="pyhook"):
                    torch.mul(a, a)
                print("nested")
            except opskew.tracer.session.TracerSetupError as exc:
                print("refused:", exc)
        names = [e.name for e in t.events]
        assert names.count("aten::add") == 1 and "aten::mul" not in names, names
        with opskew.trace(instrument="pyhook") as u:  # one after the other is fine
            torch.mul(a, a)
        assert u.n_events >= 1
        print("ok")
    """, tmp_path)
    assert p.returncode == 0 and "refused: an opskew tracing session is already active" in p.stdout \
        and p.stdout.strip().endswith("ok"), p.stdout + p.stderr


def test_a_window_summarizes_the_events_that_begin_in_it(tmp_path):
    """Trace.window(from_ns, to_ns): one step of several in one session
    (opskew.profile's leaf reference), on the events' own time line
    (opskew.tracer.session.now_ns); the steps' windows add up to the whole."""
    p = py("""
        import time, torch, opskew
        a = torch.ones(4)
        marks = []
        from opskew.tracer.session import now_ns
        with opskew.trace(instrument="native") as t:
            for n in (30, 50, 70):
                t0 = now_ns()
                for _ in range(n):
                    torch.add(a, a)
                    torch.mul(a, a)
                marks.append((t0, now_ns()))
        calls = lambda s, name: {r["name"]: r["calls"] for r in s.rows}.get(name, 0)
        assert [calls(t.window(*m), "aten::add") for m in marks] == [30, 50, 70]
        assert [calls(t.window(*m), "aten::mul") for m in marks] == [30, 50, 70]
        whole = {r["name"]: r for r in t.summary.rows}
        parts = [{r["name"]: r for r in t.window(*m).rows} for m in marks]
        assert sum(q["aten::add"]["total_ns"] for q in parts) == whole["aten::add"]["total_ns"]
        w = t.window(*marks[1])
        assert w.data["events"] == sum(r["calls"] for r in w.rows) and w.data["window_ns"] == list(marks[1])
        assert t.window(marks[0][0], marks[0][0]).rows == []
        try:
            t.window(2, 1)
        except ValueError as e:
            assert "from_ns <= to_ns" in str(e)
        else:
            raise AssertionError("an empty window backwards was taken")
        print("ok")
    """, tmp_path)
    assert p.returncode == 0 and "ok" in p.stdout, p.stderr
