"""opskew.profile: the drop-in for torch.profiler.profile that measures and
corrects its own overhead in the user's loop (docs/profile.md)."""

import io
import os
import subprocess
import sys
import threading
import time

import pytest

torch = pytest.importorskip("torch")

import opskew  # noqa: E402
from conftest import NOISE_ATTEMPTS, python_c  # noqa: E402
from opskew.render.notes import all_words, priced  # noqa: E402
from opskew.analyze import tracefile  # noqa: E402
from opskew.stats.pricing import ADVICE  # noqa: E402

OPS = 20  # torch.add calls per step: one aten::add event each


def make_body(spin_ns=0):
    """One step of the loop: OPS additions; with spin_ns, each is preceded by
    a busy-wait of spin_ns, only while the profiler records (a known cost
    standing in for the profiler's own)."""
    a, b = torch.ones(8), torch.ones(8)

    def body():
        for _ in range(OPS):
            if spin_ns and torch.autograd.profiler._is_profiler_enabled:
                end = time.perf_counter_ns() + spin_ns
                while time.perf_counter_ns() < end:
                    pass
            torch.add(a, b)

    return body


def exporter(folder, suffix=".json"):
    """An on_trace_ready that exports each trace as torch's users do, and
    counts its calls."""
    def handler(prof):
        handler.paths.append(os.path.join(folder, f"trace{len(handler.paths)}{suffix}"))
        prof.export_chrome_trace(handler.paths[-1])

    handler.paths = []
    return handler


def run_loop(make_prof, steps, body):
    with make_prof() as p:
        for _ in range(steps):
            body()
            p.step()
    return p


def store_calibration(config, w, delta, **extra):
    """A stored torch.profiler calibration of `config` for this torch and
    thread count: W and delta as (median, [lo, hi]), and any other members."""
    from opskew.calibration import store as calibration

    key = calibration.make_key("torch.profiler", config, torch.__version__, "cpu", torch.get_num_threads())
    calibration.store({"schema": calibration.SCHEMA, "key": key, "date": "2026-01-01",
                       "w_ns": {"median": w[0], "ci95": w[1]}, "delta_ns": {"median": delta[0], "ci95": delta[1]},
                       **extra})


def op_counts(path):
    """Calls per name of the operator categories, from the C reader."""
    s = tracefile.summarize(path, categories=["cpu_op", "user_annotation"])
    return {o["name"]: o["calls"] for o in s["ops"]}


def test_import_opskew_does_not_import_torch_and_profile_is_the_class():
    code = ("import sys, opskew; assert 'torch' not in sys.modules; p = opskew.profile; "
            "from opskew.profiler.core import profile as c; import opskew.profiler.core; "
            "assert opskew.profile is p is c; "
            "assert 'torch' not in sys.modules; print(p.__name__)")
    assert python_c(code).strip() == "profile"


def test_drop_in_gives_the_same_trace_as_torch(tmp_path):
    body = make_body()
    # 7 active steps a cycle: 6 pairs (the first is cold), each with a warm
    # wait step of its own (8 wait steps: the run's first, or the first 2
    # after a trace, are cold), enough for W's CI from the first cycle on.
    sched = dict(wait=8, warmup=1, active=7, repeat=2)
    results = {}
    for name, cls, kw in (("torch", torch.profiler.profile, {}),
                          ("opskew", opskew.profile, {"report_file": None})):
        d = tmp_path / name
        d.mkdir()
        h = exporter(str(d))
        run_loop(lambda: cls(activities=[torch.profiler.ProfilerActivity.CPU],  # noqa: B023
                             schedule=torch.profiler.schedule(**sched), on_trace_ready=h, **kw),  # noqa: B023
                 34, body)
        results[name] = h.paths
    assert len(results["torch"]) == len(results["opskew"]) == 2  # on_trace_ready, as often
    for t, o in zip(results["torch"], results["opskew"]):
        ct, co = op_counts(t), op_counts(o)
        assert ct == co
        assert ct["aten::add"] == 7 * OPS
    # The raw traces are torch's own: opskew wrote its corrected ones beside them.
    assert sorted(os.listdir(tmp_path / "opskew")) == ["trace0.corrected.json", "trace0.json",
                                                       "trace1.corrected.json", "trace1.json"]


def test_wait_steps_open_no_step_range_and_read_no_cpu_clock(tmp_path):
    """A wait step's step() opens no ProfilerStep#N range (no profiler records
    one) and, outside torchrun, reads no CPU clock (W_own is for a job's
    ranks): both ran between two bodies and slowed the next one
    (docs/profile.md). opskew's own tracer, around the loop, sees which steps
    had a range; torch opens one in every step."""
    body = make_body()
    with opskew.trace() as tr:
        p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,
                                            schedule=torch.profiler.schedule(wait=2, warmup=1, active=2, repeat=1)),
                     7, body)
    if tr.instrument not in ("native", "itt"):  # the fallback records builtin calls, not ranges
        pytest.skip(f"opskew's tracer fell back to {tr.instrument}: no record_function ranges to see")
    path = tr.write(str(tmp_path / "t.json"))
    ranges = sorted(n for n in op_counts(path) if n.startswith("ProfilerStep#"))
    assert ranges == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]  # the warmup and active steps
    assert [s["phase"] for s in p.steps[:5]] == ["wait", "wait", "warmup", "active", "active"]
    assert p.steps and all("cpu_ns" not in s for s in p.steps)
    assert p.final is None or p.final["w_own_ns"] is None



def _counting_schedule(log, **kw):
    inner = torch.profiler.schedule(**kw)

    def sched(step):
        log.append(step)
        return inner(step)
    return sched


@pytest.mark.parametrize("daemon,driver", [("", False), ("", True), ("1", False)])
def test_wait_steps_take_the_short_way_and_keep_torchs_schedule(tmp_path, monkeypatch, daemon, driver):
    """From a wait step to a wait step, opskew's step() moves torch's
    schedule on itself (torch's step() does no more there) and keeps its
    step record; every other transition goes through torch. The user's
    schedule is called once per step, with the same step numbers as by torch,
    and the profiler's state after each step() is torch's. Under
    KINETO_USE_DAEMON (torch's step() then moves Kineto's step counter) every
    step goes through torch. `driver`: the body is ended before step(), as
    `opskew profile`'s step driver does."""
    if daemon:
        monkeypatch.setenv("KINETO_USE_DAEMON", daemon)
    else:
        monkeypatch.delenv("KINETO_USE_DAEMON", raising=False)
    body = make_body()
    sched = dict(wait=4, warmup=1, active=2, repeat=2)
    calls, states, handled = {}, {}, {}
    for name, cls, kw in (("torch", torch.profiler.profile, {}),
                          ("opskew", opskew.profile, {"report_file": None})):
        calls[name], states[name] = [], []
        h = exporter(str(tmp_path), suffix=f".{name}.json")
        p = cls(activities=[torch.profiler.ProfilerActivity.CPU], schedule=_counting_schedule(calls[name], **sched),
                on_trace_ready=h, **kw)
        if name == "opskew":  # counts the calls of torch's step()
            torch_step, through = p.prof.step, []
            p.prof.step = lambda: (through.append(p.prof.step_num), torch_step())[1]  # noqa: B023
        with p:
            for _ in range(16):
                body()
                if driver and name == "opskew":
                    p._end_body()
                p.step()
                states[name].append((p.step_num, p.current_action.name,
                                     getattr(p, "_prev_schedule_action", p.current_action).name))
        handled[name] = len(h.paths)
    assert calls["opskew"] == calls["torch"]
    assert states["opskew"] == states["torch"]
    assert handled["opskew"] == handled["torch"] == 2
    assert p._quiet_waits is (not daemon)
    # The wait steps are there, numbered as torch numbers them, and step()
    # took its short way in those between two wait steps.
    waits = [s["step"] for s in p.steps if s["phase"] == "wait" and not s.get("partial")]
    assert waits == [0, 1, 2, 3, 7, 8, 9, 10, 14, 15]
    assert through == ([3, 4, 5, 6, 10, 11, 12, 13] if not daemon else list(range(16)))
    assert [c["after_step"] for c in p.step_calls[:16]] == list(range(16))
    assert all(s["ns"] > 0 for s in p.steps if not s.get("partial"))
    assert p.report["pairs"] > 0


def test_pairs_within_settle_steps_of_a_trace_are_counted_and_said():
    """The wait steps 2 to 7 after a trace still run slow (docs/method.md,
    "Wait steps under a live profiler"): pairs that take them are counted and
    the report says so; with wait=14 the last 6 wait steps lie past them."""
    from opskew.stats.pricing import ADVICE, SETTLE

    assert SETTLE + 6 == 14
    body = make_body()
    got = {}
    for wait in (8, 14):
        p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,  # noqa: B023
                                            schedule=torch.profiler.schedule(wait=wait, warmup=1, active=7,  # noqa: B023
                                                                             repeat=2)),
                     2 * (wait + 8), body)
        first, second = p.reports
        got[wait] = (first["pairs_near_trace"], second["pairs_near_trace"], second["pairs"],
                     [n for n in all_words(second["notes"]) if "within 8 steps of a trace" in n])
    # The first cycle's wait block follows start(), not a trace.
    assert got[8][0] == 0 and got[14][0] == 0
    # wait=8: the second cycle's 6 pairs all take positions 2 to 7 after the first trace.
    assert got[8][1] == 6 and got[8][2] == 12 and len(got[8][3]) == 1
    assert got[8][3][0].startswith("6 of 12 pairs") and got[8][3][0].endswith(ADVICE)
    assert got[14][1] == 0 and got[14][2] == 12 and not got[14][3]
    # Too short a wait to pair every active step: the note names the one advised schedule.
    p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,
                                        schedule=torch.profiler.schedule(wait=4, warmup=1, active=7, repeat=1)),
                 12, body)
    said = [n for n in all_words(p.report["notes"]) if "had no warm wait step left to pair with" in n]
    assert len(said) == 1 and said[0].endswith(ADVICE)

RANGES_CHECK = r"""
import json, os, sys, torch, opskew
from torch.profiler import ProfilerActivity, schedule
out = sys.argv[1]
a = torch.ones(4)
with opskew.profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                    on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out, "t.json")),
                    report_file=None) as p:
    for _ in range(6):
        torch.add(a, a)
        p.step()
steps = {e["name"]: e.get("cat") for e in json.load(open(os.path.join(out, "t.json")))["traceEvents"]
         if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")}
print(json.dumps({"route": p.step_ranges, "steps": steps, "notes": p.report["notes"],
                  "averaged": [e.count for e in p.key_averages() if e.key == "ProfilerStep*"]}))
"""


@pytest.mark.parametrize("native_env", ["1", "0"])
def test_step_ranges_open_through_the_native_shim_or_record_function(tmp_path, native_env):
    """opskew.profile opens the ProfilerStep#N ranges through its native shim
    (a C++ RecordFunction of user scope: the same user_annotation event as
    torch's record_function, without torch.ops' dispatch inside the range);
    with the shim unavailable (OPSKEW_NATIVE=0) through record_function, and
    the report says so. The trace is torch's either way."""
    from opskew.tracer import native

    if native_env == "1" and native.shim(torch)[0] is None:
        pytest.skip(f"the native shim is unavailable here: {native.shim(torch)[1]}")
    p = subprocess.run([sys.executable, "-c", RANGES_CHECK, str(tmp_path)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "OPSKEW_NATIVE": native_env})
    assert p.returncode == 0, p.stderr
    r = __import__("json").loads(p.stdout.strip().splitlines()[-1])
    # the active steps, as torch.profiler records them (the warmup step's range is not recorded)
    assert r["steps"] == {f"ProfilerStep#{k}": "user_annotation" for k in (2, 3, 4)}
    assert r["averaged"] == [3]  # key_averages groups them as torch's ProfilerStep*
    noted = [n for n in all_words(r["notes"]) if n.startswith("ProfilerStep#N ranges opened with torch's record_function")]
    if native_env == "1":
        assert r["route"] == {"route": "native", "why": None} and not noted
    else:
        assert r["route"]["route"] == "record_function" and "OPSKEW_NATIVE=0" in r["route"]["why"]
        assert len(noted) == 1 and "OPSKEW_NATIVE=0" in noted[0]


def test_a_step_cut_short_is_no_straddle_and_step_on_another_thread_is_named(tmp_path):
    """An exception in an active step: its range holds events too, which the
    straddle check (ranges holding under half the trace's operators) left out,
    so it called the ranges straddling and gave each step the trace's total.
    step() on another thread than start() was reported as another profiler
    ending the session. Without a schedule there are no ranges, and
    step_ranges says so."""
    x = torch.ones(4)
    path = str(tmp_path / "cut.json")
    p = opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,
                       schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
                       on_trace_ready=lambda q: q.export_chrome_trace(path))
    with pytest.raises(RuntimeError, match="data error"):
        with p:
            for i in range(10):
                for _ in range(5):
                    x = torch.add(x, 1)
                if i == 3:
                    raise RuntimeError("data error in step 3")
                p.step()
    assert not any("straddle" in n for n in all_words(p.report["notes"])), all_words(p.report["notes"])
    ops = sum(c for n, c in op_counts(path).items() if not n.startswith("ProfilerStep#"))
    # steps 2 and 3 (cut short) did the same work: step 2 holds half the trace's operators
    assert p.report["events"]["per_step"] is True and p._events[2][0] == ops / 2

    p = opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,
                       schedule=torch.profiler.schedule(wait=1, warmup=1, active=3))
    p.start()
    for _ in range(6):
        x = x + 1
        t = threading.Thread(target=p.step)
        t.start()
        t.join()
    p.stop()
    assert "step() ran on another thread than start()" in p.report["error"], p.report
    assert p.report["step_ranges"] == p.step_ranges and p.step_ranges["route"] in ("native", "record_function")

    with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None) as p:
        for _ in range(3):
            x = x + 1
            p.step()
    assert p.step_ranges["route"] == "none" and "no schedule" in p.step_ranges["why"]


def test_long_wait_blocks_keep_only_the_steps_pairing_uses(tmp_path):
    """The steps after the schedule's last cycle run to the end of training
    (and a wait can be thousands of steps): a wait block keeps its first
    POST_TRACE + NEAR steps and its last NEAR, counts the rest, and pairs
    exactly as it would with all of them."""
    from opskew.stats.pricing import NEAR, POST_TRACE

    body = make_body()
    p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,
                                        corrected_dir=str(tmp_path),
                                        schedule=torch.profiler.schedule(wait=40, warmup=1, active=7, repeat=2)),
                 120, body)
    # steps 0-39 wait, 40 warmup, 41-47 active, 48-87 wait, 88 warmup, 89-95 active, 96-119 wait (after the cycles)
    assert p.step_counts() == {"wait": 104, "warmup": 2, "active": 14}
    keep = POST_TRACE + 2 * NEAR
    kept = [s["step"] for s in p.steps if s["phase"] == "wait" and not s.get("partial")]
    assert len(kept) == 3 * keep
    assert kept[:keep] == list(range(POST_TRACE + NEAR)) + list(range(40 - NEAR, 40))
    assert len(p.step_calls) == 121 - (104 - 3 * keep)  # 120 step() calls and stop(), less the dropped steps'
    assert {c["after_step"] for c in p.step_calls} >= set(kept)
    assert p.final["pairs"] == 12  # 6 warm active steps a cycle, each paired with a warm wait step before it


def test_long_runs_keep_the_last_cycles_steps(tmp_path, monkeypatch):
    """repeat=0 runs for thousands of cycles: W comes from the steps of the
    last KEEP_CYCLES traced cycles (and the baseline before the oldest), the
    older steps are counted, not kept, and the first kept wait block's first
    POST_TRACE steps stay cold (it follows a trace)."""
    from opskew.profiler import cycle as profiling
    from opskew.stats.pricing import NEAR, POST_TRACE

    monkeypatch.setattr(profiling, "KEEP_CYCLES", 3)
    monkeypatch.setattr(profiling, "MAX_RECORRECT", 3)  # equal, as in opskew
    body = make_body()
    wait, active, cycles = POST_TRACE + NEAR, 4, 7
    n = (wait + 1 + active) * cycles + 5
    p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,
                                        corrected_dir=str(tmp_path),
                                        schedule=torch.profiler.schedule(wait=wait, warmup=1, active=active,
                                                                         repeat=0)),
                 n, body)
    assert len(p.reports) == cycles
    # Every step is counted (the last one is stop()'s partial body).
    assert p.step_counts() == {"wait": wait * cycles + 5, "warmup": cycles, "active": active * cycles}
    # Kept: the wait and warmup before the 3rd-last cycle, the last 3 cycles, and what follows.
    first = (wait + 1 + active) * (cycles - 3)
    assert p.steps[0]["step"] == first and p.steps[0]["phase"] == "wait"
    assert min(c["after_step"] for c in p.step_calls) >= first
    assert set(p._events) == {s["step"] for s in p.steps if s["phase"] == "active"}
    # 3 warm active steps a cycle, each with a warm wait step: the 3 cycles' 9 pairs,
    # none from the first kept block's first POST_TRACE (cold) steps.
    assert p.final["pairs"] == 3 * (active - 1)
    assert (p.final["cycles"], p.final["run_cycles"]) == (3, cycles)
    # Reports older than the last 3 keep their operators' summary and marks, not the table.
    has = [sorted(set(r.get("operators") or {}) & {"ops", "marks"}) for r in p.reports]
    assert all(h in ([], ["marks"]) for h in has[:-3]) and ["marks"] in has[:-3], has
    assert has[-3:] == [["marks", "ops"]] * 3, has
    w, notes, detail = p._estimate()
    assert detail["pairs"] == 3 * (active - 1) and detail["unpaired_active_steps"] == 0


def test_stop_twice_steps_around_the_session_and_nesting_do_no_harm(tmp_path):
    """Calls torch accepts: a stop() inside `with` (then __exit__'s), step()
    before start(), step() after stop(), and a profiler started inside this
    one. The first and last crashed the process (torch's export of a session
    already gone); the second raised AttributeError; the third crashes
    torch's own profiler (a session of a stopped profiler started again). Each runs in a child, so a crash
    fails the test instead of the suite."""
    code = r"""
import torch, opskew
CPU = [torch.profiler.ProfilerActivity.CPU]
a = torch.ones(8)
with opskew.profile(activities=CPU, report_file=None) as p:
    a + a
    p.stop()
assert len(p.reports) == 1 and p.reports[0].get("error") is None, p.reports
p = opskew.profile(activities=CPU, report_file=None, schedule=torch.profiler.schedule(wait=1, warmup=1, active=2))
p.step(); p.start()
for _ in range(6):
    a + a; p.step()
p.stop()
assert len(p.reports) >= 1
n = len(p.reports)
for _ in range(8):  # after stop(): torch's step() starts a stopped session again and crashed
    a + a; p.step()
assert len(p.reports) == n and not torch.autograd._profiler_enabled()
for inner in (lambda: opskew.profile(activities=CPU, report_file=None),
              lambda: torch.profiler.profile(activities=CPU)):
    with opskew.profile(activities=CPU, report_file=None) as outer:
        with inner():
            a + a
    assert "ended its session" in outer.reports[-1]["error"], outer.reports
# A cycle whose session was lost keeps its active steps: the next one gets its own only.
with opskew.profile(activities=CPU, report_file=None,
                    schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)) as outer:
    for i in range(9):
        a + a
        if i == 2:
            with torch.profiler.profile(activities=CPU):
                a + a
        outer.step()
tags = [s.get("cycle") for s in outer.steps if s["phase"] == "active" and not s.get("partial")]
assert "ended its session" in outer.reports[0]["error"] and outer.reports[1].get("error") is None, outer.reports
assert tags == [1, 1, 2, 2], tags
print("ok")
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), (p.returncode, p.stderr[-3000:])


def test_drop_in_delegates_key_averages_and_context_manager(tmp_path):
    body = make_body()
    with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None) as p:
        body()
    ka = {e.key: e.count for e in p.key_averages()}
    assert ka["aten::add"] == OPS
    p.export_chrome_trace(str(tmp_path / "t.json"))
    assert op_counts(str(tmp_path / "t.json"))["aten::add"] == OPS


def test_known_answer_w_recovers_the_injected_cost(tmp_path):
    """A busy-wait of SPIN ns before each operator, only while the profiler
    records, dwarfs the profiler's own cost (a few us): the in-loop W must
    come out within 20% of it."""
    spin = 50_000
    body = make_body(spin)
    for attempt in range(NOISE_ATTEMPTS):  # retries absorb bursts of noise (conftest.until)
        h = exporter(str(tmp_path), suffix=f".{attempt}.json")
        p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU],  # noqa: B023
                                            schedule=torch.profiler.schedule(wait=6, warmup=1, active=5,
                                                                             repeat=2),
                                            on_trace_ready=h, report_file=None), 26, body)  # noqa: B023
        r = p.report
        w = r["w_ns"]["median"]
        if abs(w - spin) <= 0.2 * spin and abs(r["corrected_step_ns"] - r["baseline_step_ns"]) <= 0.2 * OPS * spin \
                and r["active_step_ns"] - r["baseline_step_ns"] >= 0.8 * OPS * spin \
                and r["warmup_extra_per_step_ns"] < 0.5 * OPS * spin:
            break
    assert r["events_per_active_step"] == OPS  # counted from ProfilerStep#N in C
    assert r["events"]["per_step"] is True
    # 2 cycles x (5 active - the cold first one), each with a wait step of its
    # own: 5 warm before cycle 1 (the run's first is cold), 4 before cycle 2.
    assert r["pairs"] == 8 and r["unpaired_active_steps"] == 0
    assert abs(w - spin) <= 0.2 * spin, f"injected {spin} ns, recovered {w:.0f} ns"
    lo, hi = r["w_ns"]["ci95"]
    assert lo <= w <= hi
    # W's CI carried into the step: every step holds OPS events, so the
    # pairs' band is W's interval times OPS around their corrected step; the
    # trace's (the passes at W's CI ends, where no time is below 0) holds
    # its corrected step.
    b_lo, b_hi = r["corrected_step_pairs_w_ci_ns"]
    assert b_lo == pytest.approx(r["corrected_step_pairs_ns"] - (hi - w) * OPS, rel=1e-9)
    assert b_hi == pytest.approx(r["corrected_step_pairs_ns"] + (w - lo) * OPS, rel=1e-9)
    t_lo, t_hi = r["corrected_step_w_ci_ns"]
    assert t_lo <= r["corrected_step_ns"] <= t_hi
    assert r["verdict"]["enough_pairs"] and r["verdict"]["skewed"]
    # The corrected step is the step without the injected cost: within 20% of
    # that cost of the wait steps.
    assert abs(r["corrected_step_ns"] - r["baseline_step_ns"]) <= 0.2 * OPS * spin
    assert r["active_step_ns"] - r["baseline_step_ns"] >= 0.8 * OPS * spin
    # The warmup steps do not record: they cost far less than an active step.
    assert r["warmup_extra_per_step_ns"] < 0.5 * OPS * spin
    # Phases per step, from the schedule.
    phases = [s["phase"] for s in p.steps[:12]]
    assert phases == ["wait"] * 6 + ["warmup"] + ["active"] * 5


def test_corrected_trace_and_report(tmp_path):
    spin = 20_000
    h = exporter(str(tmp_path), suffix=".json.gz")
    out = io.StringIO()
    p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                        schedule=torch.profiler.schedule(wait=6, warmup=1, active=4, repeat=3),
                                        on_trace_ready=h, report_file=out), 34, make_body(spin))
    assert len(p.reports) == 3 and p.report is p.reports[-1]
    r = p.report
    raw = h.paths[-1]
    corrected = raw[: -len(".json.gz")] + ".corrected.json.gz"
    assert r["raw_trace"] == raw and r["corrected_trace"] == corrected and os.path.exists(corrected)
    w = r["w_ns"]
    assert w["median"] > 0 and w["ci95"][0] <= w["median"] <= w["ci95"][1]
    assert r["verdict"]["skewed"] is True
    marks = {o["name"]: o["mark"] for o in r["operators"]["ops"]}
    assert marks["aten::add"] == "believable"  # the spin lies between operators, not in them
    # The steps hold the spin: never believable. Most of each step is spin, so
    # "unknowable" as a rule; "inflated" when a burst of load made W come out
    # low enough that less than half of a step is removed.
    steps = [m for n, m in marks.items() if n.startswith("ProfilerStep#")]
    assert steps and "believable" not in steps, marks
    # The corrected trace carries the in-run constants and the report.
    # At stop() every trace was corrected again with the run's final W.
    meta = tracefile.scan(corrected, header_only=True)["objects"]["opskew"]
    assert p.final["pairs"] >= r["pairs"] and r["corrected_w_ns"] == p.final["w_ns"]
    assert meta["corrected"]["w_ns"] == pytest.approx(p.final["w_ns"]["median"])
    assert meta["run"]["w_ns"]["ci95"] == pytest.approx(w["ci95"])
    assert meta["run"]["verdict"]["skewed"] is True and meta["run"]["w_source"] == "in-run"
    # ... and the corrected trace is the raw one less W between operators.
    assert op_counts(corrected)["aten::add"] == op_counts(raw)["aten::add"] == 4 * OPS
    text = out.getvalue()
    assert text.count("opskew.profile cycle") == 3
    assert "verdict: SKEWED" in text and f"corrected trace: {corrected}" in text
    # Each cycle answers first: its true step, with its band at W's CI ends.
    assert all(b.split(":", 1)[1].startswith(" true step ") and "at W's 95% CI], profiled " in b
               for b in text.split("opskew.profile cycle")[1:] if "  corrected trace: " in b), text
    # Stop and on_trace_ready ran inside step(): not in any step's time.
    assert r["on_trace_ready_ns"] > 0 and r["stop_ns"] > 0
    assert set(r["share_of_active_time"]) == {"instrument", "stop", "on_trace_ready"}
    # The model puts half of W after each event's end, but the spin lies
    # before each operator: after a step's last one the range holds too
    # little, and the corrected trace writes it longer than the table's
    # figure. The report's stretch is what the trace's ranges show.
    st = r["trace_step_stretch"]
    # The table reads the trace as written (docs/correct.md, "One time line"):
    # a range's figure is its formula's plus what it was written longer by.
    table = {o["name"]: o["corrected_total_ns"]["median"] for o in r["operators"]["ops"]}
    stretched = {o["name"]: o["stretched_ns"] for o in r["operators"]["ops"]}
    written = {o["name"]: o["total_ns"] for o in tracefile.summarize(corrected, categories=["user_annotation"])["ops"]
               if o["name"].startswith("ProfilerStep#")}
    assert st["steps"] == len(steps) == len(written)
    assert all(written[n] == table[n] for n in written)
    longer = sorted(stretched[n] for n in written)
    assert st["median_ns"] == pytest.approx((longer[1] + longer[2]) / 2, abs=4)
    said = "note: the corrected trace's ProfilerStep#N" in str(r)
    assert said == st["said"] == (st["share"] > 0.02)
    # Each range's time beyond opskew's timing of its step's body (the parts of
    # step() inside it) is taken out as the range's own instrument time.
    spans = r["step_spans_ns"]
    assert set(spans) == set(written) and all(v > 0 for v in spans.values())
    rows = {o["name"]: o for o in r["operators"]["ops"] if o["name"] in spans}
    for n, o in rows.items():
        beyond = o["reported_total_ns"] - spans[n] - r["delta_ns"]
        assert beyond > 0, (n, o["reported_total_ns"], spans[n])  # step() always runs inside its range a little
        assert o["added_ns"]["span"] == pytest.approx(beyond, abs=1)
        # (clamped at 0 where W x events outgrew the body: a burst of load in
        # the pairs can make W come out that high)
        want = spans[n] - o["added_ns"]["operators_below"] - o["added_ns"]["scaled"]
        assert table[n] == pytest.approx(max(want, 0.0) + o["stretched_ns"], abs=2)
        assert (o["clamped"] > 0) == (want < -2) or abs(want) <= 2
    # The cycle's first active step ran cold: from 3 cycles on, its events are
    # priced at W x (1 + its extra over W x its events), so its range comes
    # out as much shorter.
    cold = r["cold_step"]
    assert cold["name"] == min(spans, key=lambda n: int(n.split("#")[1])) and cold["cycles"] == 3
    extra = p.final["cold_first_active_extra_ns"]
    row = rows[cold["name"]]
    want = 1 + max(extra, 0) / (p.final["w_ns"]["median"] * cold["op_events"])
    from opskew.stats.pricing import COLD_MAX_SCALE

    if extra > 0 and p.final["w_ns"]["ci95"][0] > 0 and want <= COLD_MAX_SCALE:
        assert cold["w_scale"] == pytest.approx(want)
        assert row["added_ns"]["scaled"] == pytest.approx(extra, rel=1e-6)
    else:  # left in the step, and said why
        assert cold["w_scale"] == 1.0 and row["added_ns"]["scaled"] == 0
        assert priced(cold["why"]).startswith("priced at W")  # (a record: render.notes says it)
    # The other active steps: each at the W of the run's pairs at its
    # position in the cycle, over W (3 cycles: 3 pairs a position).
    names = sorted(spans, key=lambda n: int(n.split("#")[1]))
    figs = {f["position"]: f for f in p.final["w_by_position"]}
    assert [f["pairs"] for f in p.final["w_by_position"]] == [3, 3, 3]
    wm = p.final["w_ns"]["median"]
    for st in r["position_steps"]:
        assert st["name"] == names[st["position"]]
        want = figs[st["position"]]["w_ns"] / wm
        if p.final["w_ns"]["ci95"][0] > 0 and 1 / COLD_MAX_SCALE <= want <= COLD_MAX_SCALE:
            assert st["w_scale"] == pytest.approx(want) and st["pairs"] == 3
            assert rows[st["name"]]["added_ns"]["scaled"] == pytest.approx(
                (want - 1) * wm * rows[st["name"]]["descendants_per_call"], rel=1e-6, abs=1e-3)
        else:
            assert st["w_scale"] == 1.0 and priced(st["why"]).startswith("priced at W")
    from opskew.render.profile import render

    assert ("priced by position in the cycle" in render(r)) == any(st["w_scale"] != 1.0 for st in r["position_steps"])


def test_a_stretched_step_range_is_reported_and_said_once():
    # What the corrected trace writes longer than the model (per_operator's
    # rows, from the C pass that writes it): the median over the trace's
    # ranges, said past 2% of a step (the report's figure, which the
    # printed report words: no sentence kept in the report's notes),
    # replaced when the trace is corrected again (stop()'s final W).
    from opskew.profiler.traces import trace_steps as _trace_steps
    from opskew.render.profile import render

    def rows(stretch):
        return {"ops": [{"name": f"ProfilerStep#{k}", "calls": 1, "stretched_ns": x,
                         "corrected_total_ns": {"median": 100_000.0 + k, "ci95": [90_000.0 + k, 110_000.0 + k]}}
                        for k, x in enumerate(stretch, 9)]
                + [{"name": "aten::add", "calls": 40, "stretched_ns": 50_000.0,
                    "corrected_total_ns": {"median": 1_000.0}}]}

    def said(rep):
        text = render({"cycle": 1, "verdict": {"enough_pairs": True, "skewed": False, "significant": False,
                                               "test": "t"}, **rep})
        return [ln for ln in text.splitlines() if ln.startswith("  note: the corrected trace's ProfilerStep#N")]

    rep = {"notes": ["another note"], "corrected_step_ns": 95_000.0, "corrected_step_w_ci_ns": [1.0, 2.0]}
    _trace_steps(rep, rows([8_000.0, 12_000.0, 10_000.0]))
    assert rep["trace_step_stretch"] == {"median_ns": 10_000.0, "share": pytest.approx(0.1, rel=1e-3), "steps": 3,
                                         "said": True}
    # The report's corrected step is the trace's (the median range, its band
    # from the passes at W's CI ends); the pairs' stays beside it.
    assert rep["corrected_step_ns"] == 100_010.0 and rep["corrected_step_w_ci_ns"] == [90_010.0, 110_010.0]
    assert rep["corrected_step_pairs_ns"] == 95_000.0 and rep["corrected_step_pairs_w_ci_ns"] == [1.0, 2.0]
    assert len(said(rep)) == 1 and "10.0 us (10%) longer" in said(rep)[0] and rep["notes"] == ["another note"]
    _trace_steps(rep, rows([0.0, 1_000.0, 500.0]))  # corrected again: within 2%, the note goes
    assert rep["trace_step_stretch"]["median_ns"] == 500.0 and not rep["trace_step_stretch"]["said"]
    assert said(rep) == [] and rep["notes"] == ["another note"]
    _trace_steps(rep, {"ops": []})  # no ranges (no schedule)
    assert rep["trace_step_stretch"] is None and said(rep) == []


def test_every_advice_line_names_the_one_advised_schedule_and_why():
    """A newcomer read wait >= 8, wait >= 14, wait=21 and `opskew calibrate`
    in one run: each advice line now names one schedule, the advised one,
    with its reason (stats.pricing.ADVICE)."""
    from opskew import profiler
    from opskew.profiler.cycle import CycleAnalysis
    from opskew.stats.pricing import ADVICE, ADVISED_SCHEDULE

    assert "torch.profiler.schedule(skip_first=10, wait=21, warmup=1, active=7, repeat=3)" in ADVICE
    assert ADVISED_SCHEDULE == profiler.ADVISED_SCHEDULE and ADVISED_SCHEDULE["wait"] == profiler.REF_WAIT
    for scheduled in (True, False):
        c = CycleAnalysis(None, None, None, None, options={}, threshold=0.05, scheduled=lambda: scheduled,  # noqa: B023
                          waits=-1, rank=None, world_size=1)
        for args in ((0, False), (0, True, 2), (3, True)):
            said = c._advice(*args)
            assert said.endswith(ADVICE) and "wait >=" not in said, said


def test_too_few_wait_steps_says_what_to_change(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path / "empty-cache"))  # no stored calibration
    body = make_body(5_000)
    cases = {
        "few": (dict(schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)), 6,
                "paired so far; a 95% CI needs 6 "),
        "no wait": (dict(schedule=torch.profiler.schedule(wait=0, warmup=1, active=3, repeat=1)), 4,
                    "has an uninstrumented step to pair with; use opskew's advised schedule, "),
        "no schedule": ({}, 4, "no uninstrumented step to pair with; use opskew's advised schedule, "),
    }
    for name, (kw, steps, advice) in cases.items():
        h = exporter(str(tmp_path), suffix=f".{name.replace(' ', '-')}.json")
        out = io.StringIO()
        p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU],  # noqa: B023
                                            on_trace_ready=h, report_file=out, cost_model="off", **kw),  # noqa: B023
                     steps, body)
        r = p.report
        assert advice in r["advice"], (name, r["advice"])
        assert advice in out.getvalue()
        assert r["verdict"]["enough_pairs"] is False and r["verdict"]["skewed"] is False
        assert "no stored calibration" in r["fallback"] and "not corrected" in r["fallback"], name
        assert r["corrected_trace"] is None and not os.path.exists(h.paths[-1].replace(".json", ".corrected.json"))
        assert r["trace_step_stretch"] is None
        assert "verdict: not made" in out.getvalue()


def test_without_a_schedule_or_the_model_it_falls_back_to_a_stored_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path / "cache"))
    store_calibration("minimal", (3000.0, [2500.0, 3500.0]), (100.0, [80.0, 120.0]))
    h = exporter(str(tmp_path))
    out = io.StringIO()
    p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], on_trace_ready=h,
                                        report_file=out, cost_model="off"), 3, make_body())
    r = p.report
    assert r["advice"].startswith("no schedule: ") and ADVICE in r["advice"]
    assert r["w_source"].startswith("stored calibration")
    assert "its CI is that of its own calibration run" in r["fallback"]
    assert r["w_ns"]["median"] == 3000.0 and r["w_ns"]["ci95"] == [2500.0, 3500.0]
    assert r["delta_ns"] == 100.0
    meta = tracefile.scan(r["corrected_trace"], header_only=True)["objects"]["opskew"]
    assert meta["corrected"]["w_ns"] == 3000.0 and meta["corrected"]["delta_ns"] == 100.0
    assert meta["run"]["w_source"].startswith("stored calibration")
    assert "W 3 us [2.5 us, 3.5 us]" in out.getvalue()


def test_the_stored_calibration_is_looked_up_once_per_profiler(tmp_path, monkeypatch):
    # The lookup reads every stored calibration; it ran 2 to 3 times a cycle
    # between two bodies. Once per profiler, and every cycle keeps its delta.
    from opskew.calibration import store as calibration

    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path / "cache"))
    store_calibration("minimal", (300.0, [250.0, 350.0]), (1.0, [0.5, 1.5]))
    calls = []
    real = calibration.find

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(calibration, "find", counting)
    sched = torch.profiler.schedule(wait=8, warmup=1, active=7, repeat=2)
    p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                        corrected_dir=str(tmp_path / "out"), report_file=None),
                 32, make_body(spin_ns=20_000))
    assert len(p.reports) == 2
    assert [c[0] for c in calls] == ["torch.profiler"]
    assert all(r.get("corrected_trace") and r["delta_ns"] == 1.0 for r in p.reports)
    assert p.final["delta_ns"] == 1.0



def test_delta_from_another_thread_count_or_none_is_said(tmp_path, monkeypatch):
    """delta comes from the stored calibration of this configuration; made
    with another intra-op thread count it stands in, and the report says so;
    with none stored, delta is 0 and the report says what that leaves."""
    from opskew.calibration import store as calibration

    sched = dict(wait=8, warmup=1, active=7, repeat=1)
    got = {}
    for case in ("other threads", "none"):
        monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path / case.replace(" ", "-")))
        if case == "other threads":
            key = calibration.make_key("torch.profiler", "minimal", torch.__version__, "cpu",
                                       torch.get_num_threads() + 1)
            calibration.store({"schema": calibration.SCHEMA, "key": key, "date": "2026-01-01",
                               "w_ns": {"median": 300.0, "ci95": [250.0, 350.0]},
                               "delta_ns": {"median": 7.0, "ci95": [5.0, 9.0]}})
            # The one rule check --corrected-trace uses too: exact thread count first.
            n = torch.get_num_threads()
            args = ("torch.profiler", "minimal", torch.__version__, "cpu")
            cal, note = calibration.find_for_threads(*args, n + 1)
            assert cal["delta_ns"]["median"] == 7.0 and note is None
            cal, note = calibration.find_for_threads(*args, n)
            assert cal["delta_ns"]["median"] == 7.0 and note.startswith(f"the stored calibration was made with {n + 1}")
        p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,  # noqa: B023
                                            schedule=torch.profiler.schedule(**sched)), 16, make_body(spin_ns=20_000))
        got[case] = (p.report.get("delta_ns"), all_words(p.report["notes"]), all_words((p.final or {}).get("notes", [])))
    delta, notes, final_notes = got["other threads"]
    assert delta == 7.0
    said = [n for n in notes if "intra-op thread(s), this run has" in n]
    assert len(said) == 1 and said[0].startswith(f"the stored calibration was made with {torch.get_num_threads() + 1}")
    assert any("intra-op thread(s), this run has" in n for n in final_notes)
    delta, notes, final_notes = got["none"]
    assert delta == 0.0
    assert any(n.startswith("no stored calibration of this configuration: delta") and "`opskew calibrate --config minimal`" in n
               for n in notes)
    assert not any("intra-op thread(s)" in n for n in notes)


def test_delta_s_spread_in_the_stored_calibration_widens_the_leaves_intervals(tmp_path, monkeypatch):
    """The stored calibration's delta range (its panel's operators) reaches
    the report's verdict: a leaf's interval runs from delta at the range's
    high end to delta at its low end; the median keeps the panel's mean."""
    from opskew.calibration import store as calibration

    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path / "cache"))
    key = calibration.make_key("torch.profiler", "minimal", torch.__version__, "cpu", torch.get_num_threads())
    calibration.store({"schema": calibration.SCHEMA, "key": key, "date": "2026-01-01",
                       "w_ns": {"median": 300.0, "ci95": [250.0, 350.0]},
                       "delta_ns": {"median": 20.0, "range": [5.0, 120.0]}})
    p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,
                                        schedule=torch.profiler.schedule(wait=8, warmup=1, active=7, repeat=1)),
                 16, make_body(spin_ns=20_000))
    r = p.report
    assert r["delta_ns"] == 20.0
    add = next(o for o in r["operators"]["ops"] if o["name"] == "aten::add")
    c, calls = add["corrected_total_ns"], add["calls"]
    # (each correction writes for float64 readers: a leaf may lose 1 to 3 ns; docs/outputs.md)
    assert c["ci95"][0] == pytest.approx(c["median"] - 100.0 * calls, abs=3.0 * calls)
    assert c["ci95"][1] == pytest.approx(c["median"] + 15.0 * calls, abs=3.0 * calls)

def test_export_after_the_loop_gets_the_trace_and_its_corrected_one(tmp_path):
    """Without an exporting on_trace_ready, opskew exports the trace itself
    (Kineto saves it once); the user's export afterwards still works, and
    gets the corrected trace beside it."""
    p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,
                                        schedule=torch.profiler.schedule(wait=8, warmup=1, active=7)),
                 17, make_body(20_000))
    raw = str(tmp_path / "after.json")
    p.export_chrome_trace(raw)
    assert op_counts(raw)["aten::add"] == 7 * OPS
    assert p.report["corrected_trace"] == str(tmp_path / "after.corrected.json")
    meta = tracefile.scan(p.report["corrected_trace"], header_only=True)["objects"]["opskew"]
    assert p.report["w_ns"]["median"] > 0
    assert meta["corrected"]["w_ns"] == pytest.approx(p.report["w_ns"]["median"])
    assert p.report["pairs"] == 6 and p.report["unpaired_active_steps"] == 0


def test_with_stack_measures_w_py_in_process_or_takes_a_stored_one(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path / "cache"))
    sched = dict(wait=8, warmup=1, active=7)

    def run(tag, **kw):
        h = exporter(str(tmp_path), suffix=f".{tag}.json")
        return run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU],  # noqa: B023
                                               with_stack=True, on_trace_ready=h, report_file=None,  # noqa: B023
                                               schedule=torch.profiler.schedule(**sched), **kw),  # noqa: B023
                        17, make_body(20_000))

    # By default W_py is measured once, in this process, at the first trace.
    for attempt in range(NOISE_ATTEMPTS):  # a burst of noise leaves it unmeasured (and says so)
        r = run(f"measured{attempt}").report
        if r["w_py_ns"] is not None:
            break
    assert r["events"]["py_events"] > 0  # the Python tracer's events, counted in C
    wp = r["w_py_ns"]
    assert wp["source"].startswith("measured in this process") and r["w_py_measure_ns"] > 0
    assert wp["ci95"][0] <= wp["median"] <= wp["ci95"][1] and wp["median"] > 0
    assert 0 <= wp["delta_py_ns"] <= wp["median"] and "taken out of each active step" in r["w_py_note"]
    meta = tracefile.scan(r["corrected_trace"], header_only=True)["objects"]["opskew"]
    assert meta["corrected"]["w_py_ns"] == pytest.approx(wp["median"])
    # The interpreter's slowdown under the profile function, measured with
    # it (opskew.bytecode), is in the report and its trace's metadata; where it
    # applies, exactly the names whose self time runs Python code carry it.
    bc = r["bytecode"]
    assert bc["factor"]["median"] > 0 and bc["python"] and meta["run"]["bytecode"] == bc
    ops = r["operators"]["ops"]
    runs_py = {o["name"] for o in ops if o["python"] or o["category"] == "user_annotation"}
    assert any(o["category"] == "cpu_op" for o in ops) and runs_py
    widened = {o["name"] for o in ops if "bytecode_factor" in o}
    assert widened == (runs_py if bc["applies"] else set())
    assert r["operators"]["bytecode_rows"] == len(widened)
    for o in ops:
        if "bytecode_factor" in o and o["corrected_self_ns"]["median"] > 0:
            c = o["corrected_self_ns"]
            assert c["ci95"][0] < c["median"]
    assert not any("slowdown under with_stack" in n for n in all_words(r["notes"]))
    # Where the slowdown cannot be measured (another profile function was
    # set then), nothing is widened, and the report says so.
    from opskew.measure import bytecode

    monkeypatch.setattr(bytecode, "measured", lambda: None)
    r = run("unmeasured").report
    assert r["bytecode"] is None and not any("bytecode_factor" in o for o in r["operators"]["ops"])
    assert any("slowdown under with_stack's profile function was not measured" in n for n in all_words(r["notes"]))
    monkeypatch.undo()
    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path / "cache"))
    # Not measured, none stored: said, and W carries the Python events' cost.
    r = run("none", measure_w_py=False).report
    assert r["w_py_ns"] is None and "(measure_w_py=False) and none is stored" in r["w_py_note"]
    assert r["bytecode"] is None and not any("bytecode_factor" in o for o in r["operators"]["ops"])
    store_calibration("with_stack", (3000.0, [2500.0, 3500.0]), (100.0, [80.0, 120.0]),
                      w_py_ns={"median": 500.0, "ci95": [400.0, 600.0]},
                      delta_py_ns={"median": 50.0, "ci95": [40.0, 60.0]})
    r = run("stored", measure_w_py=False).report
    assert {k: r["w_py_ns"][k] for k in ("median", "ci95", "delta_py_ns")} == \
        {"median": 500.0, "ci95": [400.0, 600.0], "delta_py_ns": 50.0}
    assert r["w_py_ns"]["source"].startswith("stored calibration")
    assert "taken out of each active step" in r["w_py_note"]
    assert r["w_source"] == "in-run"  # W itself is still this run's
    meta = tracefile.scan(r["corrected_trace"], header_only=True)["objects"]["opskew"]
    assert meta["corrected"]["w_py_ns"] == 500.0 and meta["corrected"]["delta_py_ns"] == 50.0


def test_tensorboard_trace_handler_gets_its_corrected_trace_beside_it(tmp_path):
    """torch's own handler exports through the profiler it is given (opskew's
    wrapper): the corrected trace lands in the folder corrected/ beside each
    of its files, as the worker WORKER.corrected, gzipped like them
    (tracefile.corrected_path; test_viewers checks the name against
    TensorBoard's plugin)."""
    d = str(tmp_path / "tb")
    p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], report_file=None,
                                        schedule=torch.profiler.schedule(wait=8, warmup=1, active=7, repeat=1),
                                        on_trace_ready=torch.profiler.tensorboard_trace_handler(d, use_gzip=True)),
                 17, make_body(20_000))
    files = sorted(os.listdir(d))
    assert len(files) == 2 and "corrected" in files, files
    raw = [f for f in files if f.endswith(".pt.trace.json.gz")]
    worker, ts = raw[0][: -len(".pt.trace.json.gz")].rsplit(".", 1)
    assert os.listdir(os.path.join(d, "corrected")) == [f"{worker}.corrected.{ts}.pt.trace.json.gz"]
    assert p.report["raw_trace"] == os.path.join(d, raw[0])
    assert p.report["corrected_trace"] == os.path.join(d, "corrected", f"{worker}.corrected.{ts}.pt.trace.json.gz")
    assert op_counts(p.report["corrected_trace"])["aten::add"] == 7 * OPS


def test_opskew_failing_does_not_stop_the_training(tmp_path):
    """opskew's own analysis failing (here: corrected_dir is a file, so the
    raw trace cannot be kept) is reported per cycle; the loop runs on, and
    the user's handler still runs for every cycle."""
    blocker = tmp_path / "a-file"
    blocker.write_text("keep")
    calls = []
    out = io.StringIO()
    p = run_loop(lambda: opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                        schedule=torch.profiler.schedule(wait=3, warmup=1, active=3, repeat=2),
                                        on_trace_ready=lambda prof: calls.append(prof.step_num),
                                        corrected_dir=str(blocker), report_file=out), 20, make_body())
    assert len(calls) == 2 and len(p.reports) == 2
    assert all("error" in r and r["corrected_trace"] is None for r in p.reports)
    assert "opskew's analysis of this trace failed" in out.getvalue()
    assert blocker.read_text() == "keep"


CPU = [torch.profiler.ProfilerActivity.CPU]
SCHED = dict(wait=8, warmup=1, active=7)


def test_step_inside_a_record_function_range_still_counts_events(tmp_path):
    """prof.step() inside a record_function around each iteration: every
    ProfilerStep#N range opens in one iteration and closes in the next, and
    holds no operator. The counts were 0 a step, no step was paired, and the
    advice asked for what the schedule already had."""
    body = make_body()
    for after in (0, 1):  # with an operator after step() in the range, the ranges hold that one only
        with opskew.profile(activities=CPU, schedule=torch.profiler.schedule(**SCHED, repeat=1),
                            report_file=None) as p:
            for _ in range(17):
                with torch.profiler.record_function("iter"):
                    body()
                    p.step()
                    for _ in range(after):
                        torch.mul(torch.ones(2), 2)
        r = p.reports[0]
        assert r["pairs"] == 6 and r["events"]["per_step"] is False, r
        assert any("straddle" in n for n in all_words(r["notes"])), all_words(r["notes"])
        assert all(p._events[s["step"]][0] >= OPS for s in p.steps if s.get("cycle") == 1)


def test_a_single_active_step_is_never_paired():
    """active=1: each cycle's only active step is its cold first one. Paired,
    it gave W 3x the warm one with a tight interval; now it says so and asks
    for active >= 2."""
    body = make_body()
    p = run_loop(lambda: opskew.profile(activities=CPU, report_file=None,
                                        schedule=torch.profiler.schedule(wait=8, warmup=1, active=1, repeat=4)),
                 40, body)
    r = p.report
    assert r["pairs"] == 0 and r["single_active_cycles"] == 4
    assert "single active step" in r["advice"] and ADVICE in r["advice"] \
        and any("single active step" in n for n in all_words(r["notes"]))
    # active=2: one pair a cycle, and no cycle counted as single; the one
    # position paired gets its own W.
    p = run_loop(lambda: opskew.profile(activities=CPU, report_file=None,
                                        schedule=torch.profiler.schedule(wait=8, warmup=1, active=2, repeat=4)),
                 44, body)
    r = p.report
    assert r["single_active_cycles"] == 0 and r["pairs"] == 4
    assert [f["position"] for f in r["w_by_position"]] == [1] and r["w_by_position"][0]["pairs"] == 4


def test_exit_does_the_rest_of_torchs_exit(tmp_path):
    """torch's __exit__ also finishes the execution trace (its JSON file was
    left cut mid-record) and forgets the step counter."""
    import json

    from torch.profiler import ExecutionTraceObserver

    path = str(tmp_path / "et.json")
    et = ExecutionTraceObserver().register_callback(path)
    run_loop(lambda: opskew.profile(activities=CPU, report_file=None, execution_trace_observer=et,
                                    schedule=torch.profiler.schedule(wait=1, warmup=1, active=2)), 6, make_body())
    assert isinstance(json.load(open(path)), dict)
    from torch.autograd.profiler import KinetoStepTracker

    assert "ProfilerStep" not in KinetoStepTracker._step_dict


def test_a_handler_that_raises_keeps_its_cycles_steps(tmp_path):
    """on_trace_ready raising propagates, as with torch; a loop that catches
    it and goes on must not hand that cycle's active steps to the next."""
    calls = []

    def handler(prof):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("upload failed")

    body = make_body()
    p = opskew.profile(activities=CPU, report_file=None, on_trace_ready=handler, corrected_dir=str(tmp_path),
                       schedule=torch.profiler.schedule(**SCHED, repeat=2))
    with p:
        for _ in range(34):
            body()
            try:
                p.step()
            except RuntimeError:
                pass
    assert "upload failed" in p.reports[0]["error"] and p.reports[1].get("error") is None
    tags = [s.get("cycle") for s in p.steps if s["phase"] == "active" and not s.get("partial")]
    assert tags == [1] * 7 + [2] * 7, tags


def test_report_file_threshold_and_a_failing_stream(tmp_path):
    with pytest.raises(TypeError, match="open the file first"):
        opskew.profile(activities=CPU, report_file=str(tmp_path / "r.txt"))
    for bad in ("0.05", float("nan"), -0.1, True):
        with pytest.raises(ValueError, match="threshold"):
            opskew.profile(activities=CPU, threshold=bad)

    class Broken(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    # A stream that fails stops the printing, never the training.
    p = run_loop(lambda: opskew.profile(activities=CPU, report_file=Broken(),
                                        schedule=torch.profiler.schedule(**SCHED, repeat=2)), 34, make_body())
    assert len(p.reports) == 2 and "BrokenPipeError" in p.print_error


def test_verdict_words_say_inconclusive_not_unskewed():
    from opskew.render.verdict import skew_words

    v = {"skewed": False, "significant": False, "enough_pairs": True}
    assert skew_words(v) == "no significant skew detected"
    assert skew_words({**v, "significant": True}) == "significant but below threshold"
    assert skew_words(v, enough=False) == "not made"
    assert skew_words({**v, "skewed": True, "significant": True}) == "SKEWED"


def test_one_export_name_for_every_cycle_and_two_profilers_in_one_folder(tmp_path):
    """A handler exporting every cycle to one name: the earlier cycle's
    report no longer names that file, and stop() does not correct it again
    as the earlier cycle's. Two profilers with one corrected_dir (train, then
    eval) keep each other's traces."""
    same = str(tmp_path / "trace.json")
    p = run_loop(lambda: opskew.profile(activities=CPU, report_file=None,
                                        on_trace_ready=lambda prof: prof.export_chrome_trace(same),
                                        schedule=torch.profiler.schedule(**SCHED, repeat=2)), 34, make_body())
    first, last = p.reports
    assert first["raw_trace"] is None and first["overwritten_by_cycle"] == 2 and last["raw_trace"] == same
    d = str(tmp_path / "out")
    for _ in range(2):
        run_loop(lambda: opskew.profile(activities=CPU, report_file=None, corrected_dir=d,  # noqa: B023
                                        schedule=torch.profiler.schedule(**SCHED, repeat=1)), 17, make_body())
    raw = sorted(f for f in os.listdir(d) if f.endswith(".pt.trace.json"))
    assert len(raw) == 2 and len(set(raw)) == 2, raw
    assert len(os.listdir(os.path.join(d, "corrected"))) == 2


def test_a_handler_that_removes_its_export_is_named(tmp_path):
    def handler(prof):
        path = str(tmp_path / "t.json")
        prof.export_chrome_trace(path)
        os.unlink(path)  # uploaded, then removed

    p = run_loop(lambda: opskew.profile(activities=CPU, report_file=None, on_trace_ready=handler,
                                        schedule=torch.profiler.schedule(**SCHED, repeat=1)), 17, make_body())
    assert "no longer there" in p.reports[0]["error"]


def test_export_after_the_cycle_to_a_gz_name(tmp_path):
    """After the cycle, export_chrome_trace copies opskew's own export through
    the one writer: a .gz name is gzip, the raw and the corrected one."""
    p = run_loop(lambda: opskew.profile(activities=CPU, report_file=None,
                                        schedule=torch.profiler.schedule(**SCHED, repeat=1)), 17, make_body())
    path = str(tmp_path / "t.json.gz")
    p.export_chrome_trace(path)
    for f in (path, str(tmp_path / "t.corrected.json.gz")):
        assert open(f, "rb").read(2) == b"\x1f\x8b", f
    assert op_counts(path)["aten::add"] == 7 * OPS  # 7 active steps of OPS additions


def test_a_step_counts_the_events_it_waited_for(tmp_path):
    """On CUDA the backward runs on the autograd engine's device thread while
    the step's thread waits: the step's events are its range's descendants
    plus those (the C correction's cross-thread rule), not a fallback to the
    trace's totals. Hand-made trace of that shape; opskew.profile asks for the
    rule with CUDA activity (1) and leaves it to the trace otherwise (-1)."""
    import json
    import types

    from opskew.profiler.core import profile

    ev = [{"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "pid": 1,
           "tid": 2, "ts": 10 + 10 * i, "dur": 5} for i in range(5)]
    for n in (1, 2):
        base = (n - 1) * 100
        ev += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                "ts": base, "dur": 90},
               {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": base + 1, "dur": 3}]
    ev += [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 2, "ts": 150, "dur": 2},
           {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 3}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    for waits in (1, -1):
        counts = profile._count(types.SimpleNamespace(_waits=waits), str(path))
        assert counts["per_step"] == {1: (6, 0), 2: (2, 0)}, waits
        assert counts["op_events"] == 10
    # Without the rule, a step would hold only its own thread's events.
    off = profile._count(types.SimpleNamespace(_waits=0), str(path))
    assert off["per_step"] == {1: (1, 0), 2: (1, 0)}


def test_the_cold_first_step_and_the_others_by_position_are_priced_only_where_it_is_a_cost_per_event():
    """opskew.profiling._spans: the cold first active step's extra is spread
    over its events as a scale on W from COLD_STEP_MIN_CYCLES cycles on, where W's
    CI lies above 0 and the scale stays within COLD_MAX_SCALE; otherwise it
    stays in the step and `why` says so (docs/profile.md)."""
    from opskew.profiler.pricing import step_spans
    from opskew.stats.costmodel import CostModel

    def _spans(rep, w, wpy, est):
        return step_spans(rep, CostModel.default(w, 0.0, wpy), est)
    from opskew.stats.pricing import COLD_MAX_SCALE, COLD_MIN_CYCLES, COLD_STEP_MIN_CYCLES

    def rep():
        return {"step_spans_ns": {"ProfilerStep#9": 5000.0, "ProfilerStep#10": 4000.0},
                "cold_step": {"name": "ProfilerStep#9", "op_events": 10, "py_events": 20}}

    w, wpy = {"median": 100.0, "ci95": [80.0, 120.0]}, {"median": 10.0}
    r = rep()  # 10 x 100 + 20 x 10 = 1200 ns of instrument: an extra of 1800 ns is a scale of 2.5
    spans = _spans(r, w, wpy, {"cold_first_active_extra_ns": 1800.0,
                               "cold_first_active_cycles": COLD_STEP_MIN_CYCLES})
    assert spans == {"ProfilerStep#9": (5000.0, pytest.approx(2.5)), "ProfilerStep#10": 4000.0}
    assert r["cold_step"]["w_scale"] == pytest.approx(2.5) and "2.50 x W" in priced(r["cold_step"]["why"])
    for est, wv, said in (
            ({"cold_first_active_extra_ns": 1800.0, "cold_first_active_cycles": COLD_STEP_MIN_CYCLES - 1}, w,
             f"it takes {COLD_STEP_MIN_CYCLES}"),
            ({"cold_first_active_extra_ns": -50.0, "cold_first_active_cycles": 5}, w, "no slower"),
            ({"cold_first_active_extra_ns": 1800.0, "cold_first_active_cycles": 5},
             {"median": 100.0, "ci95": [-20.0, 220.0]}, "CI reaches 0"),
            ({"cold_first_active_extra_ns": 1200.0 * COLD_MAX_SCALE, "cold_first_active_cycles": 5}, w, "a lump")):
        r = rep()
        assert _spans(r, wv, wpy, est) == r["step_spans_ns"]  # the bodies still, no scale
        assert r["cold_step"]["w_scale"] == 1.0 and said in priced(r["cold_step"]["why"]), r["cold_step"]
    # The other active steps: each at the W of the run's pairs at its
    # position in the cycle, over W, under the same guards; each keeps its
    # own answer.
    def with_positions():
        r = rep()
        r["step_spans_ns"].update({"ProfilerStep#11": 3000.0, "ProfilerStep#12": 3000.0})
        r["position_steps"] = [{"name": f"ProfilerStep#{9 + k}", "position": k, "op_events": 10, "py_events": 20}
                               for k in (1, 2, 3)]
        return r

    est = {"cold_first_active_extra_ns": 1800.0, "cold_first_active_cycles": 5,
           "w_by_position": [{"position": 1, "w_ns": 150.0, "pairs": 5}, {"position": 2, "w_ns": 80.0, "pairs": 5},
                             {"position": 3, "w_ns": 90.0, "pairs": COLD_MIN_CYCLES - 1}]}
    r = with_positions()
    spans = _spans(r, w, wpy, est)
    # Its operator events at the position's W, its Python events at W_py:
    # (150 x 10 + 10 x 20) / (100 x 10 + 10 x 20), and (80 x 10 + 200) / 1200.
    assert spans == {"ProfilerStep#9": (5000.0, pytest.approx(2.5)),
                     "ProfilerStep#10": (4000.0, pytest.approx(1700 / 1200)),
                     "ProfilerStep#11": (3000.0, pytest.approx(1000 / 1200)), "ProfilerStep#12": 3000.0}
    assert "1.42 x W" in priced(r["position_steps"][0]["why"]) and "it takes" in priced(r["position_steps"][2]["why"])
    for figs, wv, said in (([{"position": 1, "w_ns": -5.0, "pairs": 5}], w, "0 or less"),
                           ([{"position": 1, "w_ns": 100.0 * (COLD_MAX_SCALE + 1), "pairs": 5}], w, "past"),
                           ([{"position": 1, "w_ns": 150.0, "pairs": 5}], {"median": 100.0, "ci95": [-20.0, 220.0]},
                            "CI reaches 0")):
        r = with_positions()
        spans = _spans(r, wv, wpy, dict(est, w_by_position=figs))
        assert spans["ProfilerStep#10"] == 4000.0 and said in priced(r["position_steps"][0]["why"]), r["position_steps"]
    # Without ranges holding the steps: nothing to give.
    assert _spans({"step_spans_ns": None, "cold_step": None}, w, wpy, {}) is None


def test_a_cycle_whose_pairs_all_lie_on_one_side_is_priced_at_its_own_level():
    """opskew.profiling._cycle_factors and _spans: a cycle's pairs over the
    W their position is priced at; where the sign test's 95% interval for
    their median leaves out 1 (6 pairs or more, every one on the same
    side), its steps' operator events pay that factor too, and its cold
    first step's (on top of the extra); 5 pairs never reach 95%."""
    from opskew.analyze.job import job_spans
    from opskew.profiler.pricing import step_spans
    from opskew.stats.costmodel import CostModel

    def _spans(rep, w, wpy, est):
        return step_spans(rep, CostModel.default(w, 0.0, wpy), est)
    from opskew.stats.pricing import COLD_MIN_CYCLES, COLD_STEP_MIN_CYCLES, cycle_factors as _cycle_factors

    by_pos = [{"position": k, "w_ns": w, "pairs": 5} for k, w in ((1, 200.0), (2, 100.0))] + \
             [{"position": 3, "w_ns": 90.0, "pairs": COLD_MIN_CYCLES - 1}]  # too few: its pairs go against W
    slow = [(9, 1, 300.0), (9, 2, 150.0), (9, 3, 120.0), (9, 1, 260.0), (9, 2, 130.0), (9, 3, 200.0)]
    mixed = [(40, 1, 260.0), (40, 2, 80.0), (40, 3, 100.0), (40, 1, 190.0), (40, 2, 120.0), (40, 3, 90.0)]
    five = [(70, k, 2 * w) for k, w in ((1, 200.0), (2, 100.0), (1, 200.0), (2, 100.0), (1, 200.0))]
    got = {c["first_step"]: c for c in _cycle_factors(slow + mixed + five, by_pos, 100.0)}
    # Ratios 1.5, 1.5, 1.2, 1.3, 1.3, 2.0 (position 3 against W = 100): median 1.4.
    assert got[9]["differs"] and got[9]["factor"] == pytest.approx(1.4) and got[9]["pairs"] == 6
    assert got[9]["ci95"][0] > 1
    assert not got[40]["differs"] and not got[70]["differs"] and got[70]["ci95"] is None  # 2.0 five times
    assert _cycle_factors(slow, by_pos, 0.0) == [] and _cycle_factors(slow, by_pos, None) == []

    w, wpy = {"median": 100.0, "ci95": [80.0, 120.0]}, {"median": 10.0}
    est = {"cold_first_active_extra_ns": 1800.0, "cold_first_active_cycles": 5, "w_by_position": by_pos,
           "w_by_cycle": list(got.values())}

    def rep(first):
        return {"step_spans_ns": {f"ProfilerStep#{first + k}": 3000.0 for k in range(4)},
                "cold_step": {"name": f"ProfilerStep#{first}", "op_events": 10, "py_events": 20,
                              "cycle_first_step": first},
                "position_steps": [{"name": f"ProfilerStep#{first + k}", "position": k, "op_events": 10,
                                    "py_events": 20, "cycle_first_step": first} for k in (1, 2, 3)]}

    r = rep(9)
    spans = _spans(r, w, wpy, est)
    # The cold step: (1.4 x 100 x 10 + 10 x 20 + 1800) / 1200; the others
    # (w_k x 1.4 x 10 + 200) / 1200, position 3 at W x 1.4.
    assert spans == {"ProfilerStep#9": (3000.0, pytest.approx(3400 / 1200)),
                     "ProfilerStep#10": (3000.0, pytest.approx(3000 / 1200)),
                     "ProfilerStep#11": (3000.0, pytest.approx(1600 / 1200)),
                     "ProfilerStep#12": (3000.0, pytest.approx(1600 / 1200))}
    assert all(st["cycle_factor"] == pytest.approx(1.4) and "own level" in priced(st["why"]) for st in r["position_steps"])
    assert r["cold_step"]["extra_priced"] and "own level" in priced(r["cold_step"]["why"])
    # A cycle at the run's level: by position alone, the cold step at its extra.
    r = rep(40)
    spans = _spans(r, w, wpy, est)
    assert spans["ProfilerStep#40"] == (3000.0, pytest.approx(3000 / 1200))
    assert spans["ProfilerStep#41"] == (3000.0, pytest.approx(2200 / 1200)) and spans["ProfilerStep#43"] == 3000.0
    assert all(st["cycle_factor"] == 1.0 for st in r["position_steps"])
    # The extra too few cycles measured: the cold step pays its level only.
    r = rep(9)
    spans = _spans(r, w, wpy, dict(est, cold_first_active_cycles=COLD_STEP_MIN_CYCLES - 1))
    assert spans["ProfilerStep#9"] == (3000.0, pytest.approx(1600 / 1200)) and not r["cold_step"]["extra_priced"]
    # A multi-rank job's correction at another W keeps both parts, as priced.
    r = rep(9)
    _spans(r, w, wpy, est)
    js = job_spans(r, CostModel.default(200.0, 0.0, 10.0))  # (1.4 x 200 x 10 + 200 + 1800) / 2200
    assert js["ProfilerStep#9"] == (3000.0, pytest.approx(4800 / 2200))
    assert js["ProfilerStep#10"] == (3000.0, pytest.approx(3000 / 1200))  # the same ratio to W
    r = rep(9)
    _spans(r, w, wpy, dict(est, cold_first_active_cycles=COLD_STEP_MIN_CYCLES - 1))
    assert job_spans(r, CostModel.default(200.0, 0.0, 10.0))["ProfilerStep#9"] == (3000.0, pytest.approx(3000 / 2200))


def spin_op(extra_ns, base_ns):
    """opskew_test::spin(x) -> x, a leaf operator (its kernel calls no other
    operator) that busy-waits base_ns, and extra_ns more while the profiler
    records: a known cost inside its own events, which opskew's tracer on
    the wait steps does not see."""
    from opskew import _engine

    if not hasattr(torch.ops.opskew_test, "spin"):
        lib = torch.library.Library("opskew_test", "DEF")
        lib.define("spin(Tensor(a) x) -> Tensor(a)")
        spin_op.lib = lib  # kept alive: the registration goes with it
        spin_op.extra = [0, 0]

        def kernel(x):
            e, b = spin_op.extra
            _engine.spin_ns(b + (e if torch.autograd._profiler_enabled() else 0))
            return x

        lib.impl("spin", kernel, "CPU")
    spin_op.extra[:] = [extra_ns, base_ns]
    return torch.ops.opskew_test.spin


def spin_run(tmp_path, extra_ns, base_ns, good):
    """A loop of opskew_test::spin (spin_op) and aten::add under
    opskew.profile with the leaf reference on (wait REF_WAIT, 3 cycles of 3
    active steps), run again (NOISE_ATTEMPTS) until good(spin's op_deltas
    entry, the report) holds: (the profile, its last report, that entry,
    the cycle)."""
    import opskew.profiler as profiling

    spin = spin_op(extra_ns, base_ns)
    x = torch.ones(4)

    def body():
        for _ in range(6):
            spin(x)
            torch.add(x, x)

    wait, active, repeat = profiling.REF_WAIT, 3, 3
    cycle = wait + 1 + active
    for attempt in range(NOISE_ATTEMPTS):
        p = run_loop(lambda: opskew.profile(schedule=torch.profiler.schedule(  # noqa: B023
            wait=wait, warmup=1, active=active, repeat=repeat), report_file=None, corrected_dir=str(tmp_path)),
            repeat * cycle + wait, body)
        r = p.reports[-1]
        own = (r.get("op_deltas_ns") or {}).get("opskew_test::spin") or {}
        if own and good(own, r):
            break
    spin_op(0, 0)
    return p, r, own, cycle


def test_each_leaf_s_own_delta_recovers_a_cost_inside_its_events(tmp_path):
    """Known answer for the leaf reference: a leaf that runs EXTRA ns longer
    only while the profiler records gets an own delta within 10% of EXTRA
    (W, the mean over every event, is far below it), its corrected time is
    its time under opskew's tracer, and the other leaves keep tens to
    hundreds of ns. opskew's tracer runs on the wait steps at positions
    REF_FIRST - 1 to REF_FIRST + REF_STEPS - 1 of each wait block after the
    first (0-based), one session each, and none of them is paired."""
    import opskew.profiler as profiling

    extra, base = 40_000, 3_000
    p, r, own, cycle = spin_run(tmp_path, extra, base, lambda own, _: abs(own["median"] - extra) <= 0.1 * extra)
    wait, active, repeat = profiling.REF_WAIT, 3, 3
    ld = r["leaf_delta"]
    # Tracer steps of the blocks after cycles 1, 2 and 3: 4 each.
    assert ld["tracer_steps"] == 3 * profiling.REF_STEPS and ld["names"] >= 2
    assert abs(own["median"] - extra) <= 0.1 * extra, f"injected {extra} ns, own delta {own['median']:.0f} ns"
    assert own["ci95"][0] <= own["median"] <= own["ci95"][1] and own["tracer_steps"] == ld["tracer_steps"]
    assert r["w_ns"]["median"] < 0.75 * own["median"] and "opskew_test::spin" in ld["above_w"]
    row = {o["name"]: o for o in r["operators"]["ops"]}["opskew_test::spin"]
    per_call = row["corrected_total_ns"]["median"] / row["calls"]
    # (each call's ts and dur written to the whole ns: up to 1 ns a call)
    assert per_call == pytest.approx(row["reported_total_ns"] / row["calls"] - own["median"], abs=1.0)
    assert base * 0.9 <= per_call <= base + 0.5 * extra  # the kernel's call from Python costs some us too
    assert row["delta_ns"]["median"] == pytest.approx(own["median"])
    add = r["op_deltas_ns"]["aten::add"]
    assert 0 <= add["median"] < 5_000
    # The tracer's steps: 0-based positions REF_FIRST - 1 .. REF_FIRST +
    # REF_STEPS - 1 after each trace, none before the first.
    first = profiling.REF_FIRST - 1
    want = [c * cycle + wait + 1 + active + k for c in range(repeat)
            for k in range(first, first + profiling.REF_STEPS + 1)]
    ref = [s["step"] for s in p.steps if s.get("ref")]
    assert ref == [s for s in want if s < repeat * cycle + wait]
    assert all(s["phase"] == "wait" for s in p.steps if s.get("ref"))
    assert p._pair_steps and not {b for _, b in p._pair_steps} & set(ref)
    # The corrected trace carries them.
    import json

    with open(r["corrected_trace"]) as f:
        meta = json.load(f)["opskew"]["run"]
    assert meta["op_deltas_ns"]["opskew_test::spin"]["median"] == pytest.approx(own["median"])
    assert "leaf delta: own for" in profiling.render(r)
    # No calibration is stored here: the note on delta 0 holds for the other operators only.
    said = [n for n in all_words(r["notes"]) if n.startswith("no stored calibration of this configuration")]
    assert said and all("but the leaves" in n and "every operator's corrected time" not in n for n in said)


def test_a_leaf_faster_in_the_trace_than_under_the_tracer_is_said_and_its_interval_reaches_the_tracer(tmp_path):
    """Known answer, the other way: a leaf that runs LESS ns shorter only
    while the profiler records (no instrument does that; a state of the
    profiled steps can) keeps its reported time (own delta 0), its row says
    by how much the trace fell below the tracer (within 10% of LESS), its
    interval's high end reaches the tracer's time, and it is unknowable."""
    import opskew.profiler as profiling

    less, base = 20_000, 30_000
    p, r, own, _ = spin_run(tmp_path, -less, base,
                            lambda own, r: abs((own.get("below_ns") or {}).get("median", 0.0) - less) <= 0.1 * less
                            and r["leaf_delta"].get("below_tracer") == ["opskew_test::spin"])
    assert own["median"] == 0.0 and abs(own["below_ns"]["median"] - less) <= 0.1 * less, own
    assert own["below_ns"]["ci95"][0] > 0 and own["below_ns"]["tracer_ns"] >= base * 0.9
    assert r["leaf_delta"]["below_tracer"] == ["opskew_test::spin"]
    row = {o["name"]: o for o in r["operators"]["ops"]}["opskew_test::spin"]
    calls = row["calls"]
    assert row["corrected_total_ns"]["median"] == pytest.approx(own["reported_ns"] * calls, rel=1e-6)
    assert row["corrected_total_ns"]["ci95"][1] >= calls * (base * 0.9)  # reaches the tracer's time
    assert row["mark"] == "unknowable" and row["below_tracer_ns"]["median"] == own["below_ns"]["median"]
    assert "faster in the trace than under opskew's tracer" in profiling.render(r)


def test_without_the_leaf_reference_every_operator_keeps_one_delta(tmp_path):
    """leaf_reference=False, or a wait below REF_WAIT: opskew's tracer
    never runs, every operator keeps the stored (here: no) delta, and the
    report says why."""
    import opskew.profiler as profiling

    body = make_body()
    for kw, wait, why in (({"leaf_reference": False}, profiling.REF_WAIT, "off: leaf_reference=False"),
                          ({}, profiling.REF_WAIT - 1, f"where the wait is at least {profiling.REF_WAIT}")):
        p = run_loop(lambda: opskew.profile(schedule=torch.profiler.schedule(  # noqa: B023
            wait=wait, warmup=1, active=3, repeat=3), report_file=None, **kw), 3 * (wait + 4) + wait, body)  # noqa: B023
        assert not any(s.get("ref") for s in p.steps)
        r = p.reports[-1]
        assert r["op_deltas_ns"] is None and why in r["leaf_delta"]["why"], r["leaf_delta"]
        assert why in profiling.render(r)
        assert all("delta_ns" not in o for o in r["operators"]["ops"])


def test_a_tracer_that_cannot_start_turns_the_leaf_reference_off_and_says_why(tmp_path):
    """opskew's tracer sessions do not nest: inside the user's own
    opskew.trace() block, the leaf reference is off for the run, the loop
    goes on, and the report names the reason."""
    import opskew.profiler as profiling

    body = make_body()
    wait = profiling.REF_WAIT
    with opskew.trace(instrument="native") as t:
        p = run_loop(lambda: opskew.profile(schedule=torch.profiler.schedule(
            wait=wait, warmup=1, active=3, repeat=3), report_file=None), 3 * (wait + 4) + wait, body)
    r = p.reports[-1]
    assert not any(s.get("ref") for s in p.steps) and r["op_deltas_ns"] is None
    assert "could not start" in r["leaf_delta"]["why"] and "do not nest" in r["leaf_delta"]["why"]
    assert r["verdict"]["enough_pairs"] and t.n_events > 0
