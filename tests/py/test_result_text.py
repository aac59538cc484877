"""Typed results: `str()` is the text the command prints for every class,
and headline figures are scalars with their interval apart (issue 45)."""

from opskew.results import Result

CAL = {"schema": "opskew.calibrate/1", "calibrations": [
    {"key": {"instrument": "torch.profiler", "config": "minimal"}, "w_ns": {"median": 300.0, "ci95": [200.0, 400.0]},
     "delta_ns": {"median": 10.0}, "_path": "/cache/minimal.json", "op_events_per_iter": 5, "noisy": None}]}


def test_calibrations_print_as_calibrate_prints_them():
    text = str(Result.from_dict(CAL))
    assert text.startswith("opskew calibrate: 1 calibration(s)")
    assert "W 300 ns [200 ns, 400 ns]" in text and "stored: /cache/minimal.json" in text


def test_check_w_is_the_median_and_its_interval_apart():
    doc = {"schema": "opskew.check/1", "added_per_event_ns": {"median": 512.0, "ci95": [480.0, 560.0],
                                                              "ci_coverage": 0.96}, "verdict": {"skewed": True}}
    r = Result.from_dict(doc)
    assert r.w_ns == 512.0 and r.w_ci95_ns == [480.0, 560.0] and r.skewed is True
    assert r.to_dict() == doc and r.added_per_event_ns["ci_coverage"] == 0.96
