"""End-to-end `opskew matrix` against real torch."""

import pytest

FAST = ("--trials", "7", "--iters", "2", "--calls", "300", "--warmup", "0.1")
CPU_ROWS = ["baseline", "itt-floor", "empty-observer", "minimal", "+record_shapes", "+with_stack",
            "+profile_memory", "+with_flops", "+with_modules", "all"]


def rows(r):
    return {x["row"]: x for x in r["rows"]}


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory):
    import json

    from conftest import run_opskew

    out = tmp_path_factory.mktemp("m") / "m.json"
    p = run_opskew("matrix", *FAST, "--inject", "2000", "--json", str(out), timeout=600)
    assert p.returncode == 0, p.stderr
    return p, json.loads(out.read_text())


def test_every_cpu_row_filled_with_ci(matrix_run):
    p, r = matrix_run
    assert r["schema"] == "opskew.matrix/1" and r["status"] == "complete"
    got = rows(r)
    assert list(got)[: len(CPU_ROWS)] == CPU_ROWS
    assert r["events_per_iter"] == 300
    for name in CPU_ROWS[1:]:
        w = got[name]["in_window_per_event_ns"]
        assert w["ci_reaches_95"] and w["ci95"][0] <= w["median"] <= w["ci95"][1], name
        assert got[name]["stop_per_event_ns"]["median"] is not None
    for name in CPU_ROWS[3:]:
        # operator events only: profile_memory's [memory] rows in key_averages() are not (they were
        # counted, and halved that row's W)
        assert got[name]["events_per_iter"] == 300, name
        assert got[name]["export_bytes_per_event"] > 50, name
        assert got[name]["postprocess_per_event_ns"]["median"] > 0, name
    for name in CPU_ROWS[4:]:
        m = got[name]["marginal_in_window_ns"]
        assert got[name]["marginal_over"] == "minimal" and len(m["ci95"]) == 2, name
    assert got["minimal"]["marginal_over"] == "itt-floor"
    # Shapes make the exported trace bigger per event.
    assert got["+record_shapes"]["export_bytes_per_event"] > got["minimal"]["export_bytes_per_event"]
    # opskew's tracer, measured in its own process: it recorded every operator,
    # and its post-processing (a C summary) is far cheaper than key_averages().
    tr = got["opskew"]
    assert tr["events_per_iter"] == 300 and tr["lost_events"] == 0
    assert tr["in_window_per_event_ns"]["ci_reaches_95"]
    assert tr["postprocess_per_event_ns"]["median"] < got["minimal"]["postprocess_per_event_ns"]["median"]
    assert tr["export_bytes_per_event"] > 50
    # The native route, in process: its floor and opskew's collector over it.
    nat = got["opskew-native"]
    assert nat["events_per_iter"] == 300 and nat["label"] == "opskew tracer (native collector)"
    assert nat["marginal_over"] == "native-floor" and len(nat["marginal_in_window_ns"]["ci95"]) == 2
    assert got["native-floor"]["in_window_per_event_ns"]["ci_reaches_95"]
    srcs = {s["source"]: s for s in r["sources"]}
    assert srcs["opskew's native collector (over the native floor)"]["per_event_ns"] is not None
    assert any(k.startswith("stack walking") for k in srcs)
    assert "Where the time goes" in p.stdout


def test_injected_option_is_attributed_within_20_percent(matrix_run):
    _, r = matrix_run
    row = rows(r)["busy-wait:2000"]
    assert row["marginal_over"] == "busy-wait:0"
    got = row["marginal_in_window_ns"]["median"]
    assert abs(got - 2000) <= 400, got


def test_stack_and_shapes_have_positive_marginal_cost(tmp_path):
    import json

    from conftest import run_opskew, until

    def run(attempt):
        out = tmp_path / f"m{attempt}.json"
        p = run_opskew("matrix", "--trials", "7", "--iters", "3", "--no-export", "--json", str(out),
                       timeout=600)
        assert p.returncode == 0, p.stderr
        got = rows(json.loads(out.read_text()))
        return tuple(got[k]["marginal_in_window_ns"]["median"] for k in ("+with_stack", "+record_shapes"))

    stack, shapes = until(run, lambda m: m[0] > 0 and m[1] > 0)
    assert stack > 0 and shapes > 0, (stack, shapes)


def test_matrix_bad_input(opskew):
    p = opskew("matrix", "--inject", "-5")
    assert p.returncode == 2 and "--inject must be >= 0" in p.stderr
    p = opskew("matrix", "--trials", "1")
    assert p.returncode == 2


def _table_rows(stdout: str, first_header: str):
    """The header line of the table that starts with `first_header`, and the
    rows under its rule up to the first blank line."""
    lines = stdout.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.lstrip().startswith(first_header + " "))
    body = []
    for ln in lines[i + 2:]:
        if not ln.strip() or ln.startswith("  in-window W:"):
            break
        body.append(ln)
    return lines[i], body


def _assert_aligned(header: str, body: list):
    """Every row's cells start at the header's column offsets: the character
    before each offset is a space and the cell at it is not (or is empty)."""
    import re

    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    assert len(starts) >= 3, header
    checked = 0
    for ln in body:
        if "not measured:" in ln:
            continue
        for s in starts[1:]:
            if s < len(ln) and ln[s] != " ":
                assert ln[s - 1] == " ", (header, ln, s)
                checked += 1
        # No cell spills over into the next column's start.
        cells = [m.start() for m in re.finditer(r"\S+(?: \S+)*", ln)]
        assert set(cells) <= set(starts), (header, ln)
    assert checked


def test_tables_are_aligned_with_their_headers(matrix_run):
    p, _ = matrix_run
    _assert_aligned(*_table_rows(p.stdout, "row"))
    _assert_aligned(*_table_rows(p.stdout.replace("\n  ", "\n"), "source"))


def test_a_cost_below_its_floor_is_clamped_with_a_mark_never_printed_negative():
    """Issue 45: "opskew's native collector (over the native floor) -119 ns
    [-138 ns, -86.3 ns]". A source whose cost lies wholly below 0 is 0,
    marked, with what was measured kept; one whose interval holds 0 stays
    as measured (not distinguishable)."""
    import io

    from opskew.experiments.matrix import sources
    from opskew.render.matrix import print_human

    def ci(med, lo, hi):
        return {"median": med, "ci95": [lo, hi], "ci_coverage": 0.965, "ci_reaches_95": True}

    res = {"rows": [{"row": "baseline", "label": "none"},
                    {"row": "native-floor", "label": "nf", "in_window_per_event_ns": ci(300, 280, 320)},
                    {"row": "opskew-native", "label": "on", "in_window_per_event_ns": ci(180, 160, 200),
                     "marginal_over": "native-floor", "marginal_in_window_ns": ci(-119, -138, -86.3)},
                    {"row": "empty-observer", "label": "eo", "in_window_per_event_ns": ci(-4, -9, 2)}]}
    src = {s["row"]: s for s in sources(res, "cpu")}
    native = src["opskew-native"]
    assert native["per_event_ns"] == 0.0 and native["ci95"] == [0.0, 0.0]
    assert native["below_reference"] == {"median": -119, "ci95": [-138, -86.3]}
    assert src["empty-observer"]["per_event_ns"] == -4 and "below_reference" not in src["empty-observer"]
    result = {"conditions": {"workload": {"description": "w"}, "torch": "t", "device": "cpu", "cpu": "c",
                             "threads": 1, "iters": 2},
              "status": "complete", "rounds": 15, "events_per_iter": 10, "baseline_per_iter_s": 1e-5,
              "rows": res["rows"], "skipped": {}, "sources": list(src.values())}
    buf = io.StringIO()
    print_human(result, buf)
    where = buf.getvalue().split("Where the time goes", 1)[1]
    line = next(ln for ln in where.splitlines() if "native collector" in ln)
    assert "0 (clamped: it ran 119 ns [86.3 ns, 138 ns] faster than what it is measured over" in line
    assert "-119" not in line and "-138" not in line


def test_a_marginal_whose_ci_includes_zero_prints_no_sign():
    """Issue 13: +profile_memory showed a W below minimal's and a positive
    marginal in one table. The marginal is paired with minimal round by round;
    when its CI includes 0 the table says so instead of printing a sign."""
    import io

    from opskew.render.matrix import marginal_state, print_human

    def ci(med, lo, hi):
        return {"median": med, "ci95": [lo, hi], "ci_coverage": 0.965, "ci_reaches_95": True}

    result = {"conditions": {"workload": {"description": "w"}, "torch": "t", "device": "cpu", "cpu": "c",
                             "threads": 1, "iters": 2},
              "status": "complete", "rounds": 15, "events_per_iter": 10, "baseline_per_iter_s": 1e-5,
              "rows": [{"row": "baseline", "label": "none"},
                       {"row": "minimal", "label": "m", "in_window_per_event_ns": ci(500, 400, 600)},
                       {"row": "+profile_memory", "label": "pm", "in_window_per_event_ns": ci(480, 380, 700),
                        "marginal_over": "minimal", "marginal_in_window_ns": ci(12, -30, 60)},
                       {"row": "+with_stack", "label": "ws", "in_window_per_event_ns": ci(1500, 1400, 1600),
                        "marginal_over": "minimal", "marginal_in_window_ns": ci(1000, 900, 1100)}],
              "skipped": {}, "sources": [
                  {"source": "memory events (profile_memory)", "row": "+profile_memory", "measure": "over minimal",
                   "per_event_ns": 12, "ci95": [-30, 60]},
                  {"source": "stack walking (with_stack)", "row": "+with_stack", "measure": "over minimal",
                   "per_event_ns": 1000, "ci95": [900, 1100]}]}
    assert marginal_state(result["rows"][2]["marginal_in_window_ns"]) == "not distinguishable"
    assert marginal_state(result["rows"][3]["marginal_in_window_ns"]) == "above"
    assert marginal_state(ci(-50, -80, -10)) == "below"
    buf = io.StringIO()
    print_human(result, buf)
    text = buf.getvalue()
    header, body = _table_rows(text, "row")
    pm = next(ln for ln in body if ln.startswith("+profile_memory"))
    assert "not distinguishable from minimal" in pm and "12 ns" not in pm
    ws = next(ln for ln in body if ln.startswith("+with_stack"))
    assert "1 us [900 ns, 1.1 us] (minimal)" in ws
    _assert_aligned(header, body)
    src = text.split("Where the time goes", 1)[1]
    mem = next(ln for ln in src.splitlines() if "memory events" in ln)
    assert "not distinguishable from 0 [-30 ns, 60 ns]" in mem and "12 ns" not in mem
    assert "1 us [900 ns, 1.1 us]" in next(ln for ln in src.splitlines() if "stack walking" in ln)
    assert "in-window W: each row (a configuration) against the baseline (docs/which-w.md)" in text

    # Two rounds: a 50% interval that excludes 0 is no verdict on 0 either way.
    few = {"median": 217, "ci95": [193, 241], "ci_coverage": 0.5, "ci_reaches_95": False}
    assert marginal_state(few) == "too few rounds"
    result["rows"][2]["marginal_in_window_ns"] = few
    result["sources"][0].update(per_event_ns=217, ci95=[193, 241], ci_coverage=0.5, ci_reaches_95=False)
    buf = io.StringIO()
    print_human(result, buf)
    text = buf.getvalue()
    pm = next(ln for ln in _table_rows(text, "row")[1] if ln.startswith("+profile_memory"))
    assert "50% interval [193 ns, 241 ns]: too few rounds for a 95% CI" in pm
    assert "distinguishable" not in pm
    mem = next(ln for ln in text.split("Where the time goes", 1)[1].splitlines() if "memory events" in ln)
    assert "too few rounds for a 95% CI" in mem and "distinguishable" not in mem


TARGET = '''
import sys
import warnings

import torch

calls = 0


def make_inputs():
    return torch.ones(8)


def step(x):
    global calls
    calls += 1
    if calls == 1:
        warnings.warn("the workload's own warning")
    sys.stderr.write(f"CALL {calls}\\n")
    return x + 1
'''


def test_matrix_on_a_user_target_shows_progress_before_it_measures(tmp_path):
    """Long work is not silent (issue 45): without a terminal (the lines
    form), a line says what starts before the workload's first call, and a
    line with how far the rounds are and the time left comes while the
    workload is still being measured (before its last call). A warning the
    workload raised is said once, as the workload's, not passed through."""
    from conftest import run_opskew

    t = tmp_path / "adv.py"
    t.write_text(TARGET)
    p = run_opskew("matrix", f"{t}:step", "--setup", "make_inputs", "--trials", "2", "--iters", "1",
                   "--warmup", "0.05", "--no-tracer", "--no-export", "--json", str(tmp_path / "m.json"),
                   env={"OPSKEW_PROGRESS": ""})
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    calls = [i for i, ln in enumerate(lines) if ln.startswith("CALL ")]
    first = next(i for i, ln in enumerate(lines) if ln.startswith("opskew matrix: warm-up ("))
    assert first < calls[0], p.stderr
    runs = [i for i, ln in enumerate(lines) if ln.startswith("opskew matrix: measuring: run 1/")
            and " left" in ln]
    assert runs and runs[0] < calls[-1], p.stderr
    said = [ln for ln in lines if " warned: " in ln]
    assert len(said) == 1 and said[0].startswith("opskew matrix: the workload warned: "
                                                 "UserWarning: the workload's own warning"), p.stderr
    assert not any(ln.startswith("  warnings.warn(") for ln in lines)
    # The answer first: the cheapest configuration that records every operator.
    assert p.stdout.startswith("opskew matrix: cheapest configuration keeping every operator: "), p.stdout
