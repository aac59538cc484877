"""The shift between two independent samples (docs/profile.md, "Schedules
with few wait steps"): the Hodges-Lehmann estimate (the median of every
treated - base difference) with the distribution-free interval of the
Mann-Whitney test, its coverage exact. opskew.profile uses it where a
schedule leaves too few wait steps to pair each active step with one of its
own (torch's documented wait=1, warmup=1, active=3, repeat=2): the active
steps against the run's settled bare steps (stats.pricing.estimate_w).

Pure, no torch; loops over steps (tens), never over events.
"""

from __future__ import annotations

from math import comb

# The largest samples taken: the exact distribution's table grows with n x m.
MAX_N = 64
MAX_M = 256


def u_counts(n: int, m: int) -> list:
    """How many of the C(n+m, n) orderings of two samples of sizes n and m
    give each value of the Mann-Whitney U (0 .. n*m): the coefficients of the
    Gaussian binomial [n+m choose n] in q, built one sample size at a time."""
    # counts[j][u]: orderings of j treated among j + m values with U = u,
    # by the recurrence c(j, m; u) = c(j - 1, m; u - m) ... summed over where
    # the largest value falls; here as the product of (1 - q^(m+i)) / (1 - q^i).
    poly = [1]
    for i in range(1, n + 1):
        # multiply by (1 - q^(m+i))
        grown = poly + [0] * (m + i)
        for k, c in enumerate(poly):
            grown[k + m + i] -= c
        # divide by (1 - q^i): running sums with step i
        for k in range(i, len(grown)):
            grown[k] += grown[k - i]
        poly = grown[: len(poly) + m]
    return poly[: n * m + 1]


def shift_estimate(base: list, treated: list, level: float = 0.95) -> dict | None:
    """The Hodges-Lehmann shift of `treated` over `base` with the
    Mann-Whitney interval of at least `level` (None where the samples are
    too small for one: then `ci` is None), its exact coverage, the exact
    two-sided p-value of no shift, and the samples' sizes. None where either
    sample is empty or over MAX_N / MAX_M."""
    n, m = len(treated), len(base)
    if not n or not m or n > MAX_N or m > MAX_M:
        return None
    diffs = sorted(t - b for t in treated for b in base)
    nm = len(diffs)
    mid = nm // 2
    shift = diffs[mid] if nm % 2 else (diffs[mid - 1] + diffs[mid]) / 2
    counts = u_counts(n, m)
    total = comb(n + m, n)
    # The interval [d_(k), d_(nm+1-k)] covers 1 - 2 P(U <= k - 1): the
    # largest k whose coverage still reaches `level`.
    tail, k = 0, 0
    while k < nm // 2 and 1 - 2 * (tail + counts[k]) / total >= level:
        tail += counts[k]
        k += 1
    ci = [diffs[k - 1], diffs[nm - k]] if k else None
    coverage = 1 - 2 * tail / total if k else None
    # U: treated values above base values (ties half).
    u = sum((t > b) + 0.5 * (t == b) for t in treated for b in base)
    below = sum(counts[j] for j in range(len(counts)) if j <= u) / total
    above = sum(counts[j] for j in range(len(counts)) if j >= u) / total
    return {"shift": shift, "ci": ci, "ci_coverage": coverage, "p": min(1.0, 2 * min(below, above)),
            "n": n, "m": m}
