"""`opskew correct -o` writes the raw trace's twin (docs/correct.md, "The
twin"): every record of the raw trace, in the same form, only times changed
and opskew's own args added; flows and instants re-timed with the operators
that hold them; the GPU's rows as they were. And it nests as its text says
when read as float64 (docs/outputs.md, "Read as float64").

Real torch traces (a few Linear layers and AdamW, two steps in
record_function ranges, minimal and record_shapes+with_stack) and a
synthetic Kineto-shaped CUDA trace (test_audit's)."""

import collections
import gzip
import json
from decimal import Decimal

import pytest

from conftest import run_opskew
from floatnest import float_nesting_errors
from test_audit import kineto

torch = pytest.importorskip("torch")

# What opskew adds to a record's args; everything else is the raw record's.
OWN = {"reported_ts", "reported_dur", "descendants", "py_descendants"}
CONFIGS = {"minimal": {}, "record_shapes+with_stack": {"record_shapes": True, "with_stack": True}}


def _record(path, options):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                                torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(16, 32)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **options) as p:
        for n in range(2):
            with torch.profiler.record_function(f"step#{n}"):
                model(x).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
    p.export_chrome_trace(str(path))
    return path


def _calibration(path, config, w, delta, w_py=0.0, delta_py=0.0):
    from opskew.calibration.store import SCHEMA, make_key

    cal = {"schema": SCHEMA, "key": make_key("torch.profiler", config, torch.__version__, "cpu", 1),
           "w_ns": {"median": w}, "delta_ns": {"median": delta}}
    if w_py:
        cal.update(w_py_ns={"median": w_py}, delta_py_ns={"median": delta_py})
    path.write_text(json.dumps(cal))
    return path


def _load(path):
    """The trace, its numbers exact (Decimal): the times as written."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def _correct(trace, cal, out, tmp_path):
    js = tmp_path / "r.json"
    p = run_opskew("correct", str(trace), "--calibration", str(cal), "--force", "-o", str(out), "--json", str(js))
    assert p.returncode == 0, p.stderr
    return json.loads(js.read_text())


def _identity(e):
    """A record's identity apart from its times: kind, place, names, args less
    opskew's own, flow id."""
    args = {k: v for k, v in (e.get("args") or {}).items() if k not in OWN}
    rest = {k: v for k, v in e.items() if k not in ("ts", "dur", "args")}
    return json.dumps([rest, args], sort_keys=True, default=str)


def _holder(events, point):
    """The innermost complete event of the point's thread holding its ts (a
    begin holds, an end does not; of equal intervals the later in the file,
    as the nesting rule has it), by its identity, or None."""
    key = (str(point.get("pid")), str(point.get("tid")))
    best = None
    for e in events:
        if e.get("ph") != "X" or (str(e.get("pid")), str(e.get("tid"))) != key:
            continue
        ts, end, t = e["ts"], e["ts"] + e["dur"], point["ts"]
        if ts <= t < end or ts == t == end:
            if best is None or (ts, -end) >= best[0]:  # equal intervals: the later one is inside
                best = ((ts, -end), _identity(e))
    return best and best[1]


def _same_holders(raw, twin):
    """Every flow end and instant is held by the same operator in both."""
    def points(doc):  # by identity (a flow's id is in it), then in time order
        ps = [e for e in doc["traceEvents"] if e.get("ph") in ("s", "f", "i", "I")]
        return sorted(ps, key=lambda e: (_identity(e), e["ts"]))
    rp, tp = points(raw), points(twin)
    assert [_identity(e) for e in rp] == [_identity(e) for e in tp]
    for a, b in zip(rp, tp):
        assert _holder(raw["traceEvents"], a) == _holder(twin["traceEvents"], b), (a, b)
    return len(rp)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("twin")
    return {c: _record(d / f"{c}.json", o) for c, o in CONFIGS.items()}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_the_corrected_trace_is_the_raw_traces_twin(traces, tmp_path, config):
    raw_path = traces[config]
    stack = "with_stack" in config
    cal = _calibration(tmp_path / "cal.json", config, 900.0, 40.0, *((300.0, 20.0) if stack else ()))
    out = tmp_path / "c.json.gz"
    r = _correct(raw_path, cal, out, tmp_path)
    raw, twin = _load(raw_path), _load(out)
    # The document's members: the raw trace's, opskew's header beside them.
    assert set(twin) == set(raw) | {"opskew"}
    assert all(twin[k] == raw[k] for k in raw if k != "traceEvents")
    # Every raw record once, in the same form, apart from its times and
    # opskew's args (metadata, flows, instants, Kineto's span, the operators'
    # args: Input Dims, External id, Python id...).
    a = collections.Counter(_identity(e) for e in raw["traceEvents"])
    b = collections.Counter(_identity(e) for e in twin["traceEvents"])
    assert a == b
    kinds = collections.Counter(e["ph"] for e in raw["traceEvents"])
    assert kinds["M"] >= 5 and kinds["s"] > 0 and kinds["f"] > 0 and kinds["i"] == 2
    assert sum(kinds.values()) == r["stats"]["events"] == (r["stats"]["corrected_events"] + r["stats"]["passed_events"]
                                                           + r["stats"]["retimed_events"])
    if stack:
        assert any("Python id" in (e.get("args") or {}) for e in twin["traceEvents"])
    else:
        assert any("Ev Idx" in (e.get("args") or {}) for e in twin["traceEvents"])
    # The corrected events carry their reported times; what is not on an
    # operator's thread (Kineto's "Trace" span, its instants) keeps its times.
    corrected = [e for e in twin["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation", "python_function")]
    assert len(corrected) == r["stats"]["corrected_events"]
    assert all({"reported_ts", "reported_dur", "descendants"} <= set(e["args"]) for e in corrected)
    moved = [e for e in corrected if abs(e["ts"] - e["args"]["reported_ts"]) > 0.0015]
    assert len(moved) > len(corrected) // 2  # W = 900 ns moves them
    span = [e for e in twin["traceEvents"] if e.get("cat") == "Trace"]
    raw_span = [e for e in raw["traceEvents"] if e.get("cat") == "Trace"]
    assert len(span) == 1 and (span[0]["ts"], span[0]["dur"]) == (raw_span[0]["ts"], raw_span[0]["dur"])
    # Flows' ends and instants lie in the same operators as in the raw trace.
    assert _same_holders(raw, twin) >= 10
    # Read as float64, the twin nests as its exact text does.
    assert float_nesting_errors(str(out)) == []


def test_a_cuda_traces_twin_keeps_the_gpu_and_its_links(tmp_path):
    """The synthetic Kineto CUDA trace (kernels on the GPU's pid and stream,
    cudaLaunchKernel on the CPU thread, the ac2g flow pair): the kernels and
    the flow's end keep their times; the launch and the flow's start are
    re-timed inside their operator; External id and correlation stay. Kineto
    writes the runtime calls after the operators: that order gives the same
    twin (the thread is held whole)."""
    from opskew.analyze.tracefile import correct, summarize
    from opskew.stats.costmodel import CostModel

    doc = kineto(steps=3)
    late = [e for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime" or e["ph"] == "s"]
    kineto_order = dict(doc, traceEvents=[e for e in doc["traceEvents"] if e not in late] + late)
    twins = []
    for name, d in (("sorted", doc), ("kineto", kineto_order)):
        raw = tmp_path / f"{name}.json"
        raw.write_text(json.dumps(d))
        out = tmp_path / f"{name}.c.json"
        r = correct(str(raw), CostModel.default(2000.0, 100.0), out=str(out))
        assert r["status"] == "ok" and r["stats"]["retimed_events"] == 6  # 3 launches, 3 flow starts
        twin = _load(out)
        assert collections.Counter(map(_identity, d["traceEvents"])) == collections.Counter(
            map(_identity, twin["traceEvents"]))
        gpu = lambda ev: sorted((e["ph"], Decimal(str(e["ts"])), Decimal(str(e.get("dur", 0)))) for e in ev
                                if e.get("pid") == 0)
        assert gpu(twin["traceEvents"]) == gpu(d["traceEvents"]) and len(gpu(d["traceEvents"])) == 7
        by = lambda cat: [e for e in twin["traceEvents"] if e.get("cat") == cat]
        for op, launch, flow in zip(by("cpu_op"), by("cuda_runtime"), [e for e in by("ac2g") if e["ph"] == "s"]):
            assert launch["ts"] != launch["args"]["reported_ts"]  # moved with its operator
            assert op["ts"] < launch["ts"] and launch["ts"] + launch["dur"] < op["ts"] + op["dur"]
            assert flow["ts"] == launch["ts"] and flow["args"]["reported_ts"] == launch["args"]["reported_ts"]
            assert launch["args"]["External id"] == op["args"]["External id"]
        assert float_nesting_errors(str(out)) == []
        # One time line: the summary of the twin (the launch inside its
        # operator, as in the raw trace) reads the table.
        s = {o["name"]: o for o in summarize(str(out))["ops"]}
        for o in r["ops"]:
            assert (s[o["name"]]["total_ns"], s[o["name"]]["self_ns"]) == (o["corrected_total_ns"],
                                                                          o["corrected_self_ns"])
        twins.append([e for e in twin["traceEvents"] if e["ph"] != "M"])
        if name == "kineto":
            assert r["stats"]["held_threads"] == 1 and r["stats"]["passes"] == 2
    key = lambda e: (e["ph"], e.get("cat", ""), e["ts"])
    assert sorted(twins[0], key=key) == sorted(twins[1], key=key)


def test_the_twin_is_about_the_raw_traces_size(traces, tmp_path):
    """The size the twin costs: the raw records, their whitespace left out,
    with opskew's args beside them."""
    import os

    raw_path = traces["record_shapes+with_stack"]
    cal = _calibration(tmp_path / "cal.json", "record_shapes+with_stack", 900.0, 40.0, 300.0, 20.0)
    out = tmp_path / "c.json"
    _correct(raw_path, cal, out, tmp_path)
    raw_compact = len(json.dumps(_load(raw_path), separators=(",", ":"), default=str))
    assert os.path.getsize(out) < 1.5 * raw_compact


@pytest.mark.skipif(not torch.profiler.itt.is_available(), reason="torch built without ITT")
def test_the_tracers_traces_nest_as_their_text_in_float64(tmp_path):
    """opskew's own tracer writes the same rule (docs/outputs.md, "Read as
    float64"): its trace of a model's steps reads in float64 as its exact
    text, and the corrected twin of it too."""
    import subprocess
    import sys
    import textwrap

    from opskew.analyze.tracefile import correct

    from opskew.stats.costmodel import CostModel

    code = textwrap.dedent("""
        import opskew
        with opskew.trace("t.json"):
            import torch
            m = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
            opt = torch.optim.AdamW(m.parameters())
            for _ in range(3):
                m(torch.randn(8, 32)).sum().backward()
                opt.step()
                opt.zero_grad()
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    trace = tmp_path / "t.json"
    assert len([e for e in _load(trace)["traceEvents"] if e["ph"] == "X"]) > 300
    assert float_nesting_errors(str(trace)) == []
    r = correct(str(trace), CostModel.default(500.0, 20.0), out=str(tmp_path / "c.json"))
    assert r["status"] == "ok"
    assert float_nesting_errors(str(tmp_path / "c.json")) == []
    raw, twin = _load(trace), _load(tmp_path / "c.json")
    assert collections.Counter(map(_identity, raw["traceEvents"])) == collections.Counter(
        map(_identity, twin["traceEvents"]))
