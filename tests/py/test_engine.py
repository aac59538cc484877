"""The C engine through its binding: statistics and the busy-wait instrument."""

import math

import pytest

from opskew import _engine


def test_paired_all_positive_matches_exact_values():
    r = _engine.paired([10.0] * 7, [11, 12, 13, 14, 15, 16, 17])
    assert r["median"] == 4.0
    assert r["ci"] == (1.0, 7.0)
    assert r["ci_coverage"] == pytest.approx(1 - 2 / 128)
    assert r["sign_p"] == pytest.approx(2 / 128)
    assert r["wilcoxon_p"] == pytest.approx(2 / 128)
    assert r["ci_reaches_level"] is True


def test_paired_scale_and_too_few():
    r = _engine.paired([0, 0, 0], [1, 2, 3], scale=1000)
    assert r["median"] == 2000
    assert r["ci_reaches_level"] is False  # 3 pairs cannot give 95%
    with pytest.raises(ValueError, match="baseline vs"):
        _engine.paired([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="invalid argument"):
        _engine.paired([1, 2, 3], [1, math.nan, 3])
    with pytest.raises(TypeError):
        _engine.paired([1, "x"], [1, 2])


def test_quantile():
    assert _engine.quantile([4, 1, 3, 2], 0.5) == 2.5
    with pytest.raises(ValueError):
        _engine.quantile([], 0.5)


def test_clock_and_spin():
    info = _engine.clock_info()
    assert info["kind"] in ("tsc", "monotonic_raw")
    assert info["ns_per_tick"] > 0
    assert _engine.spin_ns(10_000) >= 10_000


def test_busy_wait_counts_only_torch_builtins():
    import torch

    a = torch.ones(2)
    _engine.inject_start(0)
    try:
        for _ in range(50):
            torch.add(a, a)
        len([1, 2])  # a builtin outside torch: not an event
        torch.mul(a, a)
    finally:
        n, spun = _engine.inject_stop()
    assert n == 51
    # A zero spin still reads the clock twice (so that busy-wait:0 costs what
    # busy-wait:N does apart from the wait): it counts one read's time, far
    # under a microsecond on average.
    assert 0 <= spun < 2 * n * 1000
    with pytest.raises(RuntimeError):
        _engine.inject_stop()
    _engine.inject_start(1000)
    try:
        torch.add(a, a)
    finally:
        n, spun = _engine.inject_stop()
    assert n == 1 and spun >= 1000  # 500 ns on entry and 500 on exit, never less
