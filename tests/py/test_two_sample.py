"""Schedules with few wait steps (docs/profile.md): where the schedule
leaves too few wait steps to pair each active step with one of its own,
W comes from the active steps against the run's settled bare steps, as two
samples (stats.shift: Hodges-Lehmann shift, Mann-Whitney interval)."""

import itertools
import json
import os
from math import comb

from opskew.stats.pricing import MIN_PAIRS, SETTLE, estimate_w
from opskew.render.notes import all_words
from opskew.stats.shift import shift_estimate, u_counts


def test_the_u_distribution_is_exact():
    for n, m in ((1, 1), (2, 3), (4, 6), (3, 7), (5, 5)):
        brute = [0] * (n * m + 1)
        for pos in itertools.combinations(range(n + m), n):
            brute[sum(1 for p in pos for q in range(n + m) if q not in pos and q < p)] += 1
        assert u_counts(n, m) == brute and sum(brute) == comb(n + m, n)


def test_the_shift_and_its_interval():
    r = shift_estimate([100, 101, 99, 100, 102, 98], [110, 111, 109, 112])
    assert r["shift"] == 10.5 and r["ci"] == [8, 13] and abs(r["ci_coverage"] - 202 / 210) < 1e-12
    assert abs(r["p"] - 2 / 210) < 1e-12  # every active value above every bare one
    assert shift_estimate([100] * 3, [110] * 2)["ci"] is None  # too small for a 95% interval
    assert shift_estimate([], [1]) is None


def documented(bare_ns=100_000, active_ns=130_000, tail=50, events=100):
    """torch's documented schedule (wait=1, warmup=1, active=3, repeat=2)
    and `tail` steps after it, as opskew.profile's step clock keeps them
    (a long wait block: its first 8 and last 6)."""
    recs, n = [], 0
    for _ in range(2):
        for phase, k in (("wait", 1), ("warmup", 1), ("active", 3)):
            for j in range(k):
                recs.append({"step": n, "phase": phase,
                             "ns": (3 * active_ns if j == 0 else active_ns + 7 * j) if phase == "active"
                             else bare_ns})
                n += 1
    kept = list(range(tail)) if tail <= 14 else list(range(8)) + list(range(tail - 6, tail))
    for j in kept:
        recs.append({"step": n + j, "phase": "wait", "ns": (10 * bare_ns if j < 2 else bare_ns + 3 * (j % 4))})
    ev = {r["step"]: (events, 0) for r in recs if r["phase"] == "active"}
    return recs, ev


def test_the_documented_schedule_gets_an_in_run_w_with_its_interval():
    recs, ev = documented()
    w, notes, detail, pairs = estimate_w(recs, ev, False, 0.0, False)
    assert len(pairs) < MIN_PAIRS and w is not None and w["ci_reaches_95"]
    assert detail["two_sample"] == {"active_steps": 4, "bare_steps": 6, "p": w["sign_p"]}
    # 30 us more per active step, 100 events: 300 ns per event, inside its interval.
    assert abs(w["median"] - 300) < 5 and w["ci95"][0] <= w["median"] <= w["ci95"][1]
    assert abs(detail["corrected_step_ns"] - 100_000) < 600
    assert any("Hodges-Lehmann shift" in n for n in all_words(notes))
    assert w["test"].startswith("Mann-Whitney over 4 active and 6 bare steps")


def test_no_settled_bare_step_gives_no_w():
    recs, ev = documented(tail=SETTLE)  # the run ends before any bare step settles
    w, notes, detail, _ = estimate_w(recs, ev, False, 0.0, False)
    assert "two_sample" not in detail and (w is None or not w["ci_reaches_95"])


def test_opskew_profile_with_the_documented_schedule_corrects_its_traces(tmp_path, monkeypatch):
    """torch's documented schedule in a loop that runs 50 steps past it, no
    stored calibration: the traces are corrected with an in-run W and its
    interval at stop()."""
    monkeypatch.setenv("OPSKEW_CACHE_DIR", str(tmp_path / "cache"))
    import torch

    import opskew

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 32), torch.randn(8, 4)
    sch = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=2)
    out = tmp_path / "tb"
    with opskew.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sch,
                        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(out)),
                        report_file=None) as prof:
        for _ in range(2 * 5 + 50):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            prof.step()
    final = prof.final
    assert final is not None and final["w_ns"]["ci95"] is not None, [r.get("fallback") for r in prof.reports]
    assert "two samples" in final["w_ns"]["ci_method"]
    # tensorboard_trace_handler's files: each corrected one in corrected/, as
    # the worker WORKER.corrected (tracefile.corrected_path).
    corrected = sorted(p for p in os.listdir(out / "corrected") if ".corrected." in p)
    assert len(corrected) == 2, os.listdir(out / "corrected")
    for rep in prof.reports:
        assert rep["corrected_with"] == "the run's final W" and rep["corrected_w_ns"] == final["w_ns"]
        head = json.load(open(rep["corrected_trace"]))
        assert any(e.get("name", "").startswith("ProfilerStep#") for e in head["traceEvents"])
