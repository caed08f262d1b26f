# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Medians with distribution-free confidence intervals.

For n independent runs, the interval between the k-th smallest and the
k-th largest contains the true median with probability
1 - 2 P(Binomial(n, 1/2) < k), whatever the distribution.  The suite
reports the narrowest such interval whose coverage is at least 95 %, and
that coverage: with 5 runs none reaches 95 % (min to max covers 93.8 %),
with 6 to 8 it is min to max (96.9 % to 99.2 %), with 9 the 2nd to the 8th
(96.1 %).  Ratios against the baseline are taken per pair (runs of one pair
are interleaved, so they share the machine's state) and their median gets
the same interval.
"""

import math
import statistics

LEVEL = 0.95


def coverage(n, k):
    """Coverage of [x(k), x(n+1-k)] for the median of n runs."""
    below = sum(math.comb(n, i) for i in range(k)) / float(2 ** n)
    return 1.0 - 2.0 * below


def median_ci(values, level=LEVEL):
    """(median, low, high, coverage) of finite values; None when empty.
    When no interval reaches the level (fewer than 6 runs), low and high
    are the min and the max, with their lower coverage."""
    values = sorted(v for v in values if v is not None and
                    not (isinstance(v, float) and math.isnan(v)))
    n = len(values)
    if n == 0:
        return None
    med = statistics.median(values)
    best = None
    for k in range(1, n // 2 + 1):
        c = coverage(n, k)
        if c >= level:
            best = (k, c)
    if best is None:
        return (med, values[0], values[-1], coverage(n, 1))
    k, c = best
    return (med, values[k - 1], values[n - k], c)


def paired_ratios(runs, base_runs, metric):
    """metric(run) / metric(baseline run of the same pair), per pair."""
    base = {r["pair"]: metric(r) for r in base_runs}
    ratios = []
    for r in runs:
        b = base.get(r["pair"])
        v = metric(r)
        if b and v is not None and not math.isnan(b) and not math.isnan(v):
            ratios.append(v / b)
    return ratios


def fmt_ci(ci, digits=1, scale=1.0):
    """'median [low, high]', with the coverage when below the level."""
    if ci is None:
        return "n/a"
    med, low, high, cov = ci
    if cov <= 0.0:
        return "%.*f (1 run)" % (digits, med * scale)
    text = "%.*f [%.*f, %.*f]" % (digits, med * scale, digits, low * scale,
                                  digits, high * scale)
    if cov < LEVEL:
        text += " (%.0f %%)" % (100 * cov)
    return text
