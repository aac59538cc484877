"""The native instrument (issue 12): opskew's C++ RecordFunction shim, compiled
against this torch at first use, feeding libopskew_native.so. Real torch, no
mocks. The shim is built once per test run (the session fixture; later builds
hit the run's cache, a temporary $OPSKEW_CACHE_DIR set in conftest.py), and
every other case reuses it, subprocesses included."""

import collections
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import pytest

torch = pytest.importorskip("torch")

import opskew  # noqa: E402
from opskew.tracer import native  # noqa: E402

PY = sys.executable


@pytest.fixture(scope="session")
def shim():
    if native.disabled():
        pytest.skip("OPSKEW_NATIVE=0 in the environment")
    lib, why = native.shim(torch)
    if lib is None:
        if shutil.which(os.environ.get("CXX") or "c++") is None:
            pytest.skip(f"native collector unavailable: {why}")
        pytest.fail(f"a C++ compiler is present but the native collector is unavailable: {why}")
    return lib


def py(code, cwd, env=None, timeout=240):
    e = dict(os.environ)
    e.pop("INTEL_LIBITTNOTIFY64", None)
    e.pop("OPSKEW_INSTRUMENT", None)
    e.update(env or {})
    return subprocess.run([PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd,
                          env=e, timeout=timeout)


def test_exactly_100000_adds(shim):
    a = torch.ones(1)
    with opskew.trace(instrument="native") as t:
        for _ in range(100000):
            torch.add(a, a)
    assert t.instrument == "native"
    assert t.lost["total"] == 0, t.lost
    names = collections.Counter(e.name for e in t.events)
    assert names["aten::add"] == 100000, names
    assert t.n_events == 100000, names
    assert t.calibration is not None and t.calibration["w_ns"] > 0 and t.calibration["scope"] == "collector"
    assert t.summary.data["open_at_stop"] == 0 and t.summary.data["unmatched_ends"] == 0


def test_four_threads_none_torn_or_lost(shim):
    a = torch.ones(1)
    n = 50000

    def work():
        for _ in range(n):
            torch.add(a, a)

    with opskew.trace(instrument="native") as t:
        ths = [threading.Thread(target=work) for _ in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
    assert t.lost["total"] == 0, t.lost
    per_tid = collections.Counter(e.tid for e in t.events if e.name == "aten::add")
    assert sorted(per_tid.values()) == [n] * 4, per_tid
    assert all(e.name == "aten::add" and e.depth == 0 and e.dur_ns >= 0 for e in t.events)
    d = t.summary.data
    assert d["unmatched_ends"] == 0 and d["open_at_stop"] == 0 and d["threads"] == 4


def test_a_thread_from_an_earlier_session_is_not_recorded_by_a_later_one(shim):
    """A thread started during a session keeps its callback until it ends
    (only it can remove it); a later session recorded it, though threads
    already running when trace() starts are not recorded. A thread that
    starts a session of its own is recorded in it."""
    a = torch.ones(4)
    go, stop = threading.Event(), threading.Event()

    def linger():
        torch.add(a, a)
        go.wait()
        torch.div(a, a)
        stop.wait()

    with opskew.trace(instrument="native") as t1:
        th = threading.Thread(target=linger)
        th.start()
        time.sleep(0.2)  # its add, inside this session
    with opskew.trace(instrument="native") as t2:
        go.set()
        time.sleep(0.2)
        torch.mul(a, a)
    stop.set()
    th.join()
    assert {e.name for e in t1.events} == {"aten::add"}
    assert {e.name for e in t2.events} == {"aten::mul"}
    done = []

    def own():
        with opskew.trace(instrument="native") as t3:
            torch.sub(a, a)
        done.append({e.name for e in t3.events})

    th = threading.Thread(target=own)
    th.start()
    th.join()
    assert done == [{"aten::sub"}]


def test_mlp_backward_recorded_and_nested(shim):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    x = torch.randn(8, 16)
    with opskew.trace(instrument="native") as t:
        m(x).sum().backward()
    ev = list(t.events)
    assert t.lost["total"] == 0
    names = {e.name for e in ev}
    assert {"aten::addmm", "aten::relu"} <= names, names
    nodes = [e for e in ev if e.name == "autograd::engine::evaluate_function: AddmmBackward0"]
    assert len(nodes) == 2, names
    # Backward operators nest under the autograd node that ran them, on its thread.
    for node in nodes:
        inside = [e for e in ev if e.tid == node.tid and e.depth > node.depth
                  and node.ts_ns <= e.ts_ns and e.ts_ns + e.dur_ns <= node.ts_ns + node.dur_ns]
        assert any(e.name == "AddmmBackward0" and e.depth == node.depth + 1 for e in inside), inside
        assert any(e.name == "aten::mm" for e in inside), [e.name for e in inside]


@pytest.mark.parametrize("first,second", [("torch", "opskew"), ("opskew", "torch")])
def test_either_import_order_then_trace_records_aten_ops(shim, tmp_path, first, second):
    """Issue 13's friction 1: `import opskew; import torch` (and the other
    order, a notebook's) then `with opskew.trace(...)` records aten ops."""
    p = py(f"""
        import {first}
        import {second}
        a = torch.ones(1)
        with opskew.trace("t.json") as t:
            for _ in range(1000):
                a + a
        assert t.instrument == "native", t.instrument
        assert sum(e.name == "aten::add" for e in t.events) == 1000
        import json
        assert json.load(open("t.json"))["opskew"]["instrument"] == "native"
        print("ok")
    """, tmp_path)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr
    assert p.stderr == "", p.stderr  # built already: no notice


FALLBACK = """
    import opskew
    with opskew.trace(instrument="native") as t:
        import torch
        a = torch.ones(1)
        for _ in range(100):
            torch.add(a, a)
    names = [e.name for e in t.events]
    print(t.instrument, names.count("aten::add"), names.count("torch.add"))
"""


@pytest.mark.skipif(not torch.profiler.itt.is_available(), reason="torch built without ITT")
def test_disabled_falls_back_to_itt_with_one_line(tmp_path):
    p = py(FALLBACK, tmp_path, env={"OPSKEW_NATIVE": "0"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["itt", "100", "0"], p.stdout
    lines = p.stderr.strip().splitlines()
    assert lines == ["opskew: the native collector is unavailable (disabled by OPSKEW_NATIVE=0); "
                     "recording with itt instead"], p.stderr


def test_no_compiler_falls_back_with_one_line(tmp_path):
    # A fresh cache (nothing built) and no compiler on PATH.
    p = py(FALLBACK, tmp_path, env={"PATH": str(tmp_path), "CXX": "", "OPSKEW_CACHE_DIR": str(tmp_path / "c")})
    assert p.returncode == 0, p.stderr
    want = "itt" if torch.profiler.itt.is_available() else "pyhook"
    assert p.stdout.split()[0] == want, p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no C++ compiler" in lines[0] and f"recording with {want}" in lines[0], p.stderr


def test_torch_first_and_disabled_falls_back_to_pyhook(tmp_path):
    p = py("""
        import torch, opskew
        with opskew.trace() as t:
            torch.add(torch.ones(1), 1)
        print(t.instrument, [e.name for e in t.events])
    """, tmp_path, env={"OPSKEW_NATIVE": "0"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("pyhook") and "torch.add" in p.stdout, p.stdout
    assert len(p.stderr.strip().splitlines()) == 1 and "recording with pyhook" in p.stderr, p.stderr


def test_record_native_and_its_fallback(shim, tmp_path):
    code = "import torch; a=torch.ones(1); [torch.add(a,a) for _ in range(1000)]"
    for extra, env, want in ((["--instrument", "native"], {}, "native"),
                             ([], {}, "native"),
                             (["--instrument", "native"], {"OPSKEW_NATIVE": "0"}, "itt")):
        if want == "itt" and not torch.profiler.itt.is_available():
            continue
        out = tmp_path / "t.json"
        e = dict(os.environ, **env)
        e.pop("OPSKEW_INSTRUMENT", None)
        p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(out), *extra, "--", PY, "-c", code],
                           capture_output=True, text=True, cwd=tmp_path, env=e, timeout=240)
        assert p.returncode == 0, p.stderr
        doc = json.loads(out.read_text())
        assert doc["opskew"]["instrument"] == want, (extra, env, p.stderr)
        assert sum(ev.get("name") == "aten::add" for ev in doc["traceEvents"]) == 1000
        notice = [ln for ln in p.stderr.splitlines() if "native collector is unavailable" in ln]
        assert len(notice) == (1 if want == "itt" else 0), p.stderr


def test_failed_compile_falls_back_with_one_line(tmp_path):
    # A "compiler" that fails every build, in a fresh cache: cpp_extension
    # raises, and the session records with the fallback after one line.
    fake = tmp_path / "bin" / "c++"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    env = {"CXX": str(fake), "OPSKEW_CACHE_DIR": str(tmp_path / "c")}
    p = py(FALLBACK, tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    want = "itt" if torch.profiler.itt.is_available() else "pyhook"
    assert p.stdout.split()[0] == want, p.stdout
    notice = [ln for ln in p.stderr.splitlines() if "native collector is unavailable" in ln]
    assert len(notice) == 1 and "compiling it failed" in notice[0], p.stderr
    assert "Traceback" not in p.stderr
    # Not retried on the next run (it would cost a build each time).
    p = py(FALLBACK, tmp_path, env=env)
    assert p.returncode == 0 and p.stdout.split()[0] == want, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "an earlier build or load failed" in lines[0], p.stderr


def test_a_killed_build_a_broken_library_and_no_compiler_still_give_the_shim(tmp_path, shim):
    """A build killed half-way left torch's build lock in the cache, and every
    later run waited on it for ever; a library cut short was loaded (or
    refused on every run); a shim in the cache was ignored without a
    compiler on PATH. Builds now go to a folder of their own and are renamed
    into place; a library that does not load is built once more; without a
    compiler, a shim of the same source and torch is loaded."""
    cache = tmp_path / "c"
    d, name = native.shim_target(torch)
    mine = cache / "native" / os.path.basename(d) / (name + ".so")
    mine.parent.mkdir(parents=True)
    # What a build killed half-way leaves: its lock (the pid of a process now gone) and its folder.
    dead = int(subprocess.run([PY, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    (mine.parent / (name + ".lock")).write_text(str(dead))
    (mine.parent / f".build-{dead}-x").mkdir()
    (mine.parent / f".build-{dead}-x" / "part.o").write_bytes(b"x")
    mine.write_bytes(b"")  # and a library cut short
    p = py(FALLBACK, tmp_path, env={"OPSKEW_CACHE_DIR": str(cache)}, timeout=300)
    assert p.returncode == 0 and p.stdout.split()[0] == "native", (p.stdout, p.stderr)
    assert "building opskew's native collector" in p.stderr
    assert mine.stat().st_size > 1000 and sorted(os.listdir(mine.parent)) == [name + ".so"]
    # No compiler on PATH: the shim another compiler built for this source and torch is used.
    other = mine.with_name(name.rsplit("_", 1)[0] + "_00000000.so")
    mine.rename(other)
    p = py(FALLBACK, tmp_path, env={"OPSKEW_CACHE_DIR": str(cache), "CXX": "no-such-cxx"})
    assert p.returncode == 0 and p.stdout.split()[0] == "native", (p.stdout, p.stderr)
    assert "building" not in p.stderr
