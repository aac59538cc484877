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
