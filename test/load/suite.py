#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The load-test suite: a scenario matrix over this MPM, Debian's stock
prefork and event MPMs and nginx, run interleaved, with a report.

  python3 test/load/suite.py --quick          # CI smoke test, < 2 minutes
  python3 test/load/suite.py --full           # < 15 minutes on 2 cores
  python3 test/load/suite.py --profile=rig    # the rig (rig.py): the server
                                              # and its softirq on CPU 0,
                                              # the generators on CPU 1;
                                              # every configuration, kernel
                                              # events per connection; root
  python3 test/load/suite.py --profile=default --rig  # any profile on it
  python3 test/load/suite.py --profile=16cpu  # the 16-CPU table (scaled
                                              # to the server's CPUs)
  python3 test/load/suite.py --profile=php    # mod_php, mixed cost
  python3 test/load/suite.py --profile=rps    # veth + RPS in a netns
  python3 test/load/suite.py --profile=default  # the package's shipped
                                              # configuration against stock
                                              # prefork, Debian's pool
  python3 test/load/suite.py --profile=anchors --server-cpus 0 \
      --client-cpus 1                         # anchors, floors, CPU/request
  python3 test/load/suite.py --profile=pool   # cost against the pool's size
  python3 test/load/suite.py --profile=workloads  # keep-alive 100, TLS
  python3 test/load/suite.py --profile=linger --mpm-before OLD.so
  python3 test/load/suite.py --profile=bigbox --server-cpus 0-31 \
      --client-cpus 32-63                     # a many-core host
  python3 test/load/suite.py --list           # configurations, scenarios
  python3 test/load/report.py DIR/results.json  # the report again, from
                                              # the published files

Every scenario runs each configuration once per pair, in an order shuffled
anew for each pair (--seed), each run on a freshly started server that is
warmed up with the same load first (--warmup), for the profile's number of
pairs.  The report gives medians with distribution-free 95 % confidence
intervals and per-pair ratios to the baseline (Debian's stock prefork).
Each run records its server's CPU from a cgroup of its own, context
switches, the kernel's TCP counters (nstat: ListenOverflows, ListenDrops
...), softirq and idle time of the server's and the generator's CPUs, the
generator's own errors and lag, and every request's latency (latency/*.gz,
a histogram at 1 us).  A run whose generator failed (EADDRNOTAVAIL, socket
errors, send lag beyond --max-lag-ms) is marked invalid, left out of every
median and never used as a baseline; on the rig, so is a run during
which other processes took over 5 % of a CPU, a fixed-rate run that fell
under 97 % of its rate, and one whose server's accept queue overflowed
(validity.py).  Everything goes to one folder
(--out, default bench-results/suite-<time>): results.json, results.csv,
report.md, the servers' configurations (configs/), the host's state and
the project's commit, and gnuplot charts.  Traffic goes to 127.0.0.1 only,
or, in the rps scenarios and on the rig, over a veth pair between network
namespaces the suite creates and deletes; every run is bounded by
timeouts and every server is stopped on every path.
"""

import argparse
import contextlib
import json
import os
import random
import re
import resource
import signal
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
# test/, for pfbtest (the one bootstrap, see test/pfbtest/__init__.py).
sys.path.insert(0, os.path.dirname(HERE))

from pfbtest import (STOCK_EVENT, MPM_SO,  # noqa: E402
                     MODULES, STATUS_SO, TEST_HANDLER_SO, exit_on_sigterm)
import report  # noqa: E402
import netns  # noqa: E402
import cgroupcpu  # noqa: E402
import hoststate  # noqa: E402
import rig  # noqa: E402
import kevents  # noqa: E402
import latency  # noqa: E402
import validity  # noqa: E402
from servers import (make_server, start_server, server_cpus,  # noqa: E402
                     server_usage, usage_delta, target, make_cert,
                     save_config, php_module, tls_unavailable,
                     rps_unavailable, STATIC_PATH, STATIC_BODY)
from generators import (run_wrk, merge_wrk, run_openloop,  # noqa: E402
                        SlowClients, client_cpus)
from profiles import (PROFILES, SCALED, DEFAULTS, SCENARIOS,  # noqa: E402
                      CONFIG_ORDER, BASELINE, DEFAULT_CONFIGS, configs)
from measures import (distribution, children_memory,  # noqa: E402
                      rps_locality, host_info, syscalls_per_request,
                      pin_children_away, reuse_distance, keep_latencies,
                      thread_counts, thread_delta)


# The pool scenarios' warm-up lasts until nearly every child has served,
# for at most this many seconds per child (warm_pool()).
POOL_WARMUP_PER_CHILD = 0.015
# Scenarios whose errors are the server's result, not a failed generator.
FAULT_SCENARIOS = validity.FAULT_SCENARIOS
# Requests per connection in keepalive100 and the TLS keep-alive scenario,
# on every server (MaxKeepAliveRequests, keepalive_requests, the anchors).
KEEPALIVE_REQUESTS = 100


PHP_SCRIPT = os.path.join(HERE, "php", "mixed.php")
# The php scenario's pool, in any profile (a profile may set php_* keys):
# Debian's stock prefork sizes (StartServers 5, MinSpareServers 5,
# MaxSpareServers 10, MaxRequestWorkers 150), and 8 clients per server CPU,
# well under the cap, so that the pool at the end shows what a mode keeps
# for the load; a warm-up lets the pool grow and PHP's opcache fill first.
PHP_POOL = {"php_workers": 150, "php_start": 5, "php_min_spare": 5,
            "php_max_spare": 10, "php_clients_per_cpu": 8, "php_warmup": 2}
PHP_CONF = ("<FilesMatch \\.php$>\n    SetHandler application/x-httpd-php\n"
            "</FilesMatch>\n")


def server_plan(name, prof, args, scene):
    """What a scenario's server looks like: ports, pool sizes, the address
    it listens on, extra configuration and modules, files to serve."""
    plan = {"ports": 4 if name == "fourports" else 1,
            "workers": prof["workers"],
            "start": prof.get("start", prof["workers"]),
            "host": "127.0.0.1", "conf": "", "modules": "",
            "files": {STATIC_PATH: STATIC_BODY},
            "tls": scene.get("tls"), "keepalive": KEEPALIVE_REQUESTS}
    if name == "hetero" and prof.get("hetero_workers"):
        plan["workers"] = plan["start"] = prof["hetero_workers"]
    # A profile's spare bounds (default: Debian's pool).
    for key in ("min_spare", "max_spare"):
        if prof.get(key):
            plan[key] = prof[key]
    pool = re.fullmatch(r"pool(\d+)", name)
    if pool:
        plan["workers"] = plan["start"] = int(pool.group(1))
    if name == "php":
        php = php_settings(prof)
        plan.update(workers=php["php_workers"], start=php["php_start"],
                    min_spare=php["php_min_spare"],
                    max_spare=php["php_max_spare"], conf=PHP_CONF,
                    modules="LoadModule php_module %s\n" % scene["php_so"])
        with open(PHP_SCRIPT) as f:
            plan["files"]["/mixed.php"] = f.read()
        # Stopping, mod_php's children may take over 3 s to exit, under
        # either prefork: exit() runs every library's destructors and
        # free(), which write to pages shared with the parent, and each
        # copy-on-write fault flushes TLBs on the other CPUs (perf on this
        # 2-CPU VM: 20 children took 2-4 s).  httpd then logs that it
        # sends SIGTERM again; the stop is not what this scenario measures.
        plan["expect"] = ("PFB00051", "AH00045")
    if name.startswith("rps"):
        plan["host"] = scene["veth"].server_addr
    if args.rig:
        plan["host"] = args.rig.server_addr
    return plan


def php_settings(prof):
    return {k: prof.get(k, v) for k, v in PHP_POOL.items()}


def php_clients(prof, args):
    return php_settings(prof)["php_clients_per_cpu"] * len(server_cpus(args))


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------------------
# Scenarios: each returns the load result of one run on a started server.

def with_faults(srv, seconds, action, period=1.0):
    """Calls action(srv) every period seconds for `seconds`, in a thread."""
    stop = threading.Event()
    count = [0]

    def loop():
        while not stop.wait(period):
            try:
                action(srv)
                count[0] += 1
            except (OSError, IndexError):
                pass
    t = threading.Thread(target=loop, daemon=True)
    t.start()

    def finish():
        stop.set()
        t.join(5)
        return count[0]
    return finish


def kill_random_child(srv):
    kids = srv.children()
    os.kill(random.choice(kids), signal.SIGKILL)


def scenario_run(name, srv, cfg, args, prof, scene, log, secs=None):
    """The load of one run (or of its warm-up, with secs)."""
    conns = prof["connections"]
    secs = secs or prof["seconds"]
    url = target(srv, cfg, scene)
    if re.fullmatch(r"(open|fixed)\d+", name):
        return run_openloop(args, url, "%d:%d" % (secs, scene["rate"]),
                            log=log)
    if name == "rate":
        return run_openloop(args, url, "%d:%d" % (secs, prof["open_rate"]),
                            log=log)
    if name == "php":
        return run_php(srv, args, prof, log, secs)
    if name.startswith("rps"):
        return run_wrk(args, url, conns, secs, log=log, where=scene["veth"])
    if name in ("static-close", "tls-close") or name.startswith("pool"):
        return run_wrk(args, url, conns, secs, log=log)
    if name in ("static-keepalive", "keepalive100", "tls-keepalive"):
        return run_wrk(args, url, conns, secs, close=False, log=log)
    if name == "fourports":
        results = [None] * 4

        def one(i):
            results[i] = run_wrk(args, target(srv, cfg, scene, i),
                                 max(1, conns // 4), secs, log=log)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(secs + 90)
        return merge_wrk([r for r in results if r])
    if name == "hetero":
        clients = prof.get("hetero_clients") or \
            int((prof.get("hetero_workers") or prof["workers"]) * 1.5)
        return run_wrk(args, target(srv, cfg, scene, path="/pfb-test"),
                       clients, secs, exp_ms=10, log=log)
    if name == "openloop":
        return run_openloop(args, url, "%d:%d" % (secs, prof["open_rate"]),
                            log=log)
    if name == "bursts":
        on = "1:%d" % (prof["open_rate"] * 2)
        return run_openloop(args, url,
                            ",".join([on, "1:0"] * max(1, secs - 1)),
                            log=log)
    if name == "slowloris":
        with SlowClients(srv.ports[0], prof["slow_clients"]):
            return run_wrk(args, url, conns, secs, log=log)
    if name in ("graceful", "kills"):
        fault = (lambda s: s.graceful()) if name == "graceful" \
            else kill_random_child
        fault_secs = min(secs, prof["fault_seconds"])
        finish = with_faults(srv, fault_secs, fault,
                             2.0 if name == "graceful" else 1.0)
        result = run_wrk(args, url, conns, fault_secs, log=log)
        result["faults"] = finish()
        return result
    raise ValueError(name)


def run_php(srv, args, prof, log, secs=None):
    """mixed.php over Connection: close (after warm_up)."""
    return run_wrk(args, srv.url("/mixed.php"), php_clients(prof, args),
                   secs or prof["seconds"], log=log)


# What the anchors serve: the static file's bytes, plain HTTP, one Listen.
ANCHOR_SCENARIOS = ("static-close", "static-keepalive", "keepalive100",
                    "rate", "openloop", "bursts", "slowloris")


def scenario_skips(name, cfg, args=None):
    """Why a configuration cannot run a scenario, or None."""
    if cfg.get("extra") == "ListenBuckets 0\n":
        return "ListenBuckets 0 is the default's arrangement"
    if cfg.get("extra") == "ListenBuckets 1\n" and name != "fourports":
        return "with one Listen, ListenBuckets 1 is the default's arrangement"
    if cfg["kind"] == "anchor" and name not in ANCHOR_SCENARIOS \
            and not re.fullmatch(r"(open|fixed)\d+", name):
        return "the anchors answer the static file over plain HTTP only"
    if cfg["kind"] == "apache" and not cfg.get("mpm"):
        return "no --mpm-before given"
    if cfg.get("needs") and not os.path.exists(cfg["mpm"]):
        return "not built (%s)" % cfg["needs"]
    if name.startswith("pool") and (cfg["kind"] != "apache"
                                    or cfg.get("mpm") == STOCK_EVENT):
        return "the pool scenarios compare prefork pools"
    if cfg["kind"] == "nginx" and name == "hetero":
        return "nginx has no test handler for service times"
    if name == "php" and (cfg["kind"] == "nginx"
                          or cfg.get("mpm") == STOCK_EVENT
                          or cfg.get("path")):
        return "Debian's mod_php needs a prefork MPM"
    if name.startswith("rps") and cfg["kind"] == "nginx":
        return "the rps scenarios compare the MPM's steering modes"
    return None


def one_run(name, key, cfg, args, prof, log, scene=None, out_dir=None,
            pair=0):
    """One measured run on a freshly started, warmed-up server."""
    scene = scene or {}
    plan = server_plan(name, prof, args, scene)
    quiet = rig.wait_quiet(args.rig, prof.get("quiet_wait", 0),
                           args.max_foreign_cpu, log) if args.rig else None
    tag = "%s-%s-%d" % (key, name, pair)
    with cgroupcpu.ServerCgroup(tag) as cgroup, \
            cgroupcpu.ServerCgroup(tag + "-gen") as gen_cgroup:
        with make_server(cfg, args, plan, cgroup) as srv:
            start_server(srv, cfg, plan)
            if cfg.get("away"):
                pin_children_away(srv, args, log)
            args.generator_wrapper = gen_cgroup.wrapper() if args.rig \
                else None
            warmed = warm_up(name, srv, cfg, args, prof, scene, log)
            if out_dir and pair <= 1:
                save_config(srv, key, name, out_dir)
            use0 = server_usage(srv.proc.pid)
            cg0 = cgroup.usage()
            gen0 = children_cpu()
            kernel = hoststate.Counters(server_cpus(args),
                                        client_cpus(args)).start()
            host0 = args.rig.sample([cgroup.path, gen_cgroup.path]) \
                if args.rig else None
            started = time.time()
            result = scenario_run(name, srv, cfg, args, prof, scene, log)
            elapsed = time.time() - started
            if args.rig:
                result["rig"] = rig.foreign(
                    host0, args.rig.sample([cgroup.path, gen_cgroup.path]),
                    server_cpus(args), client_cpus(args))
                result["rig"]["quiet_wait"] = quiet
            args.generator_wrapper = None
            result["kernel"] = kernel.stop()
            result["warmup"] = warmed
            cg1 = cgroup.usage()
            use = usage_delta(use0, server_usage(srv.proc.pid))
            # The pool as the load left it, before idle children are reaped.
            kids = srv.children()
            result["children_end"] = len(kids)
            result["memory"] = children_memory(kids)
            result["server_cpu_cgroup"] = cgroupcpu.delta(cg0, cg1)
            result["server_cpu_proc_s"] = round(use["cpu"], 2)
            # The cgroup's count where there is one: it includes children
            # that exited during the run and every thread.
            result["server_cpu_s"] = result["server_cpu_cgroup"]["total"] \
                if result["server_cpu_cgroup"] else result["server_cpu_proc_s"]
            if args.rig and result["rig"]["foreign_server_s"] is not None:
                # What the server's CPUs did, softirq included, less what
                # others ran there (report.cpu_us_per_request).
                result["server_cpus_s"] = round(
                    result["rig"]["server_cpus_busy_s"]
                    - result["rig"]["foreign_server_s"], 4)
            result["loadgen_cpu_s"] = round(children_cpu() - gen0, 2)
            result["ctx_voluntary"] = use["voluntary"]
            result["ctx_switches"] = use["voluntary"] + use["nonvoluntary"]
            result["minor_faults"] = use["minflt"]
            result["elapsed_s"] = round(elapsed, 2)
            # The server logs a request after its response is out.
            if not cfg.get("path"):
                srv.wait_access_log(result.get("requests", 0), timeout=30)
            result["distribution"] = distribution(srv, cfg, scene)
            if name.startswith("rps"):
                result["rps_cpus"] = scene["veth"].rps_cpus
                result["rps_local_share"] = rps_locality(result, args, scene)
    # Read at the stop, so that what stopping logs is counted too.
    result["log_problems"] = srv.log_problems[:20]
    keep_latencies(result, name, key, pair, out_dir)
    result["invalid"] = judge_run(name, result, args)
    return result


def judge_run(name, result, args):
    """Why a run cannot be used (validity.py), with --max-lag-ms and
    --max-foreign-cpu."""
    return validity.judge_run(name, result, args.max_lag_ms,
                              args.max_foreign_cpu)


def warm_up(name, srv, cfg, args, prof, scene, log):
    """The same load before the measured run, on the same server, not
    counted: the pool has grown and caches are warm (php: PHP's opcache
    too).  Fault scenarios start cold: their faults are the load.
    Returns what the warm-up did, for the run's record."""
    warmup = php_settings(prof)["php_warmup"] if name == "php" \
        else prof.get("warmup", 0)
    if not warmup or name in FAULT_SCENARIOS + ("graceful", "kills"):
        return {}
    pool = re.fullmatch(r"pool(\d+)", name)
    if pool:
        return warm_pool(int(pool.group(1)), name, srv, cfg, args, prof,
                         scene, log, warmup)
    log.write("# warm-up, %s s, not counted\n" % warmup)
    scenario_run(name, srv, cfg, args, prof, scene, log, secs=warmup)
    return {"seconds": warmup}


def warm_pool(size, name, srv, cfg, args, prof, scene, log, warmup):
    """A child's first requests pay for its copy-on-write faults and its
    pools' first allocations (several ms each on the development VM): a
    pool is warm once every child the load uses has served (the access
    log's pids), which a fixed time cannot promise at every machine's
    rate.  Loads in rounds of `warmup` seconds until 90 % of the children
    have served, or a round brought no child that had not served before
    (a server that gives connections to the children that served last
    uses only some of its pool), for at most POOL_WARMUP_PER_CHILD
    seconds per child."""
    started = time.time()
    cap = max(warmup, size * POOL_WARMUP_PER_CHILD)
    served = -1
    while True:
        scenario_run(name, srv, cfg, args, prof, scene, log, secs=warmup)
        before, served = served, len({
            l.split()[1] for l in srv.access_log_lines()
            if len(l.split()) > 2 and l.split()[1].isdigit()})
        if served >= 0.9 * size or served == before \
                or time.time() - started >= cap:
            break
    took = round(time.time() - started, 1)
    log.write("# warm-up: %d of %d children served in %s s, not counted\n"
              % (served, size, took))
    return {"seconds": took, "children_served": served}


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", dest="profile",
                      const="quick")
    size.add_argument("--full", action="store_const", dest="profile",
                      const="full")
    size.add_argument("--profile", choices=sorted(PROFILES))
    parser.add_argument("--configs", help="comma-separated subset of %s"
                        % ",".join(CONFIG_ORDER))
    parser.add_argument("--scenarios", help="comma-separated subset; none: "
                        "only the sampled passes (strace, kernel events)")
    parser.add_argument("--pairs", type=int, help="override the profile")
    parser.add_argument("--seconds", type=int, help="override the profile")
    parser.add_argument("--buckets", type=int,
                        help="N for the ListenBuckets N configurations "
                        "(default 4; one per server CPU in the 16cpu, php "
                        "and rps profiles)")
    parser.add_argument("--server-cpus", help="taskset CPU list for servers")
    parser.add_argument("--client-cpus",
                        help="taskset CPU list for load generators")
    parser.add_argument("--workers", type=int,
                        help="MaxRequestWorkers (= StartServers unless the "
                        "profile sets them apart); hetero runs 1.5 clients "
                        "per worker")
    parser.add_argument("--connections", type=int,
                        help="wrk connections for the static scenarios")
    parser.add_argument("--wrk-threads", type=int,
                        help="wrk threads (default: the profile's, else "
                        "CPUs, at most 4); with cpu steering on loopback, "
                        "connections come in on the CPUs the generator "
                        "runs on")
    parser.add_argument("--scale", type=float,
                        help="multiply a scaled profile's sizes (16cpu) by "
                        "this; default: server CPUs / the profile's CPUs, "
                        "where that is below 1")
    parser.add_argument("--rps-cpus",
                        help="rps: CPU list RPS spreads flows over (default "
                        "the server's CPUs; rps-half: their lower half)")
    parser.add_argument("--no-strace", action="store_true",
                        help="skip the sampled strace -c -f runs")
    parser.add_argument("--rate", type=int,
                        help="the open-loop rate of rate, openloop and "
                        "bursts (req/s; default: the profile's, scaled)")
    parser.add_argument("--warmup", type=float,
                        help="seconds of the same load before each measured "
                        "run, on the same server (default: the profile's)")
    parser.add_argument("--seed", default=None,
                        help="seed of the run order within each pair "
                        "(default: the time; recorded in results.json)")
    parser.add_argument("--max-lag-ms", type=float, default=5.0,
                        help="open-loop runs whose generator sent late by "
                        "more than this at p99 are invalid (default 5)")
    parser.add_argument("--rig", action="store_true", dest="use_rig",
                        help="run on the rig (rig.py; the rig profile "
                        "does): the server and its receive softirq on "
                        "--server-cpus (default 0) in a network namespace "
                        "of its own, the generators on --client-cpus "
                        "(default 1); needs root")
    parser.add_argument("--quiet-wait", type=float,
                        help="rig: seconds each run may wait for a quiet "
                        "host (default: the profile's, 120 in rig, else 0)")
    parser.add_argument("--max-foreign-cpu", type=float,
                        default=validity.MAX_FOREIGN_CPU,
                        help="rig: runs during which other processes took "
                        "more than this share of a CPU are invalid "
                        "(default 0.05)")
    parser.add_argument("--max-pairs", type=int,
                        help="run further pairs, up to this many, until "
                        "--pairs of them have a valid run of every "
                        "configuration (default: the profile's, 12 in rig)")
    parser.add_argument("--delay-ms", type=float,
                        help="rig: between the generator and the server, "
                        "a delay line (build/delayline) in place of the "
                        "veth pair, which passes what the server sends "
                        "this many ms late, as a client on another "
                        "network sees it; 0: the same path, undelayed")
    parser.add_argument("--no-kevents", action="store_true",
                        help="rig: skip the kernel-event pass")
    parser.add_argument("--kevent-rate", type=int,
                        help="rig: the kernel-event pass's rate (default: "
                        "fixed50's, else the profile's kevent_rate)")
    parser.add_argument("--kevent-rounds", type=int,
                        help="rig: rounds of the kernel-event pass (default: "
                        "the profile's, 2)")
    parser.add_argument("--kevent-pools",
                        help="rig: the pool sizes of the kernel-event pass, "
                        "comma-separated (default: the profile's, 64,512)")
    parser.add_argument("--mpm-before", metavar="SO",
                        help="the MPM built from an earlier commit, as "
                        "configuration pfb-1-before")
    parser.add_argument("--conf-base", choices=("debian", "bare"),
                        default="debian",
                        help="every httpd configuration with Debian's "
                        "apache2.conf defaults (default), or without")
    parser.add_argument("--make-cert", metavar="DIR",
                        help="only make the TLS scenarios' test certificate "
                        "in DIR (for a kit without openssl) and exit")
    parser.add_argument("--out")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    args.rig = None             # the rig.Rig while a rig profile runs
    args.generator_wrapper = None
    if args.seed is None:
        args.seed = str(int(time.time()))
    return args


def profile_settings(args):
    """The profile, scaled to the server's CPUs and with the command
    line's overrides; resolves --buckets and --wrk-threads."""
    prof = dict(DEFAULTS, **PROFILES[args.profile or "quick"])
    if args.use_rig or prof.get("rig"):
        prof["rig"] = True
        # A busy spell costs pairs: the rig goes on until enough are valid.
        prof.setdefault("max_pairs", 2 * prof["pairs"])
        args.server_cpus = args.server_cpus or "0"
        args.client_cpus = args.client_cpus or "1"
    if args.kevent_rounds:
        prof["kevent_rounds"] = args.kevent_rounds
    if args.kevent_pools:
        prof["kevent_pools"] = [int(n) for n in args.kevent_pools.split(",")]
    if args.quiet_wait is not None:
        prof["quiet_wait"] = args.quiet_wait
    elif prof.get("rig"):
        prof.setdefault("quiet_wait", 120)
    ncpus = len(server_cpus(args))
    scale = 1.0
    if "cpus" in prof:
        scale = args.scale or min(1.0, ncpus / float(prof["cpus"]))
        for k in SCALED:
            if k in prof:
                prof[k] = max(1, int(round(prof[k] * scale)))
    prof["scale"] = scale
    if args.pairs:
        prof["pairs"] = prof["fault_pairs"] = args.pairs
        prof["max_pairs"] = None        # --max-pairs to go on
    if args.max_pairs:
        prof["max_pairs"] = args.max_pairs
    if args.seconds:
        prof["seconds"] = args.seconds
    if args.workers:
        prof["workers"] = args.workers
        if prof.get("start", 0) > args.workers:
            prof["start"] = args.workers
    if prof.get("connections_per_cpu"):
        prof["connections"] = prof["connections_per_cpu"] * ncpus
    if args.connections:
        prof["connections"] = args.connections
    if args.warmup is not None:
        prof["warmup"] = args.warmup
    if args.rate:
        prof["open_rate"] = args.rate
    if args.buckets is None:
        args.buckets = ncpus if prof.get("buckets") == "cpus" \
            else prof.get("buckets") or 4
    prof["buckets"] = args.buckets
    if args.wrk_threads is None and prof.get("wrk_threads"):
        args.wrk_threads = min(prof["wrk_threads"], prof["connections"])
    return prof


@contextlib.contextmanager
def scenario_scene(name, doc, keys, all_configs, args, prof, log, out_dir):
    """What a scenario needs around all its runs: openNN the rate (from
    stock event's static-close req/s in this run, measured now if the run
    has none), php the module, rps the namespace with RPS set, tls the
    test certificate.  Yields None, with a reason in doc, when the scenario
    cannot run here."""
    scene = {}
    if name.startswith("tls-"):
        why = tls_unavailable()
        if why:
            doc["unavailable"][name] = why
            yield None
            return
        scene["tls"] = make_cert(os.environ.get("PFB_BENCH_CERT_DIR")
                                 or os.path.join(out_dir, "tls"))
        doc["tls"] = {"certificate": "self-signed ECDSA P-256 (openssl req "
                      "-x509 -newkey ec -pkeyopt ec_paramgen_curve:"
                      "prime256v1)", "client": "wrk (OpenSSL), a full "
                      "handshake on every new connection"}
    m = re.fullmatch(r"open(\d+)", name)
    if m:
        capacity = event_capacity(doc, all_configs, args, prof, log)
        scene["rate"] = max(1, int(capacity * int(m.group(1)) / 100.0))
        doc.setdefault("open_rates", {})[name] = scene["rate"]
        print("%s: %d req/s (%s %% of stock event's %.0f)"
              % (name, scene["rate"], m.group(1), capacity))
    m = re.fullmatch(r"fixed(\d+)", name)
    if m:
        slowest = slowest_peak(doc, keys)
        if slowest is None:
            doc["unavailable"][name] = ("needs static-close before it in the "
                                        "same run (its rate is a share of "
                                        "the slowest configuration's peak)")
            yield None
            return
        key, peak, stalled = slowest
        scene["rate"] = max(1, int(peak * int(m.group(1)) / 100.0))
        doc.setdefault("open_rates", {})[name] = scene["rate"]
        doc.setdefault("fixed_basis", {})[name] = {"config": key,
                                                   "peak": peak,
                                                   "stalled": stalled}
        print("%s: %d req/s (%s %% of %s's peak, %.0f, the slowest%s)"
              % (name, scene["rate"], m.group(1), key, peak,
                 "; its closed loop stalled" if stalled else ""))
    if name == "php":
        scene["php_so"] = php_module()
        if not scene["php_so"]:
            doc["unavailable"][name] = ("no libphp*.so in %s: apt-get "
                                        "install libapache2-mod-php" % MODULES)
            yield None
            return
    if name.startswith("rps"):
        why = rps_unavailable()
        if why:
            doc["unavailable"][name] = why
            yield None
            return
        with netns.VethPair(log) as veth:
            veth.set_rps(rps_cpu_set(name, args))
            scene["veth"] = veth
            print("%s: server on %s, generator in netns %s, RPS CPUs %s"
                  % (name, veth.server_addr, veth.ns, veth.rps_cpus))
            yield scene
        return
    yield scene


def slowest_peak(doc, keys):
    """(configuration, median static-close req/s, stalled) of the slowest
    configuration in this run, or None.  Its valid runs count; where a
    configuration has none, its runs that are invalid only because the
    closed loop stalled (validity.only_stalled: on a virtual machine a
    process-per-connection server can leave both CPUs idle at its peak)
    count too, and stalled says so: a stall only makes the peak lower, so
    a share of it is still below the server's saturation, and each
    fixed-rate run is judged by its own rules."""
    peaks = []
    for key in keys:
        runs = [r for r in doc["runs"] if r["scenario"] == "static-close"
                and r["config"] == key and "skipped" not in r]
        valid = [r for r in runs if not r.get("invalid")]
        stalled = not valid
        if stalled:
            valid = [r for r in runs if r.get("invalid")
                     and validity.only_stalled(r["invalid"])]
        if valid:
            peaks.append((statistics.median(r["rps"] for r in valid), key,
                          stalled))
    if not peaks:
        return None
    peak, key, stalled = min(peaks)
    return key, peak, stalled


def event_capacity(doc, all_configs, args, prof, log):
    """Stock event's closed-loop static-close req/s in this run (median),
    measured once now when the run has none."""
    runs = [r for r in doc["runs"] if r["scenario"] == "static-close"
            and r["config"] == "event" and "skipped" not in r
            and not r.get("invalid")]
    if not runs:
        cfg = dict(all_configs["event"], key="event")
        log.write("\n### capacity: stock event, static-close\n")
        result = one_run("static-close", "event", cfg, args, prof, log)
        result.update({"scenario": "capacity", "config": "event",
                       "pair": 1})
        if result["invalid"]:
            print("capacity run invalid (%s); its rate is used anyway"
                  % "; ".join(result["invalid"]))
        doc["runs"].append(result)
        runs = [result]
    return statistics.median(r["rps"] for r in runs)


def rps_cpu_set(name, args):
    cpus = netns.cpu_list(args.rps_cpus) if args.rps_cpus \
        else server_cpus(args)
    if name == "rps-half" and not args.rps_cpus:
        cpus = cpus[:max(1, len(cpus) // 2)]
    return cpus


def complete_pairs(doc, name, keys):
    """How many pairs of a scenario have a valid run of every
    configuration."""
    valid = {}
    for r in doc["runs"]:
        if r["scenario"] == name and r["config"] in keys \
                and "skipped" not in r and not r.get("invalid"):
            valid.setdefault(r["pair"], set()).add(r["config"])
    return sum(1 for got in valid.values() if got >= set(keys))


def run_scenario(name, doc, keys, all_configs, args, prof, log, out_dir):
    """Every pair: each configuration once, in an order shuffled anew for
    the pair (seeded by --seed, the scenario and the pair), so that no
    configuration always follows the same one.  With max_pairs above
    pairs (the rig's), pairs go on until `pairs` of them have a valid run
    of every configuration, or max_pairs have run: a busy spell of the
    host costs a pair, not the figure."""
    pairs = prof.get("fault_pairs", prof["pairs"]) \
        if name in ("graceful", "kills") else prof["pairs"]
    max_pairs = max(pairs, prof.get("max_pairs") or pairs)
    with scenario_scene(name, doc, keys, all_configs, args, prof, log,
                        out_dir) as scene:
        if scene is None:
            print("%s: skipped, %s" % (name, doc["unavailable"][name]))
            return
        runnable = []
        for key in keys:
            why = scenario_skips(name, all_configs[key], args)
            if why:
                doc["runs"].append({"scenario": name, "config": key,
                                    "pair": 0, "skipped": why})
            else:
                runnable.append(key)
        for pair in range(max_pairs):
            if pair >= pairs and complete_pairs(doc, name, runnable) >= pairs:
                break
            order = list(runnable)
            random.Random("%s/%s/%d" % (args.seed, name, pair)).shuffle(order)
            for position, key in enumerate(order):
                cfg = all_configs[key]
                log.write("\n### %s pair %d %s\n" % (name, pair + 1, key))
                result = one_run(name, key, cfg, args, prof, log, scene,
                                 out_dir, pair + 1)
                result.update({"scenario": name, "config": key,
                               "pair": pair + 1, "position": position})
                doc["runs"].append(result)
                save_progress(doc, out_dir)
                log.flush()
                print("%-16s pair %d  %-40s rps %8.1f  p99 %7.1f ms  "
                      "errors %s%s" % (name, pair + 1, cfg["label"][:40],
                                       result.get("rps", 0.0),
                                       result.get("p99", float("nan")),
                                       sum(result["errors"].values()),
                                       "  INVALID: " + "; ".join(
                                           result["invalid"])
                                       if result["invalid"] else ""))
                sys.stdout.flush()


def save_progress(doc, out_dir):
    """results.json after every run, so that a run cut short (a crash, a
    lease that ends) keeps what it measured; report.py reads it."""
    path = os.path.join(out_dir, "results.json")
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)


def stop_on_sigterm():
    """SIGTERM (timeout, kill) unwinds like Ctrl-C, through every `with`
    that stops a server or deletes the namespace."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def main():
    args = parse_args()
    exit_on_sigterm()
    if args.make_cert:
        print("certificate: %s, key: %s" % make_cert(args.make_cert))
        return 0
    prof = profile_settings(args)
    all_configs = configs(args)
    if args.list:
        for key in CONFIG_ORDER:
            print("%-23s %s" % (key, all_configs[key]["label"]))
        print("scenarios: %s" % ", ".join(SCENARIOS))
        print("profiles: %s" % ", ".join(sorted(PROFILES)))
        return 0
    keys = args.configs.split(",") if args.configs \
        else prof.get("configs", DEFAULT_CONFIGS)
    scenarios = args.scenarios.split(",") if args.scenarios \
        else prof["scenarios"]
    if scenarios == ["none"]:
        scenarios = []          # the sampled passes only (strace, kevents)
    for key in keys:
        if key not in all_configs:
            print("unknown configuration %s (--list)" % key)
            return 2
        all_configs[key]["key"] = key
    out_dir = args.out or os.path.join(
        TOP, "bench-results", "suite-%s" % time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    for so in (MPM_SO, STATUS_SO, TEST_HANDLER_SO):
        if not os.path.exists(so):
            print("missing %s: run make first" % so)
            return 2
    stop_on_sigterm()
    started = time.time()
    doc = {"host": host_info(), "host_state": hoststate.host_state(),
           "profile": args.profile or "quick",
           "settings": prof, "configs": {k: all_configs[k]["label"]
                                         for k in keys},
           "baseline": BASELINE, "runs": [], "syscalls": {},
           "buckets": args.buckets, "unavailable": {},
           "php": dict(php_settings(prof), clients=php_clients(prof, args)),
           "server_cpus": server_cpus(args),
           "client_cpus": client_cpus(args),
           "seed": args.seed, "conf_base": args.conf_base,
           "max_lag_ms": args.max_lag_ms,
           "max_foreign_cpu": args.max_foreign_cpu,
           "command": " ".join([os.path.basename(sys.argv[0])]
                               + sys.argv[1:])}
    print("host: %s" % json.dumps(doc["host"]))
    print("commit %s, seed %s" % (doc["host_state"]["commit"], args.seed))
    if prof["scale"] != 1.0:
        print("profile %s scaled by %g to %d server CPUs: %s"
              % (doc["profile"], prof["scale"], len(doc["server_cpus"]),
                 ", ".join("%s %s" % (k, prof[k]) for k in SCALED
                           if k in prof)))
    with open(os.path.join(out_dir, "raw.log"), "w") as log:
        log.write("$ %s\n" % " ".join([sys.executable] + sys.argv))
        if prof.get("rig"):
            with rig.Rig(server_cpus(args), client_cpus(args), log,
                         args.delay_ms) as r:
                args.rig = r
                doc["rig"] = r.describe()
                doc["rig"]["host_at_start"] = rig.host_load()
                print("rig: server on CPUs %s in netns %s (%s), generators "
                      "on CPUs %s" % (doc["rig"]["server_rps_cpus"],
                                      r.veth.server_ns, r.server_addr,
                                      doc["rig"]["client_rps_cpus"]))
                run_all(doc, keys, scenarios, all_configs, args, prof, log,
                        out_dir)
            # What the delay line passed, and how late (--delay-ms).
            doc["rig"]["delay_line"] = getattr(r.veth, "line_result", None)
            args.rig = None
        else:
            run_all(doc, keys, scenarios, all_configs, args, prof, log,
                    out_dir)
    doc["elapsed_s"] = round(time.time() - started, 1)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    report.write_csv(doc, os.path.join(out_dir, "results.csv"))
    report.write_report(doc, out_dir)
    if "hetero" in scenarios:
        report.write_sim_report(doc, prof, keys, out_dir)
    print("\nreport: %s (%.0f s)" % (os.path.join(out_dir, "report.md"),
                                      doc["elapsed_s"]))
    return 0


def run_all(doc, keys, scenarios, all_configs, args, prof, log, out_dir):
    """Every scenario's pairs, then the sampled passes: strace's system
    calls, the rig's kernel events."""
    # One discarded run first: the first server after a while pays for a
    # cold page cache and a fork storm, which is not a configuration's
    # doing.
    first = next((k for k in keys if not scenario_skips(
        "static-close", all_configs[k], args)), None)
    if first:
        one_run("static-close", first, all_configs[first], args,
                dict(prof, seconds=1, warmup=0), log)
    for name in scenarios:
        run_scenario(name, doc, keys, all_configs, args, prof, log, out_dir)
    want_strace = not args.no_strace and (
        prof.get("strace") or args.profile in ("full", "bigbox"))
    for key in keys if want_strace else []:
        if scenario_skips("static-close", all_configs[key], args):
            continue
        doc["syscalls"][key] = syscalls_per_request(
            all_configs[key], args,
            server_plan("static-close", prof, args, {}), out_dir, log)
        print("syscalls/request %-13s %s %s" % (
            key, doc["syscalls"][key].get("per_request"),
            doc["syscalls"][key].get("top")))
    if args.rig and prof.get("kevent_pools") and not args.no_kevents:
        kernel_event_pass(doc, keys, all_configs, args, prof, log, out_dir)


def kernel_event_pass(doc, keys, all_configs, args, prof, log, out_dir):
    """Kernel events per connection (kevents.py) for each configuration at
    --kevent-rate, else the fixed50 rate, else the profile's kevent_rate:
    with each pool size of the profile's kevent_pools for the prefork
    servers and the blocking anchor (whose cost may grow with the pool),
    with the first for the others; each on a fresh server warmed up at
    the same rate, with the reuse distance from its access log.  Counts
    are the same from round to round; NET_RX time is a duration, so the
    pass runs kevent_rounds rounds, each in an order shuffled anew, and
    keeps every round (kevents.summarize_rounds gives the medians)."""
    why = kevents.unavailable()
    if why:
        doc["unavailable"]["kevents"] = why
        print("kernel events: not run: %s" % why)
        return
    rate = args.kevent_rate or doc.get("open_rates", {}).get("fixed50") \
        or prof["kevent_rate"]
    doc["kevents"] = {"rate": rate, "seconds": prof["kevent_seconds"],
                      "rounds": prof.get("kevent_rounds", 1), "configs": {}}
    cases = []
    for key in keys:
        cfg = dict(all_configs[key], key=key)
        if scenario_skips("static-close", cfg, args):
            continue
        pooled = (cfg["kind"] == "apache" and cfg.get("mpm") != STOCK_EVENT) \
            or cfg.get("binary") == "anchor_blocking"
        cases += [(key, cfg, pool) for pool in (
            prof["kevent_pools"] if pooled else prof["kevent_pools"][:1])]
    for round_no in range(doc["kevents"]["rounds"]):
        order = list(cases)
        random.Random("%s/kevents/%d" % (args.seed, round_no)).shuffle(order)
        for key, cfg, pool in order:
            one = kernel_event_run(key, cfg, pool, rate, args, prof, log,
                                   out_dir if round_no == 0 else None)
            doc["kevents"]["configs"].setdefault(key, {}).setdefault(
                str(pool), []).append(one)
            save_progress(doc, out_dir)
            print("kevents %-13s %4d children: %s" % (
                key, pool, one.get("error") or ", ".join(
                    "%s %.2f" % (k, v) for k, v in
                    sorted(one["per_connection"].items()) if v is not None)))


def kernel_event_run(key, cfg, pool, rate, args, prof, log, out_dir=None):
    """One server with `pool` children (prefork) at `rate`: its kernel
    events, counted from tracepoints around an open-loop run.  With
    out_dir, the server's configuration goes to its configs/."""
    pool_prof = dict(prof, workers=pool, start=pool)
    plan = server_plan("kevents", pool_prof, args, {})
    secs = prof["kevent_seconds"]
    log.write("\n### kevents %s, %d children, %d req/s\n" % (key, pool, rate))
    tag = "%s-kevents-%d" % (key, pool)
    with cgroupcpu.ServerCgroup(tag) as cgroup, \
            cgroupcpu.ServerCgroup(tag + "-gen") as gen_cgroup:
        with make_server(cfg, args, plan, cgroup) as srv:
            start_server(srv, cfg, plan)
            if out_dir:
                save_config(srv, key, "kevents-%d" % pool, out_dir)
            args.generator_wrapper = gen_cgroup.wrapper()
            url = target(srv, cfg, {})
            run_openloop(args, url, "%d:%d" % (max(1, prof.get("warmup", 1)),
                                               rate), log=log)
            if not cfg.get("path"):
                srv.wait_access_log(1, timeout=30)
            logged = len(srv.access_log_lines())
            kids = srv.children()
            threads0 = thread_counts(kids)
            host0 = args.rig.sample([cgroup.path, gen_cgroup.path])
            # The counter on the generator's CPUs, in its cgroup: what it
            # spends is not the host's other work.
            with kevents.KernelEvents(
                    os.path.join(cgroup.path or "", "tasks"),
                    server_cpus(args), gen_cgroup.wrapper()
                    + ["taskset", "-c", args.client_cpus], log) as ke:
                result = run_openloop(args, url, "%d:%d" % (secs, rate),
                                      log=log)
            host = rig.foreign(host0, args.rig.sample(
                [cgroup.path, gen_cgroup.path]), server_cpus(args))
            threads1 = thread_counts(kids)
            args.generator_wrapper = None
            if not cfg.get("path"):
                srv.wait_access_log(logged + result.get("requests", 0),
                                    timeout=30)
            # The reuse distance of the measured requests only.
            lines = srv.access_log_lines()[logged:]
    one = {"requests": result.get("requests", 0),
           "offered_rate": result.get("offered_rate"),
           "rate": result.get("rps"), "errors": result.get("errors", {}),
           "send_lag_p99": result.get("send_lag_p99"),
           "counts": ke.result, "log_problems": srv.log_problems[:20],
           "foreign_cpus": host["foreign_cpus"]}
    one.update(reuse_distance(lines))
    # Little's law: connections in the server at once, on average.
    mean_s = latency.mean_ms(result.get("hist") or {}) / 1e3
    if result.get("rps") and mean_s == mean_s:
        one["concurrency"] = round(result["rps"] * mean_s, 2)
    one["invalid"] = validity.judge_run("kevents", dict(
        result, generator="openloop"), args.max_lag_ms, 1.0)
    if "error" in ke.result:
        one["error"] = ke.result["error"]
    one["per_connection"] = kevents.per_connection(
        ke.result, ke.result.get("accepts") or one["requests"],
        one["requests"])
    # Per thread, from /proc: the children alive throughout (the pool is
    # fixed), their main threads against their lingering threads.
    one["per_connection"].update(thread_delta(
        threads0, threads1, one["requests"],
        ke.result.get("accepts") or one["requests"]))
    return one


if __name__ == "__main__":
    sys.exit(main())
