"""The captures people make without opskew's schedule (docs/profile.md, "W
with no pairs: the in-process model"): torch's recipe (a `with` block
around a few steps), start()/stop() with unprofiled steps between, and
Lightning's default schedule. With an empty cache each gets W from the
in-process model, a corrected trace, the source named and an interval.
Real torch, real profiler sessions; behaviour, not speed."""

from __future__ import annotations

import io
import os

import pytest

torch = pytest.importorskip("torch")

import opskew  # noqa: E402
from conftest import NOISE_ATTEMPTS  # noqa: E402
from opskew.analyze import tracefile  # noqa: E402
from opskew.profiler import model as cost_model  # noqa: E402

CPU = [torch.profiler.ProfilerActivity.CPU] if hasattr(torch, "profiler") else None


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty calibration cache, and no model measured yet in this process."""
    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(cost_model, "_MODELS", {})
    return tmp_path


def _train():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(4, 16)

    def step():
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
    for _ in range(5):
        step()
    return step


def _usable(make):
    """Runs `make()` (a capture, returning its profiler) until the model
    was not rejected as too noisy (a busy machine; conftest.until's
    retries): the last profiler."""
    for _ in range(NOISE_ATTEMPTS):
        p = make()
        if p.report.get("w_source") == "in-process model":
            return p
    return p


def _start_stop(fresh, name, step, wanted):
    """One profiler, start() ... stop() three times around 6 calls of
    `step`, 10 unprofiled ones between, no step() calls; made again (a
    busy machine; conftest's retries) until every later capture's W came
    from a source in `wanted`: the last profiler."""
    for _ in range(NOISE_ATTEMPTS):
        prof = opskew.profile(activities=CPU, corrected_dir=str(fresh / f"{name}{len(os.listdir(fresh))}"),
                              report_file=None)
        for _ in range(3):
            prof.start()
            for _ in range(6):
                step()
            prof.stop()
            for _ in range(10):
                step()
        if all(r["w_source"] in wanted for r in prof.reports[1:]):
            break
    return prof


def _header(path):
    return tracefile.scan(path, header_only=True)["objects"]["opskew"]


def _nesting(path):
    """Each complete event of a trace as (thread, name, its parent's name),
    sorted: the trace's nesting, whatever the order of its records."""
    import json
    from decimal import Decimal

    with open(path) as f:
        doc = json.load(f, parse_float=Decimal)
    out = []
    threads = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            threads.setdefault((str(e.get("pid")), str(e.get("tid"))), []).append(e)
    for key, evs in threads.items():
        stack = []
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            while stack and not e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            out.append((key, str(e.get("name")), str(stack[-1].get("name")) if stack else ""))
            stack.append(e)
    return sorted(out)


def test_torchs_recipe_with_an_empty_cache_is_corrected_by_the_model(fresh):
    """`with opskew.profile(activities=[CPU], record_shapes=True)` around 8
    steps, each in a record_function, no schedule, nothing stored: W from
    the in-process model (measured once, within its first budget), with
    its interval widened by the model's miss, a corrected trace that holds
    the raw trace's events in the raw trace's order, and the source in the
    report, the printed text and the trace's metadata. A second capture in
    the same process checks the model rather than measuring it again."""
    step = _train()

    def capture(name):
        def make():
            out = io.StringIO()
            with opskew.profile(activities=CPU, record_shapes=True, corrected_dir=str(fresh / name),
                                report_file=out) as prof:
                for _ in range(8):
                    with torch.profiler.record_function("train_step"):
                        step()
            prof.printed = out.getvalue()
            return prof
        return make

    p = _usable(capture("one"))
    r = p.report
    assert r["w_source"] == "in-process model", r.get("fallback")
    m = r["w_model_ns"]
    assert m["budget"] == "first" and m["rounds"] >= cost_model.MIN_ROUNDS and m["check"] is None
    assert m["step"] == "training"  # the capture has backward events
    lo, hi = r["w_ns"]["ci95"]
    mlo, mhi = m["measured_ci95"]
    assert 0 < lo <= mlo < r["w_ns"]["median"] < mhi <= hi  # the measurement's interval, widened
    assert r["model_ns"] >= m["measured_ns"] > 0
    assert "in-process model" in r["fallback"] and "verdict is not made" in r["fallback"]
    # The true step from the optimizer's steps inside the window (profiler.traffic).
    assert "(in-process model)" in p.printed and p.printed.startswith("opskew.profile cycle 1: true step ")
    lo, hi = r["corrected_step_w_ci_ns"]
    assert lo <= r["corrected_step_ns"] <= hi < r["active_step_ns"]
    assert os.path.isfile(r["corrected_trace"])
    assert _header(r["corrected_trace"])["run"]["w_source"] == "in-process model"
    assert _nesting(r["corrected_trace"]) == _nesting(r["raw_trace"])
    assert r["operators"]["marks"]  # each operator marked by that interval
    # The same configuration again in this process: checked, not measured.
    p2 = _usable(capture("two"))
    m2 = p2.report["w_model_ns"]
    if p2.report["w_source"] == "in-process model" and m2["budget"] == "first":
        check = m2["check"]
        assert check is not None and check["budget_ns"] == pytest.approx(
            cost_model.CHECK_SHARE * (p2.report["stop_ns"] + p2.report["on_trace_ready_ns"]), rel=1e-6)
        assert check["rounds"] >= 0 and (check["rounds"] == 0 or "moved" in check)


def test_start_stop_with_unprofiled_steps_between_corrects_every_capture(fresh):
    """The serving and training shape: one profiler, start() ... stop()
    three times around 6 optimizer steps, 10 unprofiled steps between, no
    step() calls. The first capture has no bare step before it: the model's
    W. The later ones pair their steps against the bare steps between
    captures (two samples, the optimizer's steps): the run's own W, taken
    before the model's unless its interval is the wider (then beside it);
    a true step within W's band either way."""
    step = _train()

    p = _start_stop(fresh, "ss", step, ("in-run, bare steps between captures", "in-process model"))
    assert len(p.reports) == 3
    assert p.reports[0]["w_source"] in ("in-process model", "in-run")  # "in-run" and no W: the model was too noisy
    assert "two_sample" not in p.reports[0] and "w_bare_steps_ns" not in p.reports[0]  # no bare step before it
    for r in p.reports[1:]:
        m = r["w_model_ns"]
        if r["w_source"] == "in-process model":
            # The bare steps' W was there, with the wider interval: beside it.
            if "w_bare_steps_ns" in r:
                b = r["w_bare_steps_ns"]
                assert b["ci95"][1] - b["ci95"][0] > m["ci95"][1] - m["ci95"][0]
                assert "a wider interval than the model's" in r["fallback"]
            else:  # or their interval said nothing, and the fallback says so
                assert "bare steps between captures gave W" in r["fallback"] and "too noisy" in r["fallback"]
        else:
            assert r["w_source"] == "in-run, bare steps between captures", r.get("fallback")
            ts = r["two_sample"]
            assert ts["profiled_steps"] == 5 and ts["bare_steps"] >= 7 and ts["events_per_step"] > 0
            assert r["w_ns"]["ci95"][0] > 0 and "two samples" in r["w_ns"]["ci_method"]
            assert m is None or r["w_ns"]["ci95"][1] - r["w_ns"]["ci95"][0] <= m["ci95"][1] - m["ci95"][0]
        assert os.path.isfile(r["corrected_trace"])
        assert _nesting(r["corrected_trace"]) == _nesting(r["raw_trace"])
        lo, hi = r["corrected_step_w_ci_ns"]
        assert lo <= r["corrected_step_ns"] <= hi and r["corrected_step_ns"] < r["active_step_ns"]
        assert _header(r["corrected_trace"])["run"]["w_source"] == r["w_source"]


def test_the_optimizers_steps_are_bare_or_profiled_and_a_schedule_s_are_neither(fresh):
    """Traffic's bookkeeping on real optimizer steps: the first step of a
    capture and the first SETTLE after its stop() are neither; another
    optimizer stepping in the same step is not a step; the steps of a
    scheduled session are the schedule's."""
    from opskew.profiler.traffic import SETTLE

    step = _train()
    other = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    prof = opskew.profile(activities=CPU, report_file=None, cost_model="off")
    t = prof._traffic
    for _ in range(4):
        step()
        other.step()
    assert len(t.bare) == 3  # 4 steps, 3 intervals; the other optimizer's steps are not steps
    prof.start()
    for _ in range(5):
        step()
    prof.stop()
    assert t.marks[1] == 5 and len(t.profiled[1]) == 4  # the first, from start(), is not a whole step
    for _ in range(SETTLE + 3):
        step()
    assert len(t.bare) == 3 + 2  # the first after stop() and SETTLE more left out
    sched = opskew.profile(activities=CPU, report_file=None, cost_model="off",
                           schedule=torch.profiler.schedule(wait=1, warmup=1, active=2))
    sched.start()
    for _ in range(4):
        step()
        sched.step()
    sched.stop()
    assert not sched._traffic.profiled and sched._traffic.marks == {}


def _infer():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(4, 16)

    def step():
        with torch.no_grad():
            m(x)
    return m, step


def test_start_stop_inference_pairs_the_outermost_modules_forwards(fresh):
    """A serving loop: forward only, no optimizer, no step() calls; start()
    ... stop() three times around 6 requests, 10 unprofiled ones between.
    The outermost module's forward marks the steps (found by torch.nn's
    global hooks, then timed on the root alone): the later captures pair
    their forwards against the bare ones between captures, or keep them
    beside the model's W; a true forward within W's band either way."""
    import gc

    from torch.nn.modules import module as nn_module

    gc.collect()
    global_hooks = len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks)
    m, step = _infer()

    p = _start_stop(fresh, "inf", step, ("in-run, bare steps between captures",))
    t = p._traffic
    assert t.source == "forward" and t.root() is m and t.opt is None
    # The global hooks are gone once the root is found: only the root's pair
    # is left (those of the profilers made before this one went with them).
    gc.collect()
    assert (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks)) == global_hooks
    assert len(m._forward_pre_hooks) == 1 and len(m._forward_hooks) == 1
    # The first capture's first forward found the root, the second began
    # timing it (neither timed); each capture's first timed one is left out.
    assert t.marks == {1: 4, 2: 6, 3: 6} and [len(t.profiled[k]) for k in (1, 2, 3)] == [3, 5, 5]
    assert len(p.reports) == 3
    for r in p.reports[1:]:
        assert r["w_model_ns"]["step"] == "inference"
        if r["w_source"] == "in-run, bare steps between captures":
            ts = r["two_sample"]
            assert ts["steps"] == "forward" and ts["profiled_steps"] == 5 and ts["bare_steps"] >= 7
            assert "the outermost module's forward, Sequential" in r["w_ns"]["ci_method"]
        else:
            assert r["w_source"] == "in-process model", r.get("fallback")
            assert "w_bare_steps_ns" in r or "bare steps between captures gave W" in r["fallback"]
        assert os.path.isfile(r["corrected_trace"])
        assert _nesting(r["corrected_trace"]) == _nesting(r["raw_trace"])
        lo, hi = r["corrected_step_w_ci_ns"]
        assert lo <= r["corrected_step_ns"] <= hi and r["corrected_step_ns"] < r["active_step_ns"]


def test_the_root_search_keeps_a_users_error_and_ends_at_the_first_stop(fresh):
    """A forward that raises keeps its own error (two profilers' hooks
    watching it), is no root, and the search that found none ends at the
    first stop(): no global hook stays on the process's module calls."""
    import gc

    from torch.nn.modules import module as nn_module

    class Boom(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(4, 4)

        def forward(self, x):
            self.inner(x)
            raise ValueError("the user's own error")

    gc.collect()
    before = len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks)
    a = opskew.profile(activities=CPU, report_file=None, cost_model="off")
    b = opskew.profile(activities=CPU, report_file=None, cost_model="off")
    boom = Boom()
    for _ in range(3):
        with pytest.raises(ValueError, match="the user's own error"):
            boom(torch.randn(2, 4))
    assert all(x._traffic.root is None and x._traffic._fwd for x in (a, b))  # still looking
    a.start()
    a.stop()
    assert a._traffic.search_over and not b._traffic.search_over
    torch.nn.Identity()(torch.zeros(1))  # the next module call removes a's hooks
    assert a._traffic._fwd == [] and len(b._traffic._fwd) == 2
    del a, b
    gc.collect()
    assert (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks)) == before


def test_a_training_loops_forwards_give_way_to_its_optimizer(fresh):
    """Before its first optimizer step a training loop's forwards look like
    inference steps: the optimizer's first step discards them, removes the
    root's hooks, and its own steps mark the loop from then on."""
    prof = opskew.profile(activities=CPU, report_file=None, cost_model="off")
    _train()  # 5 steps: a forward (the root found), then the optimizer
    t = prof._traffic
    assert t.source == "optimizer" and t._fwd == [] and len(t.bare) == 4
    assert not t.profiled and t.marks == {}


def test_torchs_documented_schedule_with_nothing_after_it_corrects_both_traces(fresh):
    """schedule(wait=1, warmup=1, active=3, repeat=2) and the loop ends with
    it: no settled wait step and no bare step after, so no in-run W; both
    traces are corrected by the model, the second after a check of it."""
    step = _train()

    def make():
        sched = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=2)
        with opskew.profile(activities=CPU, schedule=sched, report_file=None,
                            corrected_dir=str(fresh / f"doc{len(os.listdir(fresh))}")) as prof:
            for _ in range(10):
                step()
                prof.step()
        return prof

    p = _usable(make)
    assert [r["cycle"] for r in p.reports] == [1, 2]
    for r in p.reports:
        if r["w_source"] != "in-process model":
            continue
        assert os.path.isfile(r["corrected_trace"])
        assert _nesting(r["corrected_trace"]) == _nesting(r["raw_trace"])
        assert r["w_ns"]["ci95"][0] < r["w_ns"]["median"] < r["w_ns"]["ci95"][1]
    if p.reports[0]["w_source"] == "in-process model" and p.reports[1]["w_model_ns"]:
        assert p.reports[1]["w_model_ns"]["check"] is not None  # measured once, then checked


def test_an_inference_capture_is_priced_by_the_models_inference_step(fresh):
    """Forward only under no_grad (no backward events in the trace): the
    model times its step under no_grad too, whose operators record no
    autograd node."""
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(4, 16)

    def make():
        out = io.StringIO()
        with opskew.profile(activities=CPU, corrected_dir=str(fresh / f"inf{len(os.listdir(fresh))}"),
                            report_file=out) as prof:
            for _ in range(8):
                with torch.no_grad():
                    m(x)
        prof.printed = out.getvalue()
        return prof

    p = _usable(make)
    r = p.report
    # No optimizer step and no step(): the outermost module's forward calls
    # are the steps, and the answer says so.
    first = p.printed.splitlines()[0]
    assert first.startswith("opskew.profile cycle 1: true step ") and "profiled " in first, first
    assert first.endswith("(medians; a step: the calls of the outermost module's forward, Sequential)"), first
    assert r["step_marked_by"] == "the calls of the outermost module's forward, Sequential"
    assert r["corrected_step_w_ci_ns"][0] <= r["corrected_step_ns"] < r["active_step_ns"]
    assert r["w_source"] == "in-process model", r["fallback"]
    assert r["w_model_ns"]["step"] == "inference" and "small inference step" in r["fallback"]
    assert os.path.isfile(r["corrected_trace"])


def test_cost_model_off_keeps_the_old_answer_and_a_bad_value_is_refused(fresh):
    step = _train()
    with opskew.profile(activities=CPU, cost_model="off", report_file=None) as prof:
        for _ in range(3):
            step()
    r = prof.report
    assert r["w_source"] == "in-run" and r["w_ns"] is None and r["corrected_trace"] is None
    assert "W is unknown" in r["fallback"] and r["w_model_ns"] is None and r["model_ns"] == 0
    with pytest.raises(ValueError, match="cost_model: 'auto', 'always' or 'off'"):
        opskew.profile(activities=CPU, cost_model="sometimes")


def test_a_noisy_model_is_not_used_and_the_fallback_says_why(fresh, monkeypatch):
    """A measurement whose interval is wider than MAX_SPREAD of its median
    (here: any, at 0) is refused: no W, and the fallback says the model was
    too noisy, with its figures."""
    monkeypatch.setattr(cost_model, "MAX_SPREAD", 0.0)
    step = _train()
    with opskew.profile(activities=CPU, report_file=None) as prof:
        for _ in range(3):
            step()
    r = prof.report
    assert r["w_ns"] is None and r["corrected_trace"] is None
    assert "the in-process model was too noisy to use" in r["fallback"] and "95% CI" in r["fallback"]
