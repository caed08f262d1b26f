#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Interleaved benchmark: this MPM against Debian's stock mod_mpm_prefork.so.

Each scenario runs configuration A (this MPM) and B (stock) in turn, A B A B
..., for --pairs pairs, each on a fresh server with the same configuration
and load, and reports the median, min and max of each and the ratio A/B of
the medians.  Only ratios within one run mean anything on a small, noisy
machine.

  python3 bench/bench_stock.py                 # every scenario, 5 pairs
  python3 bench/bench_stock.py --pairs 9 static buckets
  python3 bench/bench_stock.py --list

Scenarios:
  static     static file, keep-alive off, ab -c 32; no buckets on either side
  buckets    the same with 2 buckets: ListenBuckets 2 / stock's
             ListenCoresBucketsRatio 1 on 2 CPUs
  fourports  four Listen ports loaded evenly (4 x ab -c 8); this MPM with a
             bucket per Listen (no poll, no mutex) / stock's accept mutex
  graceful   graceful restart every 2 s for 20 s under load; this MPM with 4
             buckets / stock with ListenCoresBucketsRatio 1; counts errors
  syscalls   strace -f of one fourports run of each: poll and lock calls
             per request in the accept path
  hetero     heterogeneous service time: exponential, mean 10 ms (test-only
             handler), wrk -c 48 on new connections, MaxRequestWorkers 32 so
             requests queue; p50/p90/p99 latency of this MPM with 2 buckets,
             stock with 2 buckets, and this MPM with 1 bucket (one queue)

Raw output and summary.json go to --out (default bench-results/<time>).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# test/, for pfbtest (the one bootstrap, see test/pfbtest/__init__.py).
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "test"))

from pfbtest import Server, Load, STOCK_PREFORK, TEST_HANDLER_LOAD  # noqa

COMMON = ("StartServers 8\nMinSpareServers 8\nMaxSpareServers 32\n"
          "MaxRequestWorkers 64\nServerLimit 64\nKeepAlive Off\n"
          "LogLevel warn\nCustomLog /dev/null common\n")


def host_info():
    def cmd(args):
        try:
            return subprocess.run(args, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except OSError:
            return "n/a"
    return {
        "kernel": os.uname().release,
        "cpus_online": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "apache2": cmd(["/usr/sbin/apache2", "-v"]).splitlines()[0],
        "ab": cmd(["ab", "-V"]).splitlines()[0],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def ab(url, n, c, log):
    """One ab run, keep-alive off; returns requests/s and failed count."""
    args = ["ab", "-q", "-r", "-n", str(n), "-c", str(c), url]
    out = subprocess.run(["timeout", "120"] + args, capture_output=True,
                         text=True).stdout
    log.write("$ %s\n%s\n" % (" ".join(args), out))
    rps = re.search(r"Requests per second:\s+([\d.]+)", out)
    failed = re.search(r"Failed requests:\s+(\d+)", out)
    return (float(rps.group(1)) if rps else 0.0,
            int(failed.group(1)) if failed else -1)


def ab_parallel(urls, n, c, log):
    """One ab per URL at once; returns summed requests/s and failures."""
    procs = []
    for url in urls:
        args = ["ab", "-q", "-r", "-n", str(n), "-c", str(c), url]
        procs.append((args, subprocess.Popen(
            ["timeout", "120"] + args, stdout=subprocess.PIPE, text=True)))
    total, failed = 0.0, 0
    for args, p in procs:
        out = p.communicate()[0]
        log.write("$ %s\n%s\n" % (" ".join(args), out))
        rps = re.search(r"Requests per second:\s+([\d.]+)", out)
        bad = re.search(r"Failed requests:\s+(\d+)", out)
        total += float(rps.group(1)) if rps else 0.0
        failed += int(bad.group(1)) if bad else 1
    return total, failed


HETERO = ("StartServers 32\nMinSpareServers 1\nMaxSpareServers 32\n"
          "MaxRequestWorkers 32\nServerLimit 32\nKeepAlive Off\n"
          "LogLevel warn\nCustomLog /dev/null common\n"
          "<Location /pfb-test>\n    SetHandler pfb-test\n</Location>\n")
HETERO_MODULE = TEST_HANDLER_LOAD


def wrk_latency(url, connections, seconds, script, log):
    """wrk --latency with a Lua script; returns rps, p50/p90/p99 in ms and
    socket errors."""
    args = ["wrk", "-t", "2", "-c", str(connections), "-d", "%ds" % seconds,
            "--latency", "-s", script, url]
    out = subprocess.run(["timeout", str(seconds + 30)] + args,
                         capture_output=True, text=True).stdout
    log.write("$ %s\n%s\n" % (" ".join(args), out))

    def ms(label):
        m = re.search(r"^\s+%s%%\s+([\d.]+)(us|ms|s)\s*$" % label, out,
                      re.M)
        if not m:
            return float("nan")
        scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
        return float(m.group(1)) * scale
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), "
                       r"write (\d+), timeout (\d+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": float(rps.group(1)) if rps else 0.0,
            "p50": ms("50"), "p90": ms("90"), "p99": ms("99"),
            "errors": (sum(int(x) for x in errors.groups()) if errors else 0)
            + (int(non2xx.group(1)) if non2xx else 0)}


def scenario_hetero(args, log):
    script = os.path.join(HERE, "..", "test", "modules",
                          "exponential.lua")
    configs = [("this MPM, ListenBuckets 2",
                {"extra": HETERO + "ListenBuckets 2\n",
                 "extra_modules": HETERO_MODULE}),
               ("stock, ListenCoresBucketsRatio 1",
                {"extra": HETERO + "ListenCoresBucketsRatio 1\n",
                 "extra_modules": HETERO_MODULE, "mpm": STOCK_PREFORK}),
               ("this MPM, one bucket",
                {"extra": HETERO, "extra_modules": HETERO_MODULE})]

    def run_one(srv):
        return wrk_latency(srv.url("/pfb-test"), 48, args.seconds, script,
                           log)
    return interleave("hetero", configs, run_one, args.pairs, log)


def spread(values):
    return {"median": statistics.median(values), "min": min(values),
            "max": max(values), "runs": values}


def interleave(name, configs, run_one, pairs, log):
    """Runs each config once per pair, in order; returns per-config runs."""
    results = {label: [] for label, _ in configs}
    for i in range(pairs):
        for label, server_args in configs:
            log.write("\n### %s pair %d: %s\n" % (name, i + 1, label))
            with Server(check_log=False, **server_args) as srv:
                srv.start()
                srv.wait_ready(8, idle=True)
                results[label].append(run_one(srv))
            print("  %-10s pair %d %-34s %s" % (name, i + 1, label,
                                                results[label][-1]))
            sys.stdout.flush()
    return results


def scenario_static(args, log, buckets):
    if buckets:
        configs = [("this MPM, ListenBuckets 2",
                    {"extra": COMMON + "ListenBuckets 2\n"}),
                   ("stock, ListenCoresBucketsRatio 1",
                    {"extra": COMMON + "ListenCoresBucketsRatio 1\n",
                     "mpm": STOCK_PREFORK})]
    else:
        configs = [("this MPM", {"extra": COMMON}),
                   ("stock prefork", {"extra": COMMON, "mpm": STOCK_PREFORK})]

    def run_one(srv):
        rps, failed = ab(srv.url("/index.html"), args.requests, 32, log)
        return {"rps": rps, "failed": failed}
    return interleave("buckets" if buckets else "static", configs, run_one,
                      args.pairs, log)


def scenario_fourports(args, log):
    configs = [("this MPM, a bucket per Listen",
                {"extra": COMMON + "ListenBuckets 1\n", "ports": 4}),
               ("stock, accept mutex",
                {"extra": COMMON, "ports": 4, "mpm": STOCK_PREFORK})]

    def run_one(srv):
        urls = [srv.url("/index.html", i) for i in range(4)]
        rps, failed = ab_parallel(urls, args.requests // 4, 8, log)
        return {"rps": rps, "failed": failed}
    return interleave("fourports", configs, run_one, args.pairs, log)


def scenario_graceful(args, log):
    configs = [("this MPM, ListenBuckets 4",
                {"extra": COMMON + "ListenBuckets 4\n"}),
               ("stock, ListenCoresBucketsRatio 1",
                {"extra": COMMON + "ListenCoresBucketsRatio 1\n",
                 "mpm": STOCK_PREFORK}),
               ("stock, one bucket", {"extra": COMMON, "mpm": STOCK_PREFORK})]

    def run_one(srv):
        load = Load("127.0.0.1", srv.ports[0], concurrency=16,
                    timeout=10).start()
        for _ in range(10):
            time.sleep(2)
            srv.graceful()
        time.sleep(1)
        load.stop()
        return {"ok": load.ok, "errors": load.failures(),
                "kinds": dict(load.errors)}
    return interleave("graceful", configs, run_one, max(1, args.pairs // 2),
                      log)


def count_accept_path_calls(trace):
    """Counts, in an strace -f log, the calls the accept path makes."""
    counts = {"accept4": 0, "epoll_wait (listener poll)": 0,
              "fcntl F_SETLKW (accept mutex)": 0, "flock/semop (mutex)": 0}
    with open(trace) as f:
        for line in f:
            if "accept4(" in line and "resumed" not in line:
                counts["accept4"] += 1
            elif "epoll_wait(" in line or "epoll_pwait(" in line:
                counts["epoll_wait (listener poll)"] += 1
            elif "F_SETLKW" in line:
                counts["fcntl F_SETLKW (accept mutex)"] += 1
            elif "flock(" in line or "semop(" in line:
                counts["flock/semop (mutex)"] += 1
    return counts


def scenario_syscalls(args, log):
    """strace -f of the children over one fourports run of each side."""
    out = {}
    for label, server_args in (
            ("this MPM, a bucket per Listen",
             {"extra": COMMON + "ListenBuckets 1\n", "ports": 4}),
            ("stock, accept mutex",
             {"extra": COMMON, "ports": 4, "mpm": STOCK_PREFORK})):
        with Server(check_log=False, **server_args) as srv:
            srv.start()
            srv.wait_ready(8, idle=True)
            trace = os.path.join(args.out, "strace-%d.txt" % len(out))
            command = (["strace", "-f", "-o", trace, "-e",
                        "trace=accept4,epoll_wait,epoll_pwait,fcntl,flock,"
                        "semop"]
                       + sum((["-p", str(p)] for p in srv.children()), []))
            log.write("$ %s\n" % " ".join(command))
            tracer = subprocess.Popen(command, stderr=subprocess.DEVNULL)
            time.sleep(1)
            urls = [srv.url("/index.html", i) for i in range(4)]
            n = 2000
            ab_parallel(urls, n // 4, 2, log)
            tracer.terminate()
            tracer.wait(timeout=30)
        calls = count_accept_path_calls(trace)
        out[label] = {"requests": n, "calls": calls,
                      "per_request": {k: round(v / n, 2)
                                      for k, v in calls.items()}}
        print("  syscalls  %-34s %s" % (label, out[label]["per_request"]))
    return out


def summarize(name, results, key="rps"):
    labels = list(results)
    lines = []
    stats = {}
    for label in labels:
        values = [r[key] for r in results[label]]
        stats[label] = spread(values)
        extra = ""
        if "failed" in results[label][0]:
            extra = "  failed %d" % sum(r["failed"] for r in results[label])
        lines.append("  %-34s median %9.1f  min %9.1f  max %9.1f%s"
                     % (label, stats[label]["median"], stats[label]["min"],
                        stats[label]["max"], extra))
    base = stats[labels[1]]["median"]
    ratio = stats[labels[0]]["median"] / base if base else float("nan")
    lines.append("  ratio %s / %s: %.3f" % (labels[0], labels[1], ratio))
    return stats, ratio, lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*",
                        default=["static", "buckets", "fourports",
                                 "graceful", "syscalls", "hetero"])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--seconds", type=int, default=10,
                        help="length of each wrk run (hetero)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list:
        print(__doc__)
        return 0
    args.out = args.out or os.path.join(
        "bench-results", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(args.out, exist_ok=True)
    summary = {"host": host_info(), "pairs": args.pairs,
               "requests": args.requests, "scenarios": {}}
    print("host: %s" % summary["host"])
    report = []
    with open(os.path.join(args.out, "raw.log"), "w") as log:
        for name in args.scenarios:
            print("scenario %s" % name)
            if name in ("static", "buckets"):
                res = scenario_static(args, log, name == "buckets")
            elif name == "fourports":
                res = scenario_fourports(args, log)
            elif name == "graceful":
                res = scenario_graceful(args, log)
                lines = ["  %-34s ok %s  errors %s  %s" % (
                    label, [r["ok"] for r in runs],
                    [r["errors"] for r in runs],
                    [r["kinds"] for r in runs if r["kinds"]])
                    for label, runs in res.items()]
                summary["scenarios"][name] = res
                report += ["graceful restart every 2 s for 20 s:"] + lines
                continue
            elif name == "hetero":
                res = scenario_hetero(args, log)
                summary["scenarios"][name] = {"runs": res}
                report.append("heterogeneous service time (exp. mean 10 ms, "
                              "48 connections, MaxRequestWorkers 32, "
                              "%d pairs; medians):" % args.pairs)
                base = None
                for label, runs in res.items():
                    med = {k: statistics.median(r[k] for r in runs)
                           for k in ("rps", "p50", "p90", "p99")}
                    summary["scenarios"][name][label] = med
                    base = base or med
                    report.append("  %-34s rps %7.1f  p50 %6.1f ms  p90 "
                                  "%6.1f ms  p99 %6.1f ms  errors %d"
                                  % (label, med["rps"], med["p50"],
                                     med["p90"], med["p99"],
                                     sum(r["errors"] for r in runs)))
                labels = list(res)
                for other in labels[1:]:
                    o = summary["scenarios"][name][other]
                    report.append("  p99 ratio %s / %s: %.3f" % (
                        labels[0], other, base["p99"] / o["p99"]))
                continue
            elif name == "syscalls":
                res = scenario_syscalls(args, log)
                summary["scenarios"][name] = res
                report += ["accept-path system calls per request "
                           "(strace -f, fourports, %d requests):"
                           % next(iter(res.values()))["requests"]]
                report += ["  %-34s %s" % (label, r["per_request"])
                           for label, r in res.items()]
                continue
            else:
                print("unknown scenario %s" % name)
                return 2
            stats, ratio, lines = summarize(name, res)
            summary["scenarios"][name] = {"runs": res, "stats": stats,
                                          "ratio": ratio}
            report += ["%s (requests/s, %d pairs):" % (name, args.pairs)] \
                + lines
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print("\n".join(["", "summary (%s)" % args.out] + report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
