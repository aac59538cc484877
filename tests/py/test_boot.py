"""The one collector surface and its bootstrap (opskew._boot): the record
child without opskew importable, the ctypes layout check, summaries read
through ctypes, and the fork check seen from Python."""

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import exited

torch = pytest.importorskip("torch")
import opskew._pyhook  # noqa: E402
from opskew.tracer import collectors as _boot  # noqa: E402
from opskew.tracer.session import collector_path  # noqa: E402

PY = sys.executable
HAS_ITT = torch.profiler.itt.is_available()
INSTRUMENTS = ["pyhook"] + (["itt"] if HAS_ITT else [])


def _libraries():
    return {"itt": collector_path("itt"), "nvtx": collector_path("nvtx"), "pyhook": opskew._pyhook.__file__}


def test_boot_is_stdlib_only():
    # It is loaded by path in interpreters where opskew is not importable.
    src = open(_boot.__file__).read()
    assert "from ." not in src and "import opskew" not in src and "from opskew" not in src
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('b', %r); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            "print(sorted(n.split('.')[0] for n in sys.modules if n.split('.')[0] in ('opskew', 'torch')))"
            % _boot.__file__)
    p = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stdout + p.stderr


@pytest.mark.parametrize("which", ["itt", "nvtx", "pyhook"])
def test_every_collector_exports_the_same_surface(which):
    lib = _boot.declare(ctypes.CDLL(_libraries()[which]))  # also checks the struct mirrors
    assert lib.osk_collector_instrument().decode() == which
    assert lib.osk_trace_loss_count() == 5 and lib.osk_trace_loss_key(0) == b"nomem_chunk"
    assert lib.osk_strerror(-5) == b"input/output error"
    assert lib.osk_collector_finish() == 1  # OSK_COLLECTOR_NOT_OURS: no record session here


def test_struct_mirrors_are_checked_against_c():
    lib = ctypes.CDLL(_libraries()["itt"])
    _boot.declare(lib)

    class Shifted(ctypes.Structure):  # w_ns and delta_ns swapped in size: a stale mirror
        _c_name_ = "osk_trace_calib_t"
        _fields_ = [("w_ns", ctypes.c_float), ("delta_ns", ctypes.c_double)]

    with pytest.raises(_boot.SetupError, match=r"osk_trace_calib_t\.w_ns .*reinstall opskew"):
        _boot.check_layouts(lib, [Shifted])

    class Extra(ctypes.Structure):
        _c_name_ = "osk_trace_op_t"
        _fields_ = _boot.Op._fields_ + [("invented", ctypes.c_uint64)]

    with pytest.raises(_boot.SetupError, match="osk_trace_op_t"):
        _boot.check_layouts(lib, [Extra])


def _poisoned_env(tmp_path):
    """An environment where `import opskew` fails in the record child."""
    poison = tmp_path / "poison" / "opskew"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('opskew is not importable here')\n")
    env = dict(os.environ, PYTHONPATH=str(poison.parent))
    return env, str(poison.parent)


@pytest.mark.parametrize("instrument", INSTRUMENTS)
def test_record_child_without_opskew_importable(tmp_path, instrument):
    env, poison = _poisoned_env(tmp_path)
    out = tmp_path / "t.json"
    user = textwrap.dedent("""
        import torch
        try:
            import opskew
        except ImportError:
            pass
        else:
            raise SystemExit("opskew was importable in the child")
        a = torch.ones(1)
        for _ in range(100):
            torch.add(a, a)
    """)
    # The parent (opskew record) drops the poison from its own path.
    parent = ("import sys; sys.path.remove(%r); from opskew.cli.main import main; sys.exit(main())" % poison)
    p = subprocess.run([PY, "-c", parent, "record", "-o", str(out), "--instrument", instrument, "--", PY, "-c",
                        user], capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    trace = json.loads(out.read_text())
    name = "aten::add" if instrument == "itt" else "torch.add"
    assert sum(e["name"] == name for e in trace["traceEvents"]) == 100
    assert trace["opskew"]["instrument"] == instrument


FORKING_SCRIPT = """
import os, sys, time, torch
out = sys.argv[1]
a = torch.ones(1)
for _ in range(50):
    torch.add(a, a)
pid = os.fork()
if pid == 0:
    # The child records into its inherited copy of the session, outlives the
    # parent and exits through sys.exit (atexit handlers run) after the
    # parent wrote the trace: it must not replace it with its own copy.
    for _ in range(500):
        torch.mul(a, a)
    deadline = time.time() + 60
    while not os.path.exists(out) and time.time() < deadline:
        time.sleep(0.02)
    sys.exit(0)
with open(out + ".child", "w") as f:
    f.write(str(pid))
for _ in range(20):
    torch.sub(a, a)
"""


def _wait_gone(pid, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if exited(pid):
            return
        time.sleep(0.02)
    raise AssertionError(f"the forked child {pid} did not exit")


@pytest.mark.parametrize("instrument", INSTRUMENTS)
def test_record_forked_child_does_not_write_the_trace(tmp_path, instrument):
    out = tmp_path / "t.json"
    script = tmp_path / "forking.py"
    script.write_text(FORKING_SCRIPT)
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(out), "--instrument", instrument, "--", PY,
                        str(script), str(out)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    _wait_gone(int((tmp_path / "t.json.child").read_text()))
    names = [e["name"] for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    prefix = "aten::" if instrument == "itt" else "torch."
    assert names.count(prefix + "add") == 50 and names.count(prefix + "sub") == 20, names[-5:]
    assert names.count(prefix + "mul") == 0, "the forked child's events reached the trace"


def test_summary_rows_read_through_ctypes_match_c_json(tmp_path):
    code = """
        import ctypes, json, math, opskew
        with opskew.trace(instrument="pyhook") as t:
            import torch
            a = torch.ones(1)
            for _ in range(300):
                torch.add(a, a)
            torch.mul(a, a)
        lib, s = t._lib, None
        lib.osk_trace_summary_json.restype = ctypes.c_void_p
        lib.osk_trace_summary_json.argtypes = [ctypes.c_void_p]
        out = ctypes.c_void_p()
        assert lib.osk_trace_summarize(t._snap, None, ctypes.byref(out)) == 0
        s = out.value
        doc = json.loads(ctypes.string_at(lib.osk_trace_summary_json(s)).decode())
        lib.osk_trace_summary_free(s)
        sm = t.summary
        # The same rows; floats exact here, printed with fewer digits in the JSON.
        assert [r.keys() for r in sm.rows] == [r.keys() for r in doc["ops"]]
        for mine, theirs in zip(sm.rows, doc["ops"]):
            for k, v in theirs.items():
                assert v == mine[k] or math.isclose(v, mine[k], rel_tol=1e-9), (k, mine, theirs)
        for k in ("instrument", "events", "threads", "lost", "unmatched_ends", "open_at_stop", "residual_ns"):
            assert sm.data[k] == doc[k], (k, sm.data[k], doc[k])
        assert math.isclose(sm.data["calibration"]["w_ns"], doc["calibration"]["w_ns"], rel_tol=1e-9)
        assert "torch.add" in str(sm)
        print("ok")
    """
    p = subprocess.run([PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=180)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr
