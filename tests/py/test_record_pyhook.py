"""The fallback instrument (pyhook) against real torch, forced on this
ITT-capable machine with --instrument pyhook / instrument="pyhook".

What it records: calls of torch's *builtin functions* (PyTrace_C_CALL /
C_RETURN / C_EXCEPTION of builtins whose module starts with "torch"), named
after the builtin ("torch.add", "torch._C.TensorBase.add"). Not aten
operators: `a + b` (a slot, not a builtin call), operators one builtin runs
inside C++, and backward operators are not seen; the tests check that too.
"""

import collections
import json
import subprocess
import sys
import textwrap

import pytest

from conftest import threaded_adds

torch = pytest.importorskip("torch")

PY = sys.executable


def record(tmp_path, code, *extra, timeout=180):
    out = tmp_path / "t.json"
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(out), "--instrument", "pyhook", *extra,
                        "--", PY, "-c", textwrap.dedent(code)],
                       capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    return p, out


def complete(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_record_loop_exact_count_and_metadata(tmp_path):
    p, out = record(tmp_path, """
        import torch
        a = torch.ones(1)
        for _ in range(20000):
            torch.add(a, a)
        for _ in range(100):
            a + a                      # syntax: a slot, not a builtin call
    """)
    assert p.returncode == 0, p.stderr
    trace = json.loads(out.read_text())
    names = collections.Counter(e["name"] for e in complete(trace))
    assert names["torch.add"] == 20000
    assert not any(n.startswith("aten::") for n in names)  # builtin names, not aten ops
    assert sum(names.values()) == 20000 + names["torch.ones"]  # nothing for `a + a`
    osk = trace["opskew"]
    assert osk["instrument"] == "pyhook"
    assert osk["lost"]["total"] == 0 and osk["events"] == sum(names.values())
    assert osk["calibration"]["w_ns"] > 0 and "profile hook" in osk["calibration"]["scope"]
    assert "instrument pyhook" in p.stderr and "builtin calls" in p.stderr
    assert "python (opskew pyhook)" in out.read_text()


def test_record_methods_exceptions_nesting(tmp_path):
    # A torch builtin that calls back into Python which calls another torch
    # builtin: __torch_function__ of a Tensor subclass runs inside the call.
    p, out = record(tmp_path, """
        import torch
        class T(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                torch.mul(torch.ones(1), 2)     # nested builtin call
                return super().__torch_function__(func, types, args, kwargs or {})
        a = torch.ones(2)
        a.add(a)                                # a Tensor method: a builtin too
        t = torch.ones(2).as_subclass(T)
        torch.sub(t, 1)
        try:
            torch.add(a, "x")                   # raises: C_EXCEPTION closes it
        except TypeError:
            pass
        torch.neg(a)
    """)
    assert p.returncode == 0, p.stderr
    evs = complete(json.loads(out.read_text()))
    names = collections.Counter(e["name"] for e in evs)
    assert names["torch._C.TensorBase.add"] == 1
    assert names["torch.add"] == 1 and names["torch.neg"] == 1
    # torch.sub enters __torch_function__, which calls torch.mul and then
    # torch.sub itself again (super().__torch_function__): both nested.
    sub = sorted((e for e in evs if e["name"] == "torch.sub"), key=lambda e: e["args"]["depth"])
    assert [e["args"]["depth"] for e in sub] == [0, 1]
    inner = [e for e in evs if e["name"] == "torch.mul" and e["args"]["depth"] == 1]
    assert inner, "the builtin called inside torch.sub is nested under it"
    s = sub[0]
    assert round(sub[1]["ts"] * 1000) >= round(s["ts"] * 1000)
    assert any(round(e["ts"] * 1000) >= round(s["ts"] * 1000)
               and round((e["ts"] + e["dur"]) * 1000) <= round((s["ts"] + s["dur"]) * 1000) + 1 for e in inner)
    assert all(e["args"]["depth"] == 0 for e in evs if e["name"] in ("torch.add", "torch.neg"))


def test_record_threads(tmp_path):
    p, out = record(tmp_path, threaded_adds(3, 5000) + "for _ in range(1000):\n    torch.mul(a, a)\n")
    assert p.returncode == 0, p.stderr
    trace = json.loads(out.read_text())
    evs = complete(trace)
    adds = [e for e in evs if e["name"] == "torch.add"]
    muls = [e for e in evs if e["name"] == "torch.mul"]
    assert len(adds) == 15000 and len(muls) == 1000
    per_tid = collections.Counter(e["tid"] for e in adds)
    assert sorted(per_tid.values()) == [5000] * 3
    assert {e["tid"] for e in muls}.isdisjoint(per_tid)
    assert trace["opskew"]["lost"]["total"] == 0 and trace["opskew"]["unmatched_ends"] == 0


def test_trace_api_pyhook(tmp_path):
    code = """
        import json, threading, opskew
        with opskew.trace("t.json", instrument="pyhook") as t:
            import torch
            a = torch.ones(1)
            for _ in range(3000):
                torch.add(a, a)
            th = threading.Thread(target=lambda: [torch.mul(a, a) for _ in range(200)])
            th.start(); th.join()
        assert t.instrument == "pyhook", t.instrument
        names = [e.name for e in t.events]
        assert names.count("torch.add") == 3000 and names.count("torch.mul") == 200, names[:5]
        assert t.lost["total"] == 0 and t.calibration["scope"] == "profile hook"
        assert {r["name"]: r for r in t.summary.rows}["torch.add"]["calls"] == 3000
        doc = json.load(open("t.json"))
        assert doc["opskew"]["instrument"] == "pyhook"
        # Once the block ends nothing more is recorded, and a second session works.
        torch.add(a, a)
        with opskew.trace(instrument="pyhook") as t2:
            torch.sub(a, a)
        assert [e.name for e in t2.events] == ["torch.sub"], list(t2.events)
        print("ok")
    """
    p = subprocess.run([PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ok" in p.stdout


def test_trace_api_env_and_torch_imported_first(tmp_path):
    # OPSKEW_INSTRUMENT forces the fallback; it needs nothing before `import torch`.
    code = """
        import torch, opskew
        with opskew.trace() as t:
            torch.add(torch.ones(1), 1)
        assert t.instrument == "pyhook" and [e.name for e in t.events if e.name == "torch.add"] == ["torch.add"]
        print("ok")
    """
    import os

    env = dict(os.environ, OPSKEW_INSTRUMENT="pyhook")
    p = subprocess.run([PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=180, env=env)
    assert p.returncode == 0, p.stdout + p.stderr


def test_unknown_instrument_is_a_usage_error(tmp_path):
    p = subprocess.run([PY, "-m", "opskew", "record", "--instrument", "dtrace", "--", PY, "-c", "pass"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "invalid choice" in p.stderr
