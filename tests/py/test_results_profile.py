"""opskew.results.profile: the typed cycle and run reports of opskew.profile
read the dicts the profiler keeps and give them back unchanged; torch-free."""

import io
import subprocess
import sys

from opskew.results.base import Result
from opskew.results.profile import CycleReport, ProfileResult, RunReport

W = {"median": 210.5, "ci95": [180.0, 240.0], "ci_coverage": 0.96, "ci_method": "sign test"}

CYCLE = {"cycle": 2, "rank": None, "world_size": 1, "raw_trace": "/tmp/t.json",
         "corrected_trace": "/tmp/t.corrected.json", "steps": {"wait": 20, "warmup": 2, "active": 14},
         "events": {"op_events": 120, "py_events": 0, "per_step": True, "how": "operators"},
         "step_ranges": {"route": "native", "why": None}, "trace_step_stretch": None, "pairs": 12,
         "inflation": 1.25, "corrected_step_ns": 80000.0, "corrected_step_w_ci_ns": [78000.0, 82000.0],
         "active_step_ns": 105000.0, "baseline_step_ns": 84000.0, "w_source": "in-run", "notes": ["a note"],
         "w_ns": W, "w_py_ns": None, "bytecode": None, "stop_ns": 5000, "on_trace_ready_ns": 10,
         "verdict": {"skewed": True, "significant": True, "enough_pairs": True, "threshold": 0.05,
                     "test": "sign test over 12 active steps against their neighbouring wait steps: 12 slower, "
                             "p = 0.000488"},
         "delta_ns": 20.0, "opskew_ns": 1000, "w_py_measure_ns": 0}

FINAL = {"w_ns": W, "w_own_ns": None, "delta_ns": 20.0, "pairs": 24, "cycles": 2, "run_cycles": 2,
         "inflation": 1.24, "notes": [], "corrected_step_ns": 80500.0, "corrected_step_w_ci_ns": [78000.0, 83000.0],
         "cold_first_active_extra_ns": None, "w_by_position": [], "w_by_cycle": [],
         "cold_first_active_cycles": 0, "baseline_step_ns": 84000.0, "active_step_ns": 105000.0,
         "sign_test": "24 of 24 active steps slower than their wait step, p = 1.19e-07"}


def test_cycle_report_round_trips_with_its_figures():
    r = CycleReport.from_dict(CYCLE)
    assert isinstance(r, CycleReport)
    assert CycleReport.from_dict(r.to_dict()).to_dict() == r.to_dict() == CYCLE
    assert (r.cycle, r.w_median_ns, r.w_ci95, r.pairs, r.corrected_step_ns) == (2, 210.5, [180.0, 240.0], 12, 80000.0)
    assert r.skewed is True and r.w_source == "in-run" and r.error is None and r.notes == ["a note"]
    out = io.StringIO()
    r.render_text(out)
    assert out.getvalue().startswith("opskew.profile cycle 2: true step 80 us [78 us, 82 us at W's 95% CI], "
                                     "profiled 105 us, unprofiled wait steps 84 us (medians)\n")


def test_a_cycle_answers_first_and_says_each_note_once_per_run():
    """The per-cycle text (issue 45): the true step against the profiled one
    and the operators the correction moved most first; compact by default
    (verbose adds every figure behind it); a note printed in an earlier
    cycle of the run is not printed again."""
    from opskew.render.profile import render

    ops = [{"name": n, "calls": 2, "reported_self_ns": r, "corrected_self_ns": {"median": c, "ci95": [c, c]}}
           for n, r, c in (("ProfilerStep#9", 9e5, 1e5), ("aten::mm", 4e4, 1e4), ("aten::t", 3e4, 2.5e4),
                           ("aten::add", 2e4, 2e4), ("aten::addmm", 6e4, 4e4))]
    from opskew.profiler.traces import take

    rep = {**CYCLE, "cost_classes": {"not_separable": ["user_annotation"]}}
    take(rep, {"ops": ops, "summary": {}, "marks": {"believable": 2, "inflated": 1, "unknowable": 1}})
    seen = set()
    first = render(rep, verbose=False, seen=seen).splitlines()
    assert first[1] == ("  moved most (self time in the trace, reported -> corrected): aten::mm 40 us -> 10 us, "
                        "aten::addmm 60 us -> 40 us, aten::t 30 us -> 25 us")
    assert "  note: a note" in first and any("user_annotation priced at W" in ln for ln in first)
    assert not any("in-window inflation" in ln or "opskew's own time" in ln for ln in first)
    again = render({**rep, "cycle": 3}, verbose=False, seen=seen)
    assert again.startswith("opskew.profile cycle 3: true step")
    assert "a note" not in again and "user_annotation" not in again and "W 210 ns [180 ns, 240 ns]" in again
    full = render(rep, verbose=True)
    assert "in-window inflation +25.0%" in full and "opskew's own time" in full and "  note: a note" in full


def test_run_report_round_trips_with_its_figures():
    r = RunReport.from_dict(FINAL)
    assert RunReport.from_dict(r.to_dict()).to_dict() == r.to_dict() == FINAL
    assert (r.w_median_ns, r.w_ci95, r.pairs, r.cycles, r.run_cycles) == (210.5, [180.0, 240.0], 24, 2, 2)
    assert r.corrected_step_w_ci_ns == [78000.0, 83000.0] and r.delta_ns == 20.0


def test_an_error_report_and_no_w():
    r = CycleReport({"cycle": 1, "rank": 0, "world_size": 2, "raw_trace": None, "corrected_trace": None,
                     "error": "boom", "steps": {"wait": 0, "warmup": 0, "active": 3}, "step_ranges": None})
    assert r.error == "boom" and r.w_ns is None and r.w_median_ns is None and r.w_ci95 is None and r.skewed is None
    assert CycleReport.from_dict(r.to_dict()).to_dict() == r.to_dict()


def test_the_profile_command_document_by_its_schema():
    doc = {"schema": "opskew.profile/1", "reports": [CYCLE], "earlier_reports": 0, "report": CYCLE, "final": FINAL}
    r = Result.from_dict(doc)
    assert isinstance(r, ProfileResult)
    assert r.to_dict() == Result.from_dict(r.to_dict()).to_dict() == doc
    assert isinstance(r.final, RunReport) and r.final.pairs == 24 and r.report.cycle == 2
    assert r.rows() == [{"cycle": 2, "w_ns": 210.5, "w_source": "in-run", "pairs": 12, "corrected_step_ns": 80000.0,
                         "error": None}]


def test_torch_free():
    code = "import sys, opskew.results.profile; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
