"""Calibrations are validated on load (docs/correct.md): a bad file in the
cache is skipped with a one-line warning naming it and never breaks a
command; `calibrate --clear` removes only what calibrate wrote."""

import copy
import json
import os
import random
import stat

import pytest

from conftest import run_opskew
from opskew.calibration import store as calibration
from opskew.calibration.store import CalibrationError, loads, validate


def good_cal(instrument="torch.profiler", config="minimal"):
    import torch

    key = calibration.make_key(instrument, config, torch.__version__, "cpu", 1)
    key["workload"] = "builtin:add"
    return {"schema": calibration.SCHEMA, "date": "2026-12-03T06:00:00+0000", "key": key,
            "w_ns": {"median": 300.0, "ci95": [280.0, 320.0], "ci_coverage": 0.965},
            "delta_ns": {"median": 20.0, "method": "test"}, "rounds": 5, "iters": 3}


def test_a_good_calibration_is_accepted():
    cal = good_cal()
    assert validate(copy.deepcopy(cal)) == cal
    assert loads(json.dumps(cal).encode())["w_ns"]["median"] == 300.0


# Each defect seen in the field, as a change to a good calibration, and the
# words the one-line error must carry.
BAD = [
    ("missing key", lambda c: c.pop("key"), "key is null"),
    ("W a string", lambda c: c["w_ns"].update(median="300"), "w_ns.median is a string"),
    ("W null", lambda c: c["w_ns"].update(median=None), "w_ns.median is null"),
    ("W a list", lambda c: c["w_ns"].update(median=[300]), "w_ns.median is a list"),
    ("W a boolean", lambda c: c["w_ns"].update(median=True), "w_ns.median is a boolean"),
    ("W 1e300", lambda c: c["w_ns"].update(median=1e300), "above 1 ms"),
    ("W negative", lambda c: c["w_ns"].update(median=-5.0), "w_ns.median is negative"),
    ("delta negative", lambda c: c["delta_ns"].update(median=-1.0), "delta_ns.median is negative"),
    ("delta above W", lambda c: c["delta_ns"].update(median=301.0), "above W"),
    ("ci95 reversed", lambda c: c["w_ns"].update(ci95=[320.0, 280.0]), "ci95"),
    ("threads 0", lambda c: c["key"].update(threads=0), "key.threads"),
    ("machine missing", lambda c: c["key"].pop("machine"), "key.machine"),
    ("w_py a string", lambda c: c.update(w_py_ns={"median": "x"}), "w_py_ns.median"),
    ("delta_py above W_py", lambda c: c.update(w_py_ns={"median": 100.0}, delta_py_ns={"median": 200.0}),
     "delta_py_ns.median"),
    ("wrong schema", lambda c: c.update(schema="x/1"), "not an opskew calibration"),
]


@pytest.mark.parametrize("what,change,words", BAD, ids=[b[0] for b in BAD])
def test_each_bad_field_is_named(what, change, words):
    cal = good_cal()
    change(cal)
    with pytest.raises(CalibrationError) as e:
        loads(json.dumps(cal).encode(), "/x/bad.json")
    msg = str(e.value)
    assert "/x/bad.json" in msg and words in msg and "\n" not in msg


@pytest.mark.parametrize("text,words", [
    (b'{"w_ns": {"median": NaN}}', "NaN"),
    (b'{"w_ns": {"median": Infinity}}', "Infinity"),
    (b"\xff\xfe", "decode"),
    (b"[1, 2", "Expecting"),
    (b"[" * 100000, "recursion"),
    (b" " * ((1 << 20) + 1), "larger than 1 MiB"),
    (b"[]", "a list, not an object"),
])
def test_malformed_bytes_are_one_line_errors(text, words):
    with pytest.raises(CalibrationError) as e:
        loads(text, "f.json")
    assert words.lower() in str(e.value).lower() and "\n" not in str(e.value)


def _mutate(rng, obj):
    """One random structural change somewhere in a JSON value."""
    if isinstance(obj, dict) and obj and rng.random() < 0.7:
        k = rng.choice(sorted(obj))
        r = rng.random()
        if r < 0.2:
            obj.pop(k)
        elif r < 0.6 and isinstance(obj[k], (dict, list)):
            _mutate(rng, obj[k])
        else:
            obj[k] = rng.choice([None, True, False, 0, -1, 1e300, -1e-300, 2 ** 70, "", "300", [], {},
                                 [1.0, 2.0], {"median": 1.0}, float("nan"), float("inf")])
        return
    if isinstance(obj, list) and obj:
        i = rng.randrange(len(obj))
        obj[i] = rng.choice([None, "x", 1e308, -1.0, [], True])


def test_loader_fuzz_pass():
    """Random structural mutations and byte flips of a good calibration: the
    loader returns a calibration that validates, or raises CalibrationError;
    nothing else ever escapes (fuzz/fuzz_calibration.py runs this for long)."""
    rng = random.Random(20261203)
    base = good_cal()
    accepted = rejected = 0
    for i in range(3000):
        cal = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            _mutate(rng, cal)
        raw = json.dumps(cal, allow_nan=True).encode()
        if i % 3 == 0 and raw:
            b = bytearray(raw)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            raw = bytes(b)
        try:
            got = loads(raw, "fuzz.json")
        except CalibrationError:
            rejected += 1
            continue
        accepted += 1
        w = got["w_ns"]["median"]
        assert 0 <= w <= calibration.MAX_NS and 0 <= got["delta_ns"]["median"] <= w
    assert accepted > 50 and rejected > 1000  # both sides of the loader were exercised


@pytest.fixture
def cache(tmp_path):
    d = tmp_path / "cache"
    (d / "calibrations").mkdir(parents=True)
    return d


def _store(cache, name, cal):
    p = cache / "calibrations" / name
    p.write_text(json.dumps(cal) if isinstance(cal, dict) else cal)
    return p


TRACE = {"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 20.0, "dur": 3.0}]}


def test_a_bad_file_in_the_cache_never_breaks_correct(cache, tmp_path):
    """The field report: a missing "key", or a w_ns.median that is a string,
    gave a traceback from every `opskew correct`; W = 1e300 zeroed every
    operator; a NaN W was called an invalid trace."""
    good = good_cal()
    bad1 = good_cal()
    bad1.pop("key")
    bad2 = good_cal()
    bad2["w_ns"]["median"] = "300"
    bad3 = good_cal()
    bad3["w_ns"]["median"] = 1e300
    _store(cache, "a-bad-0000000001.json", bad1)
    _store(cache, "b-bad-0000000002.json", bad2)
    _store(cache, "c-bad-0000000003.json", bad3)
    _store(cache, "d-bad-0000000004.json", json.dumps(good).replace("300.0,", "NaN,", 1))
    os.mkfifo(cache / "calibrations" / "e-fifo-0000000005.json")  # must not hang
    _store(cache, "z-good-0000000009.json", good)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(TRACE))
    out = tmp_path / "r.json"
    p = run_opskew("correct", str(trace), "--json", str(out), env={"OPSKEW_CACHE_DIR": str(cache)}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    r = json.loads(out.read_text())
    assert r["calibration"]["w_ns"] == 300.0 and r["calibration"]["source"].endswith("z-good-0000000009.json")
    warnings = [ln for ln in p.stderr.splitlines() if "warning: skipped" in ln]
    assert len(warnings) == 5, p.stderr
    for name, words in (("a-bad", "key is null"), ("b-bad", "w_ns.median is a string"),
                        ("c-bad", "above 1 ms"), ("d-bad", "NaN"), ("e-fifo", "not a regular file")):
        assert any(name in ln and words in ln for ln in warnings), (name, p.stderr)


def test_only_bad_files_means_no_calibration_not_a_traceback(cache, tmp_path):
    bad = good_cal()
    bad["delta_ns"]["median"] = -3.0
    _store(cache, "bad-0000000001.json", bad)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(TRACE))
    p = run_opskew("correct", str(trace), "--no-calibrate", env={"OPSKEW_CACHE_DIR": str(cache)}, timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "delta_ns.median is negative" in p.stderr and "no stored calibration" in p.stderr


def test_an_explicit_bad_calibration_is_one_line_exit_2(cache, tmp_path):
    bad = _store(cache, "x.json", '{"schema": "opskew.calibration/1", "key": 3}')
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(TRACE))
    p = run_opskew("correct", str(trace), "--calibration", str(bad), env={"OPSKEW_CACHE_DIR": str(cache)},
                   timeout=60)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "key is 3" in lines[0]


def test_show_lists_good_and_warns_about_bad(cache):
    _store(cache, "good-0000000001.json", good_cal())
    _store(cache, "bad-0000000002.json", "{")
    p = run_opskew("calibrate", "--show", env={"OPSKEW_CACHE_DIR": str(cache)}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "calibrations in" in p.stdout and ": 1\n" in p.stdout
    assert "bad-0000000002.json" in p.stderr and "Traceback" not in p.stderr


def test_clear_removes_only_what_calibrate_wrote(cache, tmp_path):
    ours = [_store(cache, n, good_cal()) for n in ("torch.profiler-minimal-cpu-t1-torch2-0123456789.json",
                                                   "opskew-native-cpu-t1-torch2-abcdef0123.json")]
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    os.chmod(victim, 0o600)
    link = cache / "calibrations" / "linked-00000000aa.json"
    os.symlink(victim, link)  # named like ours, but a link: left alone, and so is its target
    foreign = _store(cache, "notes.txt", "mine")
    sub = cache / "calibrations" / "sub-00000000bb.json"
    sub.mkdir()
    p = run_opskew("calibrate", "--clear", env={"OPSKEW_CACHE_DIR": str(cache)}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "removed 2" in p.stdout
    assert not any(o.exists() for o in ours)
    assert os.path.islink(link) and victim.read_text() == "precious"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert foreign.read_text() == "mine" and sub.is_dir()
    # A second clear finds nothing of ours; an absent cache is not an error.
    assert "removed 0" in run_opskew("calibrate", "--clear", env={"OPSKEW_CACHE_DIR": str(cache)}).stdout
    p = run_opskew("calibrate", "--clear", env={"OPSKEW_CACHE_DIR": str(tmp_path / "none")})
    assert p.returncode == 0 and "removed 0" in p.stdout


def test_a_calibration_under_95_percent_says_its_coverage():
    """Two rounds give a 50% interval: calibrate's warning says so, and never
    calls it a 95% CI or blames a busy machine for it. The warning is a
    note record (its figures), said by render.notes."""
    from opskew.experiments.calibrate import _noisy
    from opskew.render.notes import words

    rec = _noisy({"w_ns": {"median": 220.0, "ci95": [171.0, 279.0], "ci_coverage": 0.5}})
    assert rec["code"] == "calibration_noisy" and rec["busy"] is False and rec["constants"][0]["coverage"] == 0.5
    few = words(rec)
    assert "W's interval [171 ns, 279 ns] has only 50% coverage" in few
    assert "95% CI [" not in few and "busy" not in few
    wide = words(_noisy({"w_ns": {"median": 220.0, "ci95": [50.0, 400.0], "ci_coverage": 0.965}}))
    assert "W's 95% CI [50 ns, 400 ns] is wider than" in wide and "busy" in wide
    assert _noisy({"w_ns": {"median": 220.0, "ci95": [210.0, 230.0], "ci_coverage": 0.965}}) is None


def test_calibrate_json_report_is_not_taken_for_a_calibration():
    """`correct --calibration` given calibrate --json's report: the error says
    what the file is and which file to pass instead."""
    from opskew.calibration.store import validate

    with pytest.raises(ValueError, match=r"calibrate --json`'s report, not a calibration.*--show"):
        validate({"schema": "opskew.calibrate/1", "calibrations": []})
    with pytest.raises(ValueError, match="not an opskew calibration"):
        validate({"schema": "something/1"})


def test_calibrate_on_a_workload_without_operators_says_w_is_undefined(tmp_path):
    """No operator event: W per event was the window's whole added time (1.3
    ms), refused as implausible with advice to rerun on a quieter machine,
    which no rerun fixes."""
    import subprocess
    import sys

    (tmp_path / "wl.py").write_text("def nothing():\n    pass\n")
    env = dict(os.environ, OPSKEW_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-m", "opskew", "calibrate", "wl.py:nothing", "--no-tracer", "--trials", "6",
                        "--warmup", "0.1", "--json", "c.json"], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "no operator events: W undefined" in p.stdout and "quieter machine" not in p.stdout, p.stdout
    cal = json.loads((tmp_path / "c.json").read_text())["calibrations"][0]
    assert cal["op_events_per_iter"] == 0 and cal["_path"] is None


def test_the_leaf_panel_s_operators_are_leaves_under_every_configuration(tmp_path):
    """calibrate's delta is the leaf panel's mean operator self time against
    opskew's tracer: every operator of the panel must be a leaf (no operator
    inside it) in torch.profiler's trace, whatever the options."""
    import torch

    from opskew.analyze.tracefile import summarize
    from opskew.measure.workload import leaf_panel

    wl = leaf_panel("cpu", 16)
    wl.iteration()
    for opts in ({}, {"record_shapes": True, "with_stack": True}, {"profile_memory": True, "with_flops": True}):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **opts) as p:
            wl.iteration()
        path = tmp_path / "panel.json"
        p.export_chrome_trace(str(path))
        ops = [o for o in summarize(str(path), categories=["cpu_op"])["ops"]]
        assert {o["name"] for o in ops} == {"aten::neg", "aten::add", "aten::addcmul", "aten::cat", "aten::view",
                                             "aten::clamp_min", "aten::copy_", "aten::empty"}, opts
        assert all(o["descendants"] == 0 and o["calls"] == 2 for o in ops), (opts, ops)


def test_a_stored_calibration_flagged_noisy_is_said_where_it_corrects(cache, tmp_path):
    """Validation found stored calibrations that calibrate had flagged noisy
    over-correcting traces a minute later, and `opskew correct` said nothing
    of the flag. It says it now, from the stored record (an earlier
    version's sentence too), and says nothing of a quiet one."""
    from opskew.experiments.calibrate import _noisy

    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(TRACE))
    out = tmp_path / "r.json"
    for name, noisy, said in (
            ("a-quiet-0000000001.json", None, None),
            ("b-noisy-0000000002.json", _noisy({"w_ns": {"median": 300.0, "ci95": [100.0, 700.0],
                                                         "ci_coverage": 0.965}}), "wider than +-20% of 300 ns"),
            ("c-older-0000000003.json", "W's 95% CI [1 ns, 9 ns] is wide (an earlier version's words)",
             "an earlier version's words")):
        for f in (cache / "calibrations").glob("*.json"):
            f.unlink()
        _store(cache, name, dict(good_cal(), noisy=noisy))
        p = run_opskew("correct", str(trace), "--json", str(out), env={"OPSKEW_CACHE_DIR": str(cache)}, timeout=60)
        assert p.returncode == 0, p.stderr
        codes = [n["code"] for n in json.loads(out.read_text())["notes"]]
        if said is None:
            assert "stored_calibration_noisy" not in codes and "flagged when it was measured" not in p.stdout
        else:
            assert "stored_calibration_noisy" in codes
            line = next(ln for ln in p.stdout.splitlines() if "flagged when it was measured" in ln)
            assert name in line and said in line
