# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Every request's latency, kept: a histogram at 1 µs resolution (lossless
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
import os

import pack

HEADER = "# pfb latency histogram v1: <latency us> <requests>\n"


def from_latencies(seconds):
    """{µs: count} from latencies in seconds."""
    hist = {}
    for s in seconds:
        us = int(round(s * 1e6))
        hist[us] = hist.get(us, 0) + 1
    return hist


def write(path, hist):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wt", compresslevel=9) as f:
        f.write(HEADER)
        for us in sorted(hist):
            f.write("%d %d\n" % (us, hist[us]))
    return path


def read(path):
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


def merge(hists):
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


def mean_ms(hist):
    """The mean latency of a histogram, in ms (nan when empty)."""
    count = sum(hist.values())
    if not count:
        return float("nan")
    return sum(us * n for us, n in hist.items()) / float(count) / 1000.0


def summary(hist):
    """The percentiles the suite reports, from a histogram."""
    p = Percentiles(hist)
    result = {"requests_timed": p.count}
    for q in (50, 90, 99, 99.9, 99.99):
        result["p%s" % q] = p(q)
    result["max"] = p.max()
    return result
