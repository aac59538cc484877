"""render.answers: the first line of each command's text, from its document; torch-free."""

from opskew.render import answers

W = {"median": 500.0, "ci95": [400.0, 600.0]}


def test_check_answers_skewed_or_not_and_by_how_much():
    r = {"verdict": {"skewed": True, "significant": True}, "added_per_event_ns": W, "inflation": 1.8}
    assert answers.check(r) == ("opskew check: SKEWED: the profiled loop runs x1.80 its bare time, "
                                "W 500 ns [400 ns, 600 ns] per operator event")
    r["verdict"] = {"skewed": False, "significant": False, "enough_trials": False}
    assert answers.check(r).startswith("opskew check: not enough trials to decide: ")
    assert answers.check({"verdict": None}) == ""


def test_matrix_answers_the_cheapest_configuration_that_keeps_operators():
    rows = [{"row": "baseline"}, {"row": "itt-floor", "in_window_per_event_ns": {"median": 10.0}},
            {"row": "minimal", "in_window_per_event_ns": W},
            {"row": "opskew-native", "in_window_per_event_ns": {"median": 90.0, "ci95": [80.0, 100.0]}}]
    assert answers.matrix({"rows": rows}) == (
        "opskew matrix: cheapest configuration keeping every operator: opskew-native, 90 ns [80 ns, 100 ns] per "
        "event in the window (torch.profiler minimal: 500 ns [400 ns, 600 ns])")
    assert answers.matrix({"rows": rows[:2]}) == ""


def test_advise_and_sweep_answer_first():
    r = {"recommended": {"name": "m", "label": "torch.profiler(minimal)", "estimate": {"active_slowdown": 0.25}},
         "candidates": {"m": {"in_window_per_event_ns": W}}}
    assert answers.advise(r) == ("opskew advise: use torch.profiler(minimal), 500 ns [400 ns, 600 ns] per event; "
                                 "each active iteration runs 25% slower")
    pt = {"size": 4, "op_duration_s": 1e-6, "by": {"torch": {"added_per_call_s": 2e-6}}}
    s = {"instruments": {"torch": "torch.profiler"},
         "curves": [{"op": "add", "points": [pt], "crossover": {"torch": {"vs_op_duration": 1100.0}}}]}
    assert answers.sweep(s) == "opskew sweep: add under torch.profiler: costs more than the operator below 1.1e+03 elements"


def test_correct_answers_the_instrument_share_and_the_operator_moved_most():
    res = {"stats": {"corrected_events": 10, "reported_top_ns": 4e6, "corrected_top_ns": 3e6},
           "instrument_share": 0.25, "calibration": {"w_ns": 600.0},
           "ops": [{"name": "a", "calls": 5, "reported_self_ns": 1e6, "corrected_self_ns": 9e5},
                   {"name": "b", "calls": 5, "reported_self_ns": 2e6, "corrected_self_ns": 1.2e6}]}
    assert answers.correct(res) == ("opskew correct: 25.0% of the trace's top-level time is instrument (4 ms "
                                    "reported, 3 ms corrected, at W 600 ns per operator event); moved most: b, "
                                    "self 2 ms -> 1.2 ms")
    assert answers.correct({"stats": {"corrected_events": 0}}) == ""


def test_summary_answers_where_the_self_time_goes_as_recorded():
    doc = {"ops": [{"name": "a", "self_ns": 3e6}, {"name": "b", "self_ns": 1e6}],
           "stats": {"complete_events": 2, "first_ts_ns": 0, "last_end_ns": 5e6}}
    line = answers.summary(doc)
    assert line.startswith("opskew summary: 4 ms of self time over a span of 5 ms; most in a, 3 ms (75%, as recorded")
    assert answers.summary({"ops": []}) == ""


def test_a_profile_run_answers_its_true_step_first():
    doc = {"run": {"corrected_step_ns": 6.15e6, "corrected_step_w_ci_ns": [6.04e6, 6.28e6], "active_step_ns": 7.79e6,
                   "baseline_step_ns": 6.18e6}}
    assert answers.profile_run(doc) == ("opskew profile run: true step 6.15 ms [6.04 ms, 6.28 ms] at W's 95% CI, "
                                        "profiled 7.79 ms, unprofiled wait steps 6.18 ms (medians)")
    assert answers.profile_run({"run": {}}) == ""


def test_compare_answers_the_corrected_step_or_what_changed_beyond_noise():
    inputs = [{"label": "A"}, {"label": "B"}]
    step = {"name": "corrected step", "values": [6e6, 5e6], "changes": [{"change": -1 / 6, "significant": True}]}
    assert answers.compare({"inputs": inputs, "rows": [step]}) == (
        "opskew compare: B against A: corrected step 6 ms -> 5 ms (-16.7%, significant)")
    rows = [{"name": "baseline / iteration", "drift": True, "changes": [{"change": 0.09, "significant": None}]},
            {"name": "x", "changes": [{"change": 0.5, "significant": True}]},
            {"name": "y", "changes": [{"change": -0.8, "significant": True}]},
            {"name": "z", "changes": [{"change": 0.01, "significant": False}]}]
    assert answers.compare({"inputs": inputs, "rows": rows}) == (
        "opskew compare: B against A: 2 of 3 figures changed significantly; largest: y -80.0%")
    assert answers.compare({"inputs": inputs, "rows": rows[3:]}) == (
        "opskew compare: B against A: no significant change in 1 figure")


def test_calibrate_answers_each_configuration_s_w_and_whether_it_was_stored():
    cal = {"key": {"instrument": "torch", "config": "minimal"}, "w_ns": W, "_path": "/tmp/x.json"}
    other = {"key": {"instrument": "torch", "config": "with_stack"}, "w_ns": {"median": 900.0, "ci95": [800.0, 1e3]}}
    assert answers.calibrate({"calibrations": [cal, other]}) == (
        "opskew calibrate (torch): minimal W 500 ns [400 ns, 600 ns]; with_stack W 900 ns [800 ns, 1 us] "
        "(not stored) per operator event")
    assert answers.calibrate({"calibrations": []}) == ""
