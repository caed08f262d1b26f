#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Why a prefork server's cost grows with its pool: two experiments whose
results are counts, so that a busy machine does not move them much.

  pool_cause.py reuse MPM_SO CHILDREN [CONCURRENCY]
      CHILDREN children, ab -c CONCURRENCY, 20 requests per child over
      Connection: close; for each request, how many requests ago its child
      last served one (the access log's order).  If the kernel woke the
      most recently idle child, the median would be about the concurrency;
      FIFO wake-up of accept() waiters gives about the idle pool.  Also the
      share of requests served by a child that had waited through more
      than 64 others' requests (a cold one).

  pool_cause.py stopped MPM_SO CHILDREN ACTIVE [SECONDS]
      CHILDREN children, all but ACTIVE stopped with SIGSTOP (out of the
      accept queue, still in memory, in the scoreboard and in the parent's
      scans), wrk -c32 static close after a warm-up: CPU per request (the
      server's cgroup, user and system), context switches and minor faults
      per request.  Equal to an ACTIVE-child pool's: the cost is which
      child serves, not how many exist.  (CPU is a time: on a busy
      machine read it as a direction only.)

  pool_cause.py restart MPM_SO CHILDREN [RATE] [SECONDS]
      CHILDREN children (a fixed pool) at RATE requests a second (default
      1000; build/openloop, a connection each), counted in the kernel
      (build/kevents: every task of the server, children forked later
      too): page faults, system calls and sleeps per request over SECONDS
      (default 30) of steady state after a warm-up, then over the SECONDS
      that follow a graceful restart made as the load begins.  A child's
      start faults whether or not it serves, so a restart without load
      is counted too, and the restart's faults less those are the ones
      its serving took: with the connections rotating through the pool,
      every new child pays its first requests; with the most recently
      idle child first, a few do.  Needs root (tracepoints).

One JSON line per run on stdout.  MPM_SO is any prefork MPM: this one, an
older build of it, or Debian's stock mod_mpm_prefork.so.
"""

import json
import os
import re
import signal
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "test"))
sys.path.insert(0, HERE)

from pfbtest import Server  # noqa: E402
import argparse  # noqa: E402
import threading  # noqa: E402

import cgroupcpu  # noqa: E402
import generators  # noqa: E402
import hoststate  # noqa: E402
import kevents  # noqa: E402
import measures  # noqa: E402

COLD = measures.COLD_REUSE
FILE = "/s.html"


def pool_conf(children):
    return ("StartServers %d\nMinSpareServers 1\nMaxSpareServers %d\n"
            "MaxRequestWorkers %d\nServerLimit %d\nLogLevel warn\n"
            "<Directory />\n    AllowOverride None\n</Directory>\n"
            % (children, children, children, children))


def reuse(mpm, children, concurrency):
    requests = 20 * children
    with Server(extra=pool_conf(children), mpm=mpm, check_log=False) as srv:
        with open(srv.root + "/htdocs" + FILE, "w") as f:
            f.write("x" * 100)
        srv.start()
        srv.wait_ready(children, idle=True, timeout=600)
        subprocess.run(["ab", "-q", "-n", str(requests), "-c",
                        str(concurrency), srv.url(FILE)],
                       capture_output=True, timeout=600)
        srv.wait_access_log(requests)
        pids = [l.split()[1] for l in srv.access_log_lines()]
    last, dist = {}, []
    for i, pid in enumerate(pids):
        if pid in last:
            dist.append(i - last[pid])
        last[pid] = i
    # The second half: every child has served by then.
    dist = sorted(dist[len(dist) // 2:])
    return {"experiment": "reuse", "mpm": mpm, "children": children,
            "concurrency": concurrency, "requests": len(pids),
            "children_served": len(last),
            "reuse_median": statistics.median(dist),
            "reuse_p10": dist[len(dist) // 10],
            "reuse_p90": dist[9 * len(dist) // 10],
            "cold_share": round(sum(1 for d in dist if d > COLD)
                                / float(len(dist)), 3)}


def counters(pids):
    faults = switches = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                faults += int(f.read().rsplit(")", 1)[1].split()[7])
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if "ctxt_switches" in line:
                        switches += int(line.split()[1])
        except OSError:
            continue
    return faults, switches


def wrk(url, seconds):
    out = subprocess.run(
        ["wrk", "-t2", "-c32", "-d%ds" % seconds, "-s", generators.WRK_SCRIPT,
         url], env=dict(os.environ, WRK_CLOSE="1"), capture_output=True,
        text=True, timeout=seconds + 60).stdout
    return json.loads(re.search(r"^WRK_JSON (.*)$", out, re.M).group(1))


def stopped(mpm, children, active, seconds):
    with cgroupcpu.ServerCgroup("cause%d" % children) as cg:
        with Server(extra=pool_conf(children), mpm=mpm,
                    check_log=False) as srv:
            srv.wrapper = cg.wrapper()
            with open(srv.root + "/htdocs" + FILE, "w") as f:
                f.write("x" * 100)
            srv.start()
            srv.wait_ready(children, idle=True, timeout=600)
            kids = srv.children()
            held = kids[active:]
            for pid in held:
                os.kill(pid, signal.SIGSTOP)
            try:
                # Past every active child's first requests.
                wrk(srv.url(FILE), max(5, active // 50))
                pids = srv.children()
                f0, s0 = counters(pids)
                u0 = cg.usage()
                result = wrk(srv.url(FILE), seconds)
                u1 = cg.usage()
                f1, s1 = counters(pids)
            finally:
                for pid in held:
                    os.kill(pid, signal.SIGCONT)
    n = float(result["requests"])
    row = {"experiment": "stopped", "mpm": mpm, "children": children,
           "active": active, "requests": result["requests"],
           "errors": result["errors"],
           "ctx_per_request": round((s1 - s0) / n, 2),
           "minor_faults_per_request": round((f1 - f0) / n, 3)}
    if u0 and u1:
        row.update(cpu_us=round((u1[0] - u0[0]) * 1e6 / n, 1),
                   user_us=round((u1[1] - u0[1]) * 1e6 / n, 1),
                   system_us=round((u1[2] - u0[2]) * 1e6 / n, 1))
    return row


def counted(cg, action):
    """build/kevents around action(); the counts, or {"error": why}."""
    with kevents.KernelEvents(os.path.join(cg.path, "tasks"),
                              sorted(os.sched_getaffinity(0))) as ke:
        action()
    return ke.result


def per_request(counts, requests):
    if "error" in counts or not requests:
        return {"error": counts.get("error", "no requests")}
    faults = counts["faults_user"] + counts["faults_kernel"]
    return {"requests": requests, "faults": faults, "forks": counts["forks"],
            "faults_per_request": round(faults / float(requests), 3),
            "syscalls_per_request": round(counts["syscalls"]
                                          / float(requests), 2),
            "sleeps_per_request": round(counts["switches_voluntary"]
                                        / float(requests), 3)}


def restart(mpm, children, rate, seconds):
    why = kevents.unavailable()
    if why:
        return {"experiment": "restart", "error": why}
    # The generator on loopback, on any CPU: these are counts.
    load_args = argparse.Namespace(client_cpus=None, rig=None,
                                   generator_wrapper=None)
    row = {"experiment": "restart", "mpm": mpm, "children": children,
           "rate": rate, "seconds": seconds, "commit": hoststate.commit(),
           "command": " ".join(["bench/pool_cause.py", "restart",
                                mpm, str(children), str(rate),
                                str(seconds)])}
    with cgroupcpu.ServerCgroup("restart%d" % children) as cg:
        with Server(extra=pool_conf(children), mpm=mpm,
                    check_log=False) as srv:
            srv.wrapper = cg.wrapper()
            with open(srv.root + "/htdocs" + FILE, "w") as f:
                f.write("x" * 100)
            srv.start()
            srv.wait_ready(children, idle=True, timeout=600)
            url = srv.url(FILE)

            def load(secs):
                return generators.run_openloop(load_args, url,
                                               "%d:%d" % (secs, rate))

            def restarted(under_load):
                generation = srv.scoreboard().newest_generation() + 1
                done = {}
                worker = threading.Thread(
                    target=lambda: done.update(load(seconds)))
                if under_load:
                    worker.start()
                srv.graceful()
                srv.wait_ready(children, generation=generation, timeout=600)
                if under_load:
                    worker.join()
                # The old generation gone, so that its exits fall in this
                # window and no later one.
                srv.wait_for(lambda: len(srv.children()) <= children, 600)
                return done

            # A restart with no load: what starting a generation costs.
            quiet = counted(cg, lambda: restarted(False))
            row["restart_without_load"] = {
                k: quiet.get(k) for k in ("faults_user", "faults_kernel",
                                          "forks", "syscalls")} \
                if "error" not in quiet else quiet
            load(10)                    # the children the load uses, warm
            steady = {}
            counts = counted(cg, lambda: steady.update(load(seconds)))
            row["steady"] = per_request(counts, steady.get("requests"))
            after = {}
            counts = counted(cg, lambda: after.update(restarted(True)))
            row["after_restart"] = per_request(counts, after.get("requests"))
            row["log_problems"] = srv.unexpected_log_lines()[:10]
    if "error" not in row["steady"] and "error" not in \
            row["after_restart"] and "error" not in quiet:
        startup = quiet["faults_user"] + quiet["faults_kernel"]
        serving = row["after_restart"]["faults"] - startup
        row["after_restart"]["serving_faults_per_request"] = round(
            serving / float(row["after_restart"]["requests"]), 3)
        row["ratio"] = round(row["after_restart"]["faults_per_request"]
                             / row["steady"]["faults_per_request"], 3)
        row["serving_ratio"] = round(
            row["after_restart"]["serving_faults_per_request"]
            / row["steady"]["faults_per_request"], 3)
    return row


def main(argv):
    if len(argv) >= 4 and argv[1] == "restart":
        row = restart(os.path.abspath(argv[2]), int(argv[3]),
                      int(argv[4]) if len(argv) > 4 else 1000,
                      int(argv[5]) if len(argv) > 5 else 30)
        print(json.dumps(row))
        return 0
    if len(argv) < 4 or argv[1] not in ("reuse", "stopped"):
        print(__doc__)
        return 2
    mpm, children = os.path.abspath(argv[2]), int(argv[3])
    if argv[1] == "reuse":
        row = reuse(mpm, children, int(argv[4]) if len(argv) > 4 else 32)
    else:
        row = stopped(mpm, children, int(argv[4]) if len(argv) > 4
                      else children, int(argv[5]) if len(argv) > 5 else 5)
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
