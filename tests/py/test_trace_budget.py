"""The tracer's memory budget and the time order of its traces, end to end
through `opskew record` against real torch (no mocks): past the budget,
events go through a spill file and come back without loss; an invalid
budget is a clear error at start; a recorded trace is in time order, so
`opskew summary` reads it in one pass with the tracer's own figures."""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.profiler.itt.is_available(), reason="torch built without ITT")

PY = sys.executable

MLP = """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
x = torch.randn(32, 64)
for _ in range(ITERS):
    m.zero_grad()
    m(x).sum().backward()
"""


def record(tmp_path, code, budget_mb=None, timeout=300):
    """`opskew record --json` of `code` with the spill file's $TMPDIR in a
    folder of its own; returns (process, trace path, spill folder)."""
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(spill_dir))
    env.pop("OPSKEW_TRACE_BUDGET_MB", None)
    if budget_mb is not None:
        env["OPSKEW_TRACE_BUDGET_MB"] = budget_mb
    out = tmp_path / "t.json"
    p = subprocess.run([PY, "-m", "opskew", "record", "-o", str(out), "--json", "--instrument", "itt",
                        "--", PY, "-c", code], capture_output=True, text=True, timeout=timeout,
                       cwd=tmp_path, env=env)
    return p, out, spill_dir


def spill_files(folder):
    return [f for f in os.listdir(folder) if f.startswith("opskew-spill")]


def test_budget_of_1_mib_spills_200000_adds_without_loss(tmp_path):
    code = "import torch; a=torch.ones(1); [torch.add(a,a) for _ in range(200000)]"
    p, out, spill_dir = record(tmp_path, code, budget_mb="1")
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    adds = sum(1 for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "aten::add")
    assert adds == 200000
    meta = doc["opskew"]
    assert meta["lost"]["total"] == 0 and meta["lost"]["spill"] == 0
    # 200,000 events are 4.8 MB: all but about 1 MiB of full chunks (and the
    # thread's current one) went through the spill file.
    spill = meta["spill"]
    assert spill["budget_bytes"] == 1 << 20
    assert spill["events"] >= 200000 - (1 << 20) // 24 - 2 * 4096
    assert spill["bytes"] == 24 * spill["events"]
    assert meta["events"] == sum(1 for e in doc["traceEvents"] if e["ph"] == "X")
    # The tracer's summary says the same.
    summary = json.loads(p.stdout)
    assert summary["spill"] == spill
    assert {r["name"]: r["calls"] for r in summary["ops"]}["aten::add"] == 200000
    # The spill file was unlinked as soon as it was open: nothing is left.
    assert spill_files(spill_dir) == []


def test_budget_0_never_spills(tmp_path):
    code = "import torch; a=torch.ones(1); [torch.add(a,a) for _ in range(50000)]"
    p, out, _ = record(tmp_path, code, budget_mb="0")
    assert p.returncode == 0, p.stderr
    meta = json.loads(out.read_text())["opskew"]
    assert meta["spill"] == {"events": 0, "bytes": 0, "budget_bytes": 0}
    assert meta["lost"]["total"] == 0


@pytest.mark.parametrize("value", ["lots", "-1", "1.5", "64MB"])
def test_invalid_budget_is_a_clear_error_at_start(tmp_path, value):
    p, out, _ = record(tmp_path, "import torch", budget_mb=value)
    assert p.returncode != 0
    assert f"OPSKEW_TRACE_BUDGET_MB={value} is not a whole number of MiB" in p.stderr
    assert "Traceback" not in p.stderr
    assert not out.exists()


@pytest.mark.parametrize("budget_mb", [None, "1"])
def test_recorded_mlp_reads_in_one_pass_with_the_tracers_figures(tmp_path, budget_mb):
    """Forward and backward nest (autograd::engine::evaluate_function over
    the backward operators, linear over addmm): written in time order, parents
    first, the reader nests them without its sorting pass, and its per-op
    figures are the tracer's own, with and without spilling."""
    iters = 20 if budget_mb is None else 1000  # about 106 events an iteration: 2.5 MB
    p, out, _ = record(tmp_path, MLP.replace("ITERS", str(iters)), budget_mb=budget_mb)
    assert p.returncode == 0, p.stderr
    own = json.loads(p.stdout)
    doc = json.loads(out.read_text())
    assert max(e["args"]["depth"] for e in doc["traceEvents"] if e["ph"] == "X") >= 2
    if budget_mb:
        assert doc["opskew"]["spill"]["events"] > 0 and doc["opskew"]["lost"]["total"] == 0
    # Each thread's events in the file: start ascending.
    last = {}
    for e in doc["traceEvents"]:
        if e["ph"] != "X":
            continue
        ts = round(e["ts"] * 1000)
        assert ts >= last.get(e["tid"], ts), e
        last[e["tid"]] = ts
    r = subprocess.run([PY, "-m", "opskew", "summary", str(out), "--json", "-"], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    read = json.loads(r.stdout)
    assert read["stats"]["passes"] == 1 and read["stats"]["resorted_events"] == 0
    assert read["stats"]["overlaps"] == 0
    mine = {o["name"]: (o["calls"], o["total_ns"], o["self_ns"]) for o in own["ops"]}
    theirs = {o["name"]: (o["calls"], o["total_ns"], o["self_ns"]) for o in read["ops"]}
    assert mine == theirs
    assert mine["aten::addmm"][0] == 2 * iters
