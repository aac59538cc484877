"""The corrected key_averages() (docs/profile.md, "A corrected
key_averages()"): opskew.profile's corrected_averages() against its own
report to the nanosecond, key_averages() still torch's own, and the same
table from any trace (`opskew summary TRACE --corrected`,
opskew.corrected_averages)."""

import json
import re

import pytest

torch = pytest.importorskip("torch")

from torch.autograd.profiler_util import EventList, FunctionEventAvg, _format_time  # noqa: E402

import opskew  # noqa: E402
from conftest import run_opskew, seed_native_cache  # noqa: E402
from opskew.analyze.verdict import per_operator, trust_mark  # noqa: E402
from opskew.results.averages import CorrectedAverage, CorrectedAverages  # noqa: E402
from opskew.stats.costmodel import CostModel  # noqa: E402

STEP = re.compile(r"ProfilerStep#\d+$")


def train_steps(steps, prof=None):
    """A small MLP's training loop: forward, loss, backward, SGD step."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    for _ in range(steps):
        opt.zero_grad()
        ((m(x) - y) ** 2).mean().backward()
        opt.step()
        if prof is not None:
            prof.step()


@pytest.fixture(scope="module")
def prof():
    """Two cycles of 7 active steps, each paired with a wait step of its own:
    12 pairs, a W with a 95% interval, every trace corrected at stop()."""
    sched = torch.profiler.schedule(skip_first=10, wait=21, warmup=1, active=7, repeat=2)
    with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                        report_file=None) as p:
        train_steps(80, p)
    assert p.report.get("operators", {}).get("ops"), p.report.get("fallback") or p.report.get("error")
    return p


def expected_rows(rep):
    """The report's per-operator rows keyed as key_averages() keys them, by hand."""
    rows = {}
    for o in rep["operators"]["ops"]:
        if o["python"]:
            continue
        rows.setdefault("ProfilerStep*" if STEP.match(o["name"]) else o["name"], []).append(o)
    return rows


def test_key_averages_is_still_torchs_own(prof):
    assert "key_averages" not in vars(opskew.profile)  # not opskew's: torch's, run on the wrapped profiler
    ka = prof.key_averages()
    assert type(ka) is EventList and all(type(e) is FunctionEventAvg for e in ka)
    own = {e.key: (e.count, e.self_cpu_time_total, e.cpu_time_total) for e in prof.prof.key_averages()}
    assert {e.key: (e.count, e.self_cpu_time_total, e.cpu_time_total) for e in ka} == own
    # The raw times: what the trace the report read says (to the trace's
    # microsecond with 3 decimals: 1 ns a call), not corrected ones.
    rows = expected_rows(prof.report)
    for e in ka:
        ops = rows[e.key]
        reported = sum(o["reported_self_ns"] for o in ops)
        assert abs(e.self_cpu_time_total * 1e3 - reported) <= e.count + 1, e.key
    assert "ProfilerStep*" in own


def test_corrected_averages_agree_with_the_report_to_the_nanosecond(prof):
    ca = prof.corrected_averages()
    assert isinstance(ca, CorrectedAverages) and all(isinstance(e, CorrectedAverage) for e in ca)
    rows = expected_rows(prof.report)
    assert {e.key for e in ca} == set(rows)
    threshold = prof.report["verdict"]["threshold"]
    for e in ca:
        ops = rows[e.key]
        self_ns = sum(o["corrected_self_ns"]["median"] for o in ops)
        total_ns = sum(o["corrected_total_ns"]["median"] for o in ops)
        # Exact: the report's figures themselves (summed in its order for ProfilerStep*).
        assert e.self_cpu_time_total_ns == self_ns and e.cpu_time_total_ns == total_ns, e.key
        assert e.self_ci_ns == [sum(o["corrected_self_ns"]["ci95"][k] for o in ops) for k in (0, 1)]
        assert e.total_ci_ns == [sum(o["corrected_total_ns"]["ci95"][k] for o in ops) for k in (0, 1)]
        assert e.count == sum(o["calls"] for o in ops)
        # torch's attributes in us, within a float's rounding of ns / 1000.
        assert abs(e.self_cpu_time_total * 1e3 - self_ns) < 1e-6 * max(1.0, self_ns)
        assert abs(e.cpu_time * e.count * 1e3 - total_ns) < 1e-6 * max(1.0, total_ns)
        if len(ops) == 1 and e.key != "ProfilerStep*":
            assert (e.mark, e.self_mark) == (ops[0]["mark"], ops[0]["marks"]["self"])
        else:  # the steps together: the verdict's own rule on the sums
            assert e.mark == trust_mark(sum(o["reported_total_ns"] for o in ops), total_ns, *e.total_ci_ns, threshold)
        assert e.is_user_annotation == (ops[0]["category"] == "user_annotation")
        assert e.device_type == torch.autograd.DeviceType.CPU and e.input_shapes == "" and e.stack == []
        assert e.self_cpu_time_total_str == _format_time(e.self_cpu_time_total)


def test_the_table_is_torchs_layout_with_the_reports_figures(prof):
    ca = prof.corrected_averages()
    text = ca.table(sort_by="self_cpu_time_total", row_limit=10)
    raw = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10).splitlines()
    lines = text.splitlines()
    # torch's columns, widths and rules, then opskew's own three.
    assert lines[1].startswith(raw[1].rstrip()) and lines[0].startswith(raw[0])
    assert re.search(r"Self CPU CI\s+CPU total CI\s+Trust", lines[1])
    body = lines[3:3 + 10]
    assert lines[3 + 10] == lines[0] and lines[3 + 11].startswith("Self CPU time total: ")
    assert "Corrected by opskew (opskew.profile cycle 2" in text and "Trust: " in text
    by_key = {e.key: e for e in ca}
    shown = sorted(ca, key=lambda e: e.self_cpu_time_total, reverse=True)[:10]
    rows = expected_rows(prof.report)
    for line, e in zip(body, shown):
        cells = re.split(r"\s{2,}", line.strip())
        assert cells[0] == e.key[:52] + "..." if len(e.key) >= 52 else cells[0] == e.key
        # The printed figures are the report's ns in torch's format.
        ops = rows[e.key]
        self_ns = sum(o["corrected_self_ns"]["median"] for o in ops)
        total_ns = sum(o["corrected_total_ns"]["median"] for o in ops)
        assert cells[2] == _format_time(self_ns / 1e3) and cells[4] == _format_time(total_ns / 1e3), line
        assert cells[6] == str(e.count)
        lo, hi = e.self_ci_ns
        assert cells[7] == f"[{_format_time(lo / 1e3)}, {_format_time(hi / 1e3)}]"
        assert cells[-1].split()[0] == by_key[e.key].mark in ("believable", "inflated", "unresolved", "unknowable")
    assert str(ca) == ca.table()


def test_a_cycle_and_the_groupings_it_cannot_make(prof):
    first = prof.corrected_averages(cycle=1)
    assert "cycle 1" in first.table()
    with pytest.raises(ValueError, match="no report of cycle 9"):
        prof.corrected_averages(cycle=9)
    for kw in ({"group_by_input_shape": True}, {"group_by_stack_n": 2}, {"group_by_overload_name": True}):
        with pytest.raises(NotImplementedError, match="keyed by name alone"):
            prof.corrected_averages(**kw)
    with pytest.raises(NotImplementedError, match="top_level_events_only"):
        first.table(top_level_events_only=True)
    doc = first.to_dict()
    assert doc["schema"] == "opskew.averages/1" and len(first.rows()) == len(first)


def test_no_table_before_a_trace_or_without_w(tmp_path, monkeypatch):
    seed_native_cache(tmp_path)
    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path))  # no stored calibration to fall back to
    p = opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None)
    with pytest.raises(ValueError, match="no trace yet"):
        p.corrected_averages()
    # A single cycle with too few pairs, no stored calibration and the
    # in-process model off: no corrected table.
    sched = torch.profiler.schedule(wait=3, warmup=1, active=2, repeat=1)
    with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched, report_file=None,
                        cost_model="off") as p:
        train_steps(8, p)
    with pytest.raises(ValueError, match="cycle 1 has no corrected per-operator table"):
        p.corrected_averages()


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """A torch.profiler trace of a few training steps, as a user exports it."""
    path = tmp_path_factory.mktemp("avg") / "train.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
        train_steps(5)
    p.export_chrome_trace(str(path))
    return path


def test_any_trace_with_a_given_w(trace, tmp_path):
    ca = opskew.corrected_averages(trace, w_ns=300)
    v = per_operator(str(trace), CostModel.default({"median": 300.0, "ci95": [300.0, 300.0]}, 0.0))
    ops = {o["name"]: o for o in v["ops"]}
    for e in ca:
        if e.key in ops:
            assert e.self_cpu_time_total_ns == ops[e.key]["corrected_self_ns"]["median"]
            assert e.mark == ops[e.key]["mark"]
    assert ca.w_ns == {"median": 300.0, "ci95": [300.0, 300.0], "ci_coverage": None}
    assert "W given" in ca.table() and "given, no interval" in ca.table()
    # The command line: the same rows, the same table.
    out = tmp_path / "avg.json"
    p = run_opskew("summary", str(trace), "--corrected", "--w", "300", "--sort", "self", "--top", "5",
                   "--json", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "opskew.averages/1" and doc["rows"] == ca.to_dict()["rows"]
    assert p.stdout == ca.table(sort_by="self_cpu_time_total", row_limit=5)
    # The API's summary() takes the same option.
    assert opskew.summary(trace, corrected=True, w=["300"]).to_dict()["rows"] == doc["rows"]


def test_any_trace_with_a_calibration_file(trace, tmp_path):
    from opskew.calibration import store

    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"schema": store.SCHEMA, "date": "2026-01-01",
                               "key": store.make_key("torch.profiler", "minimal", torch.__version__, "cpu",
                                                     torch.get_num_threads()),
                               "w_ns": {"median": 250.0, "ci95": [200.0, 300.0]},
                               "delta_ns": {"median": 20.0, "ci95": [10.0, 30.0]}}))
    ca = opskew.corrected_averages(trace, calibration=cal)
    v = per_operator(str(trace), CostModel.default({"median": 250.0, "ci95": [200.0, 300.0]}, 20.0))
    ops = {o["name"]: o for o in v["ops"]}
    e = next(e for e in ca if e.key == "aten::addmm")
    assert e.self_cpu_time_total_ns == ops["aten::addmm"]["corrected_self_ns"]["median"]
    assert e.self_ci_ns == ops["aten::addmm"]["corrected_self_ns"]["ci95"]
    assert ca.to_dict()["notes"] and "calibration" in ca.to_dict()["source"]
    p = run_opskew("summary", str(trace), "--corrected", "--calibration", str(cal))
    assert p.returncode == 0 and "(95% CI)" in p.stdout and "micro-workload" in p.stderr, p.stderr


@pytest.mark.parametrize("args, fragment", [
    (["--corrected", "--w", "0=300"], "RANK= is for a job"),
    (["--corrected", "--w", "300", "--sort", "p99"], "--sort p99 with --corrected"),
    (["--corrected", "--w", "300", "--cat", "cpu_op"], "--cat is not taken with --corrected"),
    (["--calibration", "x.json"], "--calibration is for --corrected"),
])
def test_the_command_line_refuses(trace, args, fragment):
    p = run_opskew("summary", str(trace), *args)
    assert p.returncode == 2 and fragment in p.stderr, p.stderr


def test_the_footer_says_why_calls_can_exceed_key_averages_and_what_each_mark_means():
    """aten::mul had 168 calls in key_averages() and 224 here: torch's table
    drops a name's calls nested directly in itself, this one counts every
    call. The footer says so in one line, and what each of the four marks
    means in another."""
    from opskew.render.averages import footer

    lines = footer({"source": "opskew.profile cycle 1", "w_ns": {"median": 300.0, "ci95": [250.0, 350.0]}}, 1e6)
    assert len(lines) == 3
    assert lines[2].startswith("# of Calls: every call in the trace; key_averages() counts fewer for a name nested "
                               "directly in itself")
    assert all(m in lines[1] for m in ("believable (", "inflated (", "unresolved (", "unknowable ("))


@pytest.mark.parametrize("w", [300.0, 2000.0, 8000.0])
def test_every_row_follows_from_its_columns_or_says_why(trace, w):
    """Issue 41, item 3, in the corrected key_averages() table: each row's
    average is its total over its calls, each figure lies in its interval,
    and a corrected time above its reported one (beyond 2 ns a call and
    0.5%) is marked and the table says why. A W past the operators' own
    times (8 us) makes the time line write parents longer than the
    formula: the marks must appear there, and nowhere the figures hold."""
    ca = opskew.corrected_averages(trace, w_ns={"median": w, "ci95": [0.9 * w, 1.1 * w]})
    marked = 0
    for e in ca:
        assert e.cpu_time_total_ns == pytest.approx(e.cpu_time * 1e3 * e.count, rel=1e-9, abs=1e-6)
        for fig, ci, val in (("self", e.self_ci_ns, e.self_cpu_time_total_ns), ("total", e.total_ci_ns,
                                                                                 e.cpu_time_total_ns)):
            assert ci[0] <= val + 1e-6 and val <= ci[1] + 1e-6, (e.key, fig, ci, val)
            rep = e.reported_self_ns if fig == "self" else e.reported_total_ns
            above = val - rep > max(2.0 * e.count, 0.005 * rep)
            assert (fig in e.above_reported) == above, (e.key, fig, val, rep)
        marked += bool(e.above_reported)
    text = ca.table(row_limit=-1)
    assert (text.count("\u2021") > 0) == (marked > 0)
    if marked:
        assert f"\u2021 {marked} row" in text and "corrected time above the reported one" in text
    # A row above its reported time is marked, and the table says why.
    from opskew.analyze.averages import mark_above

    doc = ca.to_dict()
    row = doc["rows"][0]
    row["self_ns"] = {"median": row["reported_self_ns"] * 1.1 + 10.0 * row["count"],
                      "ci95": [row["reported_self_ns"], row["reported_self_ns"] * 1.2 + 10.0 * row["count"]]}
    mark_above(row)
    assert row["above_reported"] == ["self"]
    text = CorrectedAverages(doc).table(row_limit=-1)
    assert "\u2021 1 row: corrected time above the reported one (self)" in text
