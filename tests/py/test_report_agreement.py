"""One report, many renderings (issue 41, item 1): what a run printed at
each cycle, what stop() printed, `prof.reports`, `prof.final`, report.json,
the HTML view and each corrected trace's metadata agree field by field, on
runs whose first cycle has too few pairs for a W and whose every trace
stop() corrects again with the run's final W (a recomputation at stop())."""

import io
import json
import re
import sys

import pytest

from conftest import run_opskew
from test_profile_cli import SMALL, script

torch = pytest.importorskip("torch")

import opskew  # noqa: E402
from opskew.analyze import tracefile  # noqa: E402
from opskew.profiler.traces import FROM_THE_TRACE, entry  # noqa: E402
from opskew.render.profile import render, render_recorrected  # noqa: E402
from opskew.results.profile import CYCLE_FIELDS, RUN_FIELDS, CycleReport, as_printed, undeclared  # noqa: E402

# Fields written after the cycle's trace (its own time, and what stop()
# or an export did later): the trace's metadata does not have them.
AFTER_THE_TRACE = {"opskew_ns", "w_py_measure_ns", "model_ns", "marks", "overwritten_by_cycle", "recorrect_error"}


def blocks(text: str) -> dict:
    """The printed text by cycle ({N: its block}) and stop()'s block ("stop")."""
    out = {}
    for m in re.finditer(r"^opskew\.profile(?: rank \S+)? cycle (\d+):.*?(?=^opskew|\Z)", text, re.S | re.M):
        out[int(m.group(1))] = m.group(0)
    m = re.search(r"^opskew\.profile: at stop\(\).*?(?=^opskew(?!\.profile: at stop)|\Z)", text, re.S | re.M)
    if m:
        out["stop"] = m.group(0)
    return out


def reprinted(reports: list, verbose: bool) -> dict:
    """Each cycle's block rendered again from its report as printed, the
    notes said once per run as the run said them."""
    seen = set()
    return {r["cycle"]: render(as_printed(r), verbose, seen) for r in reports}


def jsonable(x):
    return json.loads(json.dumps(x, default=str))


def agree_with_trace(rep: dict):
    """The corrected trace's "run" metadata is this report, field by field,
    less what the trace carries itself and what came after it."""
    run = tracefile.scan(rep["corrected_trace"], header_only=True)["objects"]["opskew"]["run"]
    mine = jsonable(rep)
    for k, v in run.items():
        if k in ("about",):
            continue
        assert k in mine or k in ("corrected_step_pairs_ns", "corrected_step_pairs_w_ci_ns"), k
        if k in mine:
            assert v == mine[k], (rep["cycle"], k, v, mine[k])
    missing = set(mine) - set(run) - set(FROM_THE_TRACE) - AFTER_THE_TRACE
    assert not missing, missing
    return run


def test_printed_stored_and_traced_reports_agree_in_process(tmp_path):
    a, b = torch.ones(8), torch.ones(8)
    out = io.StringIO()
    with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], corrected_dir=tmp_path,
                        schedule=torch.profiler.schedule(wait=8, warmup=1, active=4, repeat=2),
                        report_file=out, verbose=True) as prof:
        for _ in range(30):
            for _ in range(30):
                torch.add(a, b)
            prof.step()
    text = out.getvalue()
    printed = blocks(text)
    assert sorted(k for k in printed if k != "stop") == [r["cycle"] for r in prof.reports] == [1, 2]
    # Every field of every report is declared, and so is the run's.
    for r in prof.reports:
        assert undeclared(r) == [], r["cycle"]
    assert prof.final is not None and undeclared(prof.final, RUN_FIELDS) == []
    # stop() corrected every trace again: each report was replaced, and says
    # what it printed where that differs.
    assert all("final_w" in r["revised_by"] for r in prof.reports)
    # What each cycle printed is its report as printed, rendered again.
    assert reprinted(prof.reports, True) == {k: v for k, v in printed.items() if k != "stop"}
    # stop()'s lines are the reports and the run's final report.
    assert printed["stop"] == render_recorrected(prof.reports, prof.final, as_printed)
    from opskew.render.units import fmt_ns

    for r in prof.reports:
        was = (r.get("as_printed") or {}).get("corrected_step_ns", r["corrected_step_ns"])
        if was != r["corrected_step_ns"]:
            assert (f"cycle {r['cycle']}: true step {fmt_ns(was) if was is not None else 'not corrected'} -> "
                    f"{fmt_ns(r['corrected_step_ns'])}") in printed["stop"]
    for r in prof.reports:
        run = agree_with_trace(r)
        assert run["corrected_w_ns"] == jsonable(prof.final["w_ns"]) == jsonable(r["corrected_w_ns"])
        assert run["delta_ns"] == prof.final["delta_ns"]
        # Stored and read back (report.json's entry), the report renders the
        # same text and HTML as the one in memory.
        back = CycleReport(jsonable(r))
        assert str(back) == str(r) and back._repr_html_() == r._repr_html_()
        # ... and its entry, without the table of every operator, prints the
        # same as it did at its cycle.
        assert render(as_printed(jsonable(entry(r)))) == render(as_printed(r))
    assert prof.final["corrected_step_ns"] is not None


def test_report_json_is_what_each_cycle_printed_and_its_trace_holds(tmp_path):
    out = tmp_path / "prof"
    p = run_opskew("profile", "-o", str(out), "--verbose", *SMALL, "--", sys.executable, script(tmp_path), "30")
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "report.json").read_text())
    printed = blocks(p.stderr)
    entries = doc["reports"]
    assert [r["cycle"] for r in entries] == sorted(k for k in printed if k != "stop") == [1, 2]
    for r in entries:
        assert undeclared(r) == [], r["cycle"]
        agree_with_trace(r)
        assert r["marks"] == r["operators"]["marks"]
    assert undeclared(doc["final"], RUN_FIELDS) == []
    # Printed at each cycle = report.json's entry as printed, rendered again.
    assert reprinted(entries, True) == {k: v for k, v in printed.items() if k != "stop"}
    assert printed["stop"] == render_recorrected(entries, doc["final"], as_printed)
    # The latest report in full is the latest entry with its table.
    latest = doc["report"]
    assert {k: v for k, v in latest.items() if k != "operators"} == \
        {k: v for k, v in entries[-1].items() if k not in ("operators", "marks")}
    assert {k: v for k, v in latest["operators"].items() if k != "ops"} == entries[-1]["operators"]
    # The answer line is the run's final report's.
    assert set(CYCLE_FIELDS) >= set(latest)


def test_the_reference_table_names_every_declared_field():
    """docs/profile-reference.md's table of the report names every field of
    CYCLE_FIELDS, and nothing the report does not have."""
    import pathlib

    text = pathlib.Path(__file__).resolve().parents[2].joinpath("docs", "profile-reference.md").read_text()
    section = text[text.index("\n## The report\n"):]
    section = section[:section.index("\n## ", 1)]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `")]
    named = {n for ln in rows for n in re.findall(r"`([a-z_0-9]+)`", ln.split(" | ")[0])}
    assert set(CYCLE_FIELDS) - named == set(), "declared, not in the table"
    assert named - set(CYCLE_FIELDS) == set(), "in the table, not declared"
