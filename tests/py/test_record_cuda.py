"""`opskew record --device cuda` and opskew.trace(device="cuda"): the NVTX
route. Without CUDA only the argument handling and the errors run here (CI);
the GPU cases are marked `gpu` and skip cleanly without a device."""

import collections
import ctypes
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

PY = sys.executable
HAS_CUDA = torch.cuda.is_available()
gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
no_gpu_only = pytest.mark.skipif(HAS_CUDA, reason="checks the CUDA-absent path")


def record(tmp_path, code, *extra, timeout=300):
    out = tmp_path / "t.json"
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(out), *extra, "--", PY, "-c",
                        textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    return p, out


def test_nvtx_collector_is_installed_and_exports_the_injection_entry():
    import opskew.tracer.session as tr

    lib = ctypes.CDLL(tr.collector_path("nvtx"))
    assert lib.InitializeInjectionNvtx2 and lib.osk_collector_bound and lib.osk_collector_finish
    # Refuses an export table it cannot use (NVTX then unloads it).
    lib.InitializeInjectionNvtx2.argtypes = [ctypes.c_void_p]
    proto = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32)
    nothing = proto(lambda table_id: None)
    assert lib.InitializeInjectionNvtx2(ctypes.cast(nothing, ctypes.c_void_p)) == 0


@no_gpu_only
@pytest.mark.parametrize("extra", [("--device", "cuda"), ("--instrument", "nvtx")])
def test_record_cuda_absent_is_one_line_exit_2(tmp_path, extra):
    p, out = record(tmp_path, "import torch; torch.ones(1)", *extra)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("opskew record: ") and "CUDA" in lines[0]
    assert not out.exists()


@no_gpu_only
def test_trace_cuda_absent_raises_setup_error(tmp_path):
    code = """
        import opskew
        from opskew.tracer.session import TracerSetupError
        try:
            with opskew.trace(device="cuda"):
                pass
        except TracerSetupError as e:
            assert "CUDA" in str(e), e
            print("ok")
    """
    p = subprocess.run([PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr


def test_bad_device_and_nvtx_after_torch(tmp_path):
    code = """
        import torch, opskew
        from opskew.errors import UsageError
        from opskew.tracer.session import TracerSetupError
        try:
            opskew.trace(device="tpu")
        except UsageError as e:
            assert "device" in str(e)
        try:
            with opskew.trace(device="cuda"):
                pass
        except TracerSetupError as e:  # torch first: NVTX cannot be arranged any more
            assert "NVTX_INJECTION64_PATH" in str(e), e
            print("ok")
    """
    env = {k: v for k, v in os.environ.items() if k != "NVTX_INJECTION64_PATH"}
    p = subprocess.run([PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120, env=env)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr


CUDA_LOOP = """
import torch
a = torch.ones(16, device="cuda")
for _ in range(2000):
    torch.add(a, a)
m = torch.nn.Linear(16, 4).cuda()
m(a.unsqueeze(0)).sum().backward()
torch.cuda.synchronize()
"""


@gpu
@needs_gpu
def test_record_cuda_every_operator(tmp_path):
    p, out = record(tmp_path, CUDA_LOOP, "--device", "cuda")
    assert p.returncode == 0, p.stderr
    trace = json.loads(out.read_text())
    assert trace["opskew"]["instrument"] == "nvtx" and "instrument nvtx" in p.stderr
    assert trace["opskew"]["lost"]["total"] == 0
    names = collections.Counter(e["name"] for e in trace["traceEvents"] if e["ph"] == "X")
    assert names["aten::add"] == 2000, names.most_common(10)
    assert names["aten::linear"] >= 1 and names["aten::addmm"] >= 1
    assert any(n.startswith("autograd::engine::evaluate_function") for n in names)
    assert not any("seq =" in n or "op_id" in n for n in names)  # only the name prefix


@gpu
@needs_gpu
def test_trace_cuda_in_process(tmp_path):
    code = """
        import opskew
        with opskew.trace("t.json", device="cuda") as t:
            import torch
            a = torch.ones(8, device="cuda")
            for _ in range(500):
                torch.mul(a, a)
            torch.cuda.synchronize()
        assert t.instrument == "nvtx"
        assert [e.name for e in t.events].count("aten::mul") == 500
        print("ok")
    """
    p = subprocess.run([PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=300)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr
