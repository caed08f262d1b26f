#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The parent's cost per maintenance cycle: system calls (strace -c on the
parent alone, no -f) and CPU time (/proc/PID/schedstat, without strace), idle
server, N buckets, for one build of the MPM.

  measure.py MPM_SO LABEL BUCKETS SECONDS OUTDIR

Runs the server through the test harness (free loopback port, its own
ServerRoot), waits for every child, lets 3 cycles pass, then counts
system calls for SECONDS (one cycle a second), then reads the parent's
time on a CPU (/proc/PID/schedstat) over another SECONDS without strace.  Writes
OUTDIR/LABEL-bBUCKETS.{strace,json,conf}.
"""

import json
import os
import subprocess
import sys
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                   ".."))
sys.path.insert(0, os.path.join(TOP, "test"))

from pfbtest import Server  # noqa: E402


def cpu_ns(pid):
    """Time on a CPU, in ns (the scheduler's own count: finer than the
    10 ms ticks of utime and stime)."""
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def main(mpm, label, buckets, seconds, outdir):
    extra = ("ListenBuckets %d\nStartServers %d\nMinSpareServers %d\n"
             "MaxSpareServers %d\nServerLimit %d\nMaxRequestWorkers %d\n"
             % (buckets, buckets, buckets, 2 * buckets, 2 * buckets,
                2 * buckets))
    stem = os.path.join(outdir, "%s-b%d" % (label, buckets))
    with Server(extra=extra, mpm=mpm, check_log=False) as srv:
        srv.start(timeout=120)
        srv.wait_ready(buckets, timeout=120)
        pid = srv.proc.pid
        time.sleep(3)               # a measurement window, not a test wait
        with open(stem + ".conf", "w") as f:
            f.write(open(srv.conf).read())
        st = subprocess.Popen(["strace", "-c", "-o", stem + ".strace",
                               "-p", str(pid)])
        time.sleep(seconds)
        st.terminate()
        st.wait()
        t0, c0 = time.monotonic(), cpu_ns(pid)
        time.sleep(seconds)
        t1, c1 = time.monotonic(), cpu_ns(pid)
        calls = 0
        for line in open(stem + ".strace"):
            parts = line.split()
            if parts and parts[-1] == "total":
                calls = int(parts[3])
        result = {"label": label, "buckets": buckets, "mpm": mpm,
                  "strace_seconds": seconds, "calls": calls,
                  "calls_per_cycle": calls / float(seconds),
                  "cpu_seconds": (c1 - c0) / 1e9,
                  "wall_seconds": t1 - t0,
                  "cpu_share": (c1 - c0) / 1e9 / (t1 - t0)}
        with open(stem + ".json", "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
         sys.argv[5])
