"""opskew.stats.pricing.wait_drift: whether a profiled process's wait steps
are bare, from the run's own steps (the report says so when they are not)."""

from opskew.stats.pricing import POST_TRACE, SETTLE, estimate_w, wait_drift
from opskew.render.notes import all_words


def _run(before_ns, after_ns, cycles=3, wait=21, active=7):
    """Step records of a schedule: a wait block, then per cycle a warmup,
    `active` active steps and a wait block whose settled steps take after_ns."""
    recs, n = [], 0

    def add(phase, ns, **kw):
        nonlocal n
        recs.append({"step": n, "phase": phase, "ns": ns, **kw})
        n += 1

    for k in range(wait):
        add("wait", 5 * before_ns if k == 0 else before_ns + k % 3)
    for _ in range(cycles):
        add("warmup", before_ns)
        for _ in range(active):
            add("active", 2 * before_ns)
        for k in range(wait):
            add("wait", 10 * before_ns if k < POST_TRACE else
                (after_ns + k % 3 if k >= SETTLE else (after_ns + before_ns) // 2), ref=2 <= k < 7 or None)
    for r in recs:
        if r.get("ref") is None:
            r.pop("ref", None)
    return recs


def test_bare_wait_steps_are_not_flagged():
    d = wait_drift(_run(100_000, 100_000), forgot=False)
    assert d is not None and not d["not_bare"] and abs(d["ratio"] - 1) < 0.01
    assert d["ci95"][0] <= 1 <= d["ci95"][1]


def test_slow_wait_steps_after_a_trace_are_said_with_their_size():
    d = wait_drift(_run(100_000, 115_000), forgot=False)
    assert d["not_bare"] and abs(d["ratio"] - 1.15) < 0.01 and d["ci95"][0] > 1
    # The cold steps right after a trace and the tracer's steps are left out.
    assert d["after_steps"] == 3 * (21 - SETTLE) and d["before_steps"] == 21 - POST_TRACE
    events = {r["step"]: (100, 0) for r in _run(100_000, 115_000) if r["phase"] == "active"}
    w, notes, detail, _ = estimate_w(_run(100_000, 115_000), events, False, 0.0, False)
    assert detail["wait_drift"]["not_bare"]
    assert any(n.startswith("wait steps are not bare: the settled wait steps after a trace ran +15.0%")
               for n in all_words(notes)), notes


def test_too_few_steps_or_a_forgotten_start_give_no_figure():
    assert wait_drift(_run(100_000, 115_000, wait=6), forgot=False) is None
    assert wait_drift(_run(100_000, 115_000), forgot=True) is None
