#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Bucket balance from a server's logs: requests per bucket and per child
(access log %P, mapped to buckets by the MPM's 'child ... started' debug
lines), with max/mean, min/mean, coefficient of variation and Jain's
fairness index.

usage: balance_report.py SERVER_ROOT   (reads logs/access_log, logs/error_log)
"""

import collections
import math
import re
import sys


def balance(values):
    n = len(values)
    total = sum(values)
    if n == 0 or total == 0:
        return {"mean": 0.0, "max_mean": 0.0, "min_mean": 0.0, "cv": 0.0,
                "jain": 1.0}
    mean = total / n
    var = sum((v - mean) ** 2 for v in values) / n
    return {"mean": mean, "max_mean": max(values) / mean,
            "min_mean": min(values) / mean, "cv": math.sqrt(var) / mean,
            "jain": total * total / (n * sum(v * v for v in values))}


def main(root):
    bucket_of = {}
    with open(root + "/logs/error_log") as f:
        for m in re.finditer(r"PFB00009: child pid (\d+) slot \d+ bucket (\d+)",
                             f.read()):
            bucket_of[int(m.group(1))] = int(m.group(2))
    per_child = collections.Counter()
    with open(root + "/logs/access_log") as f:
        for line in f:
            per_child[int(line.split()[1])] += 1
    per_bucket = collections.Counter()
    for pid, count in per_child.items():
        per_bucket[bucket_of.get(pid, -1)] += count
    buckets = sorted(b for b in set(bucket_of.values()))
    counts = [per_bucket[b] for b in buckets]
    total = sum(per_child.values())
    print("requests: %d, buckets: %d, children that served: %d"
          % (total, len(buckets), len(per_child)))
    width = max(counts) if counts else 1
    for b, c in zip(buckets, counts):
        bar = "#" * int(round(40.0 * c / width)) if width else ""
        print("  bucket %-3d %7d  %5.1f%%  %s"
              % (b, c, 100.0 * c / total if total else 0, bar))
    for name, values in (("buckets", counts),
                         ("children", list(per_child.values()))):
        s = balance(values)
        print("  over %-8s max/mean %.2f  min/mean %.2f  CV %.3f  "
              "Jain %.4f" % (name, s["max_mean"], s["min_mean"], s["cv"],
                             s["jain"]))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
