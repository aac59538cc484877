"""Unit tests of the pure Python functions, with known answers: the analysis
(analysis.py), the calibration keys and cache (calibration.py), the route from
C errors to exceptions (errors.from_c_error) and the C-backed option
detection of `opskew correct` (commands/correct.detect) on small traces."""

import errno
import gzip
import json
import os
from types import SimpleNamespace

import pytest

from opskew import _engine, errors
from opskew.stats import estimators as analysis
from opskew.calibration import store as calibration
from opskew.analyze.correct import detect
from opskew.measure.instruments import Trial
from opskew.measure.rounds import Window

# ------------------------------------------------------------------ analysis


def test_estimate_known_answers():
    assert analysis.estimate([]) == {"median": None, "ci95": None}
    assert analysis.estimate([5.0]) == {"median": 5.0, "ci95": None}
    r = analysis.estimate([float(x) for x in (9, 1, 8, 2, 7, 3, 6, 4, 5)])
    # n = 9: the sign-test interval is [x(2), x(8)], coverage 1 - 2 * 10/512.
    assert r["median"] == 5.0
    assert r["ci95"] == [2.0, 8.0]
    assert r["ci_coverage"] == pytest.approx(1 - 20 / 512)
    # Two values cannot give a 95% interval.
    assert analysis.estimate([1.0, 2.0])["ci95"] is None


def test_per_event_diff_is_ns_per_event():
    base = [1.0] * 6
    added = [1.9e-6, 2.0e-6, 2.1e-6, 2.0e-6, 1.95e-6, 2.05e-6]  # seconds per round
    r = analysis.per_event_diff(base, [b + a for b, a in zip(base, added)], [1000] * 6)
    assert r["median"] == pytest.approx(2.0, abs=1e-6)  # 2 us over 1000 events
    assert r["n"] == 6 and r["n_positive"] == 6
    assert r["sign_p"] == pytest.approx(2 / 64)
    assert r["ci95"][0] == pytest.approx(1.9, abs=1e-6) and r["ci95"][1] == pytest.approx(2.1, abs=1e-6)
    assert r["ci_reaches_95"]
    # Normalized round by round: twice the events, half the cost per event.
    r2 = analysis.per_event_diff([1.0] * 6, [1.0 + 2e-6] * 6, [1000, 2000] * 3)
    assert sorted([r2["ci95"][0], r2["ci95"][1]]) == pytest.approx([1.0, 2.0], abs=1e-6)


def _trial(wall, op_events=1000, python_events=0, **kw):
    return Trial(window=Window(wall_s=wall), op_events=op_events, python_events=python_events, **kw)


def test_operator_event_cost_takes_python_events_out():
    base = [Window(wall_s=1.0) for _ in range(6)]
    # 3 us added per round: 1000 Python events at 1 ns and 1000 operators at 2 ns.
    treated = [_trial(1.0 + 3e-6, python_events=1000) for _ in range(6)]
    assert analysis.operator_event_cost(base, treated, 1.0)["median"] == pytest.approx(2.0, abs=1e-6)
    assert analysis.operator_event_cost(base, treated)["median"] == pytest.approx(3.0, abs=1e-6)
    # Extra trials of one arm are ignored; no operator events counts as one.
    short = analysis.operator_event_cost(base[:4], treated + [_trial(9.0)])
    assert short["n"] == 4
    zero = analysis.operator_event_cost(base, [_trial(1.0 + 5e-9, op_events=0) for _ in range(6)])
    assert zero["median"] == pytest.approx(5.0, abs=1e-6)


def test_python_event_cost_uses_python_events():
    rounds = SimpleNamespace(
        n=6, trials={"p": [_trial(1.0 + 4e-6, op_events=0, python_events=2000) for _ in range(7)]},
        windows=lambda name: [Window(wall_s=1.0) for _ in range(7)])
    r = analysis.python_event_cost(rounds, "p")
    assert r["median"] == pytest.approx(2.0, abs=1e-6) and r["n"] == 6


def test_analyze_check_known_answers():
    n, iters = 6, 10
    base = [Window(wall_s=0.010 + i * 1e-6) for i in range(n)]
    treated = [_trial(0.012 + i * 1e-6, op_events=1000, stop_s=0.001, reported_op_self_s=0.004)
               for i in range(n)]
    r = analysis.analyze_check(base, treated, iters=iters, threshold=0.05)
    assert r["pairs"] == n
    assert r["events_per_iter"] == 100
    assert r["events_per_trial_range"] == [1000, 1000]
    assert r["added_per_event_ns"]["median"] == pytest.approx(2000.0, rel=1e-6)  # 2 ms / 1000
    assert r["stop_per_event_ns"] == pytest.approx(1000.0, rel=1e-6)
    assert r["inflation"] == pytest.approx(1.2, rel=1e-3)
    assert r["baseline"]["per_iter_s"] == pytest.approx(0.00100025, rel=1e-6)
    assert r["reported_ops"]["self_per_event_s"] == pytest.approx(0.0004 / 100)
    assert r["verdict"]["significant"] and r["verdict"]["skewed"]
    # The same slowdown under a higher threshold is significant, not skew.
    high = analysis.analyze_check(base, treated, iters=iters, threshold=0.5)
    assert high["verdict"]["significant"] and not high["verdict"]["skewed"]
    # Two pairs cannot reach a 95% interval: no verdict of skew.
    two = analysis.analyze_check(base[:2], treated[:2], iters=iters, threshold=0.05)
    assert not two["verdict"]["skewed"] and "need 6" in two["verdict"]["test"]
    # No events: per-event figures are undefined.
    none = analysis.analyze_check(base, [_trial(0.012, op_events=0) for _ in range(n)], iters=iters,
                                  threshold=0.05)
    assert none["events_per_iter"] == 0 and "no operator events" in none["note"]
    assert analysis.analyze_check([], [], iters=1, threshold=0.05) == {"pairs": 0}


# --------------------------------------------------------------- calibration


def test_config_name():
    assert calibration.config_name({}) == "minimal"
    assert calibration.config_name({"record_shapes": False, "with_stack": False}) == "minimal"
    assert calibration.config_name({"with_stack": True, "record_shapes": True,
                                    "profile_memory": False}) == "record_shapes+with_stack"


def _key(**over):
    k = {"machine": "m (cpu)", "torch": "2.13.0+cpu", "instrument": "torch.profiler", "config": "with_stack",
         "device": "cpu", "threads": 1}
    k.update(over)
    return k


def test_key_id():
    k = _key()
    kid = calibration.key_id(k)
    assert kid.startswith("torch.profiler-with_stack-cpu-t1-torch2.13.0+cpu-")
    assert len(kid.rsplit("-", 1)[1]) == 10
    assert calibration.key_id(dict(k)) == kid  # a function of the key only
    assert calibration.key_id(_key(machine="other")) != kid  # in the digest, not the name
    w = calibration.key_id(_key(workload="/a/b/model.py:step"))
    assert "-model.py-step-" in w and "/" not in w and ":" not in w


def _cal(key, date, w=10.0):
    return {"schema": calibration.SCHEMA, "key": key, "date": date, "w_ns": {"median": w},
            "delta_ns": {"median": 1.0}}


def test_store_find_load_in_a_temporary_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(calibration, "machine", lambda: "m (cpu)")
    assert calibration.find("torch.profiler", "with_stack", "2.13.0+cpu") is None
    old = calibration.store(_cal(_key(threads=2), "2026-01-01", w=1.0))
    new = calibration.store(_cal(_key(), "2026-02-01", w=2.0))
    calibration.store(_cal(_key(workload="wl.py:step"), "2026-03-01", w=3.0))
    calibration.store(_cal(_key(machine="elsewhere"), "2026-04-01", w=4.0))
    assert os.path.dirname(new) == os.path.join(str(tmp_path), "calibrations")
    (tmp_path / "calibrations" / "junk.json").write_text("{not json")
    found = calibration.find("torch.profiler", "with_stack", "2.13.0+cpu")
    # The newest for this machine and torch; workload-specific ones only when named.
    assert found["w_ns"]["median"] == 2.0 and found["_path"] == new
    assert calibration.find("torch.profiler", "with_stack", "2.13.0+cpu", device="cuda") is None
    assert calibration.find("torch.profiler", "minimal", "2.13.0+cpu") is None
    assert calibration.find("torch.profiler", "with_stack", "2.12.0") is None
    assert calibration.load(old)["key"]["threads"] == 2
    assert len(calibration.stored()) == 4  # junk.json is skipped
    with pytest.raises(errors.UsageError, match="not found"):
        calibration.load(str(tmp_path / "none.json"))
    with pytest.raises(errors.UsageError, match="junk.json: Expecting property name"):
        calibration.load(str(tmp_path / "calibrations" / "junk.json"))
    (tmp_path / "other.json").write_text(json.dumps({"schema": "x"}))
    with pytest.raises(errors.UsageError, match="not an opskew calibration"):
        calibration.load(str(tmp_path / "other.json"))


# -------------------------------------------------------------- from_c_error


def test_from_c_error_classes_and_exit_codes():
    cases = {_engine.EFORMAT: (errors.TraceError, 2), _engine.ERANGE: (errors.TraceError, 2),
             _engine.EIO: (errors.UsageError, 2), _engine.EINVAL: (errors.UsageError, 2),
             _engine.EUNSUPPORTED: (errors.UsageError, 2),
             _engine.ETRUNCATED: (errors.TruncatedTraceError, 5),
             _engine.ENOMEM: (errors.RuntimeFailure, 6), _engine.ETOOFEW: (errors.RuntimeFailure, 6),
             -999: (errors.RuntimeFailure, 6)}
    for code, (cls, exit_code) in cases.items():
        exc = errors.from_c_error(code, "ctx")
        assert type(exc) is cls and exc.exit_code == exit_code, code
        assert exc.code == code and exc.name == _engine.err_name(code)
        # Without a message of its own, the engine's message for the code.
        assert _engine.strerror(code) in str(exc)
    assert errors.EXIT_RUNTIME not in (errors.EXIT_USAGE, errors.EXIT_TRUNCATED, errors.EXIT_WORKLOAD,
                                       errors.EXIT_SKEW, errors.EXIT_INTERRUPTED, 1)


def test_from_c_error_messages():
    exc = errors.from_c_error(_engine.EFORMAT, "trace t.json", message="expected a value", offset=17,
                              path="t.json")
    assert str(exc) == "invalid trace t.json: expected a value at byte 17"
    assert exc.offset == 17 and exc.path == "t.json"
    exc = errors.from_c_error(_engine.EIO, "trace t.json", message="cannot open the trace",
                              sys_errno=errno.ENOENT, path="t.json")
    assert str(exc) == f"trace t.json: cannot open the trace: {os.strerror(errno.ENOENT)}"
    assert exc.sys_errno == errno.ENOENT
    assert str(errors.from_c_error(_engine.ENOMEM, "running")) == "running: out of memory (OSK_ENOMEM)"


# ------------------------------------------------------------------- detect


def _event(name="aten::add", cat="cpu_op", args=None, ts=1.0):
    e = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1.0}
    if args is not None:
        e["args"] = args
    return e


def _write(path, doc, gz=False):
    text = json.dumps(doc)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return str(path)


@pytest.mark.parametrize("gz", [False, True])
def test_detect_torch_profiler_options(tmp_path, gz):
    def found(events, **top):
        return detect(_write(tmp_path / ("t.json.gz" if gz else "t.json"), {**top, "traceEvents": events}, gz))

    none = {"record_shapes": False, "with_stack": False, "profile_memory": False, "with_modules": False,
            "with_flops": False}
    assert found([_event()]) == {"instrument": "torch.profiler", "config": "minimal", "options": none, "backward": 0}
    # Backward nodes are counted (the step a default calibration prices it on),
    # by the name's prefix only: not an option.
    r = found([_event("autograd::engine::evaluate_function: AddmmBackward0"),
               _event("autograd::engine::evaluate_function: TBackward0"), _event("autograd::engine::evaluat")])
    assert r["backward"] == 2 and r["config"] == "minimal"
    r = found([_event(args={"Input Dims": [[1]]}), _event("f.py(1): f", cat="python_function")])
    assert r["config"] == "record_shapes+with_stack"
    assert r["options"] == {**none, "record_shapes": True, "with_stack": True}
    r = found([_event("[memory]", args={"Bytes": 4}), _event(args={"Module Hierarchy": "m"})])
    assert r["config"] == "profile_memory+with_modules"
    # with_flops implies shapes: the configuration is named by flops alone.
    r = found([_event(args={"Input Dims": [[1]], "flops": 8})])
    assert r["config"] == "with_flops" and not r["options"]["record_shapes"]
    # Look-alikes are not marks: a name, a value, a nested key.
    r = found([_event("Input Dims", args={"name": "flops", "x": {"Module Hierarchy": 1}})])
    assert r["config"] == "minimal"


def test_detect_opskew_traces(tmp_path):
    header = {"version": "0.1.0", "instrument": "itt", "clock": "tsc", "lost": {"total": 0}}
    r = detect(_write(tmp_path / "o.json", {"opskew": header, "traceEvents": [_event()]}))
    assert r == {"instrument": "opskew", "config": "itt", "options": {}, "header_calibration": None}
    # Anywhere at the top level, not only in the first bytes.
    r = detect(_write(tmp_path / "late.json", {"traceEvents": [_event()] * 3, "opskew": header}, gz=True))
    assert r["config"] == "itt"
    corrected = _write(tmp_path / "c.json", {"opskew": {"corrected": {"w_ns": 1.0}}, "traceEvents": []})
    with pytest.raises(errors.UsageError, match="already"):
        detect(corrected)


def test_detect_reads_the_whole_trace(tmp_path):
    """The marks come from a pass over every event: a with_stack event after
    the first 8 MiB (where the old text probe stopped) is found."""
    filler = [_event(args={"pad": "x" * 1000}, ts=float(i)) for i in range(9000)]
    path = _write(tmp_path / "big.json", {"traceEvents": filler + [_event("g", cat="python_function")]})
    assert os.path.getsize(path) > 8 << 20
    assert detect(path)["options"]["with_stack"]


def test_detect_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents":[{"ph":"X",]}')
    with pytest.raises(errors.TraceError, match="expected a string key at byte 26") as ei:
        detect(str(bad))
    assert ei.value.exit_code == errors.EXIT_USAGE
    with pytest.raises(errors.UsageError, match="none.json: not found") as ei:
        detect(str(tmp_path / "none.json"))
    assert ei.value.exit_code == errors.EXIT_USAGE
    # A truncated trace is detected from what was read.
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps({"traceEvents": [_event(args={"Input Dims": []}), _event()]})[:-20])
    assert detect(str(cut))["config"] == "record_shapes"


def test_times_keep_three_figures_across_unit_boundaries():
    from opskew.render.units import fmt_ns, fmt_time

    assert fmt_ns(999.6) == "1 us" and fmt_ns(999_600) == "1 ms" and fmt_ns(999.4) == "999 ns"
    assert fmt_time(0.9996) == "1 s" and fmt_time(1.5e-6) == "1.5 us" and fmt_ns(None) == "n/a"
