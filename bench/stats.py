# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The suite's statistics: across runs, medians with distribution-free
confidence intervals; within a run, every request's latency as a
histogram, and the percentiles taken from it.

For n independent runs, the interval between the k-th smallest and the
k-th largest contains the true median with probability
1 - 2 P(Binomial(n, 1/2) < k), whatever the distribution.  The suite
reports the narrowest such interval whose coverage is at least 95 %, and
that coverage: with 5 runs none reaches 95 % (min to max covers 93.8 %),
with 6 to 8 it is min to max (96.9 % to 99.2 %), with 9 the 2nd to the 8th
(96.1 %).  Ratios against the baseline are taken per pair (runs of one pair
are interleaved, so they share the machine's state) and their median gets
the same interval.

Every request's latency is kept: a histogram at 1 µs resolution (lossless
for percentiles: it drops only the order), one gzip'd text file per run.

  # pfb latency histogram v1: <latency µs> <requests>
  1203 17
  1204 22
  ...

wrk gives its whole histogram to wrk_report.lua (latency(i) is the i-th
distinct value and its count); the open-loop generator (openloop.c) writes
its latencies in the same form.
Any percentile can be recomputed from the file, and runs merged by adding
counts: report.py reads these files, not the generators' summaries.
"""

import bisect
import gzip
import math
import os
import statistics

import pack

LEVEL = 0.95


# Across runs: medians and their intervals.
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


# Within a run: every request's latency, as a histogram.
HIST_HEADER = "# pfb latency histogram v1: <latency us> <requests>\n"


def hist_from_latencies(seconds):
    """{µs: count} from latencies in seconds."""
    hist = {}
    for s in seconds:
        us = int(round(s * 1e6))
        hist[us] = hist.get(us, 0) + 1
    return hist


def write_hist(path, hist):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wt", compresslevel=9) as f:
        f.write(HIST_HEADER)
        for us in sorted(hist):
            f.write("%d %d\n" % (us, hist[us]))
    return path


def read_hist(path):
    """The histogram a file holds, plain or in its folder's archive
    (pack.py)."""
    hist = {}
    with pack.open_text(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            us, count = line.split()
            hist[int(us)] = hist.get(int(us), 0) + int(count)
    return hist


def merge_hists(hists):
    total = {}
    for h in hists:
        for us, count in h.items():
            total[us] = total.get(us, 0) + count
    return total


class Percentiles:
    """Percentiles of a histogram, in ms (nearest rank, as wrk reports)."""

    def __init__(self, hist):
        self.values = sorted(hist)
        self.cum = []
        running = 0
        for us in self.values:
            running += hist[us]
            self.cum.append(running)
        self.count = running

    def __call__(self, p):
        if not self.count:
            return float("nan")
        rank = max(1, int(-(-p / 100.0 * self.count // 1)))
        i = bisect.bisect_left(self.cum, rank)
        return self.values[min(i, len(self.values) - 1)] / 1000.0

    def max(self):
        return self.values[-1] / 1000.0 if self.values else float("nan")


def hist_mean_ms(hist):
    """The mean latency of a histogram, in ms (nan when empty)."""
    count = sum(hist.values())
    if not count:
        return float("nan")
    return sum(us * n for us, n in hist.items()) / float(count) / 1000.0


def hist_summary(hist):
    """The percentiles the suite reports, from a histogram."""
    p = Percentiles(hist)
    result = {"requests_timed": p.count}
    for q in (50, 90, 99, 99.9, 99.99):
        result["p%s" % q] = p(q)
    result["max"] = p.max()
    return result
