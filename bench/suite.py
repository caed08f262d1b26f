#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The load-test suite: a scenario matrix over this MPM, Debian's stock
prefork and event MPMs and nginx, run interleaved, with a report.

  python3 bench/suite.py --quick          # CI smoke test, < 2 minutes
  python3 bench/suite.py --full           # < 15 minutes on 2 cores
  python3 bench/suite.py --profile=rig    # the rig (rig.py): the server
                                              # and its softirq on CPU 0,
                                              # the generators on CPU 1;
                                              # every configuration, kernel
                                              # events per connection; root
  python3 bench/suite.py --profile=default --rig  # any profile on it
  python3 bench/suite.py --profile=16cpu  # the 16-CPU table (scaled
                                              # to the server's CPUs)
  python3 bench/suite.py --profile=php    # mod_php, mixed cost
  python3 bench/suite.py --profile=rps    # veth + RPS in a netns
  python3 bench/suite.py --profile=default  # the package's shipped
                                              # configuration against stock
                                              # prefork, Debian's pool
  python3 bench/suite.py --profile=anchors --server-cpus 0 \
      --client-cpus 1                         # anchors, floors, CPU/request
  python3 bench/suite.py --profile=pool   # cost against the pool's size
  python3 bench/suite.py --profile=workloads  # keep-alive 100, TLS
  python3 bench/suite.py --profile=linger --mpm-before OLD.so
  python3 bench/suite.py --profile=bigbox --server-cpus 0-31 \
      --client-cpus 32-63                     # a many-core host
  python3 bench/suite.py --list           # configurations, scenarios
  python3 bench/report.py DIR/results.json  # the report again, from
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
timeouts and every server is stopped on every path.  --pack, on a
campaign's last command, gives the folder its published shape (pack.py:
what a reader does not open goes into raw.tar.xz).
"""

import argparse
import contextlib
import json
import os
import random
import re
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, ".."))
# test/, for pfbtest (the one bootstrap, see test/pfbtest/__init__.py).
sys.path.insert(0, os.path.join(TOP, "test"))

from pfbtest import (MPM_SO, MODULES, STATUS_SO,  # noqa: E402
                     TEST_HANDLER_SO, exit_on_sigterm)
import report  # noqa: E402
import netns  # noqa: E402
import pack  # noqa: E402
import hoststate  # noqa: E402
import idlepolicy  # noqa: E402
import rig  # noqa: E402
import validity  # noqa: E402
from servers import (server_cpus, make_cert, php_module,  # noqa: E402
                     tls_unavailable, rps_unavailable)
from generators import client_cpus  # noqa: E402
from profiles import (PROFILES, SCALED, DEFAULTS, SCENARIOS,  # noqa: E402
                      CONFIG_ORDER, BASELINE, DEFAULT_CONFIGS, configs)
from measures import host_info, syscalls_per_request  # noqa: E402
from runner import (server_plan, php_settings, php_clients,  # noqa: E402
                    scenario_skips, one_run, save_progress)
from kevents import kernel_event_pass  # noqa: E402


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
    parser.add_argument("--idle-policies",
                        help="comma-separated idle policies each pair runs "
                        "every configuration under (idlepolicy.py): "
                        "default (nothing held), poll (/dev/cpu_dma_latency "
                        "held at 0); default: the profile's. poll is "
                        "left out, and the record says why, where the host "
                        "has no cpuidle state for it to bar")
    parser.add_argument("--append", action="store_true",
                        help="add this command's pairs (numbered after the "
                        "earlier ones) and kernel-event rounds to --out's "
                        "results.json, made at the same commit: one folder "
                        "from several short quiet stretches")
    parser.add_argument("--pack", action="store_true",
                        help="when this command ends, move what a reader "
                        "does not open into --out's raw.tar.xz (pack.py): "
                        "the last stretch of a campaign to publish")
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
    prof["idle_policies"] = idlepolicy.parse_policies(
        args.idle_policies or ",".join(prof.get("idle_policies",
                                                ["default"])))
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


def complete_pairs(doc, name, units, first=0):
    """How many pairs of a scenario after pair `first` have a valid run of
    every unit (configuration, idle policy)."""
    valid = {}
    for r in doc["runs"]:
        unit = (r["config"], r.get("idle_policy", "default"))
        if r["scenario"] == name and unit in units and r["pair"] > first \
                and "skipped" not in r and not r.get("invalid"):
            valid.setdefault(r["pair"], set()).add(unit)
    return sum(1 for got in valid.values() if got >= set(units))


def run_scenario(name, doc, keys, all_configs, args, prof, log, out_dir):
    """Every pair: each configuration once under each idle policy, in an
    order shuffled anew for the pair (seeded by --seed, the scenario and
    the pair), so that no configuration or policy always follows the same
    one.  With max_pairs above pairs (the rig's), pairs go on until
    `pairs` of them have a valid run of every unit, or max_pairs have
    run: a busy spell of the host costs a pair, not the figure.  With
    --append, the pairs are numbered after the folder's earlier ones."""
    pairs = prof.get("fault_pairs", prof["pairs"]) \
        if name in ("graceful", "kills") else prof["pairs"]
    max_pairs = max(pairs, prof.get("max_pairs") or pairs)
    first = max([r["pair"] for r in doc["runs"] if r["scenario"] == name]
                or [0])
    with scenario_scene(name, doc, keys, all_configs, args, prof, log,
                        out_dir) as scene:
        if scene is None:
            print("%s: skipped, %s" % (name, doc["unavailable"][name]))
            return
        runnable = []
        for key in keys:
            why = scenario_skips(name, all_configs[key], args)
            if why:
                if not any(r["scenario"] == name and r["config"] == key
                           and "skipped" in r for r in doc["runs"]):
                    doc["runs"].append({"scenario": name, "config": key,
                                        "pair": 0, "skipped": why})
            else:
                runnable.append(key)
        units = [(key, policy) for key in runnable
                 for policy in prof["idle_policies"]]
        for pair in range(first, first + max_pairs):
            if pair - first >= pairs and \
                    complete_pairs(doc, name, units, first) >= pairs:
                break
            order = list(units)
            random.Random("%s/%s/%d" % (args.seed, name, pair)).shuffle(order)
            for position, (key, policy) in enumerate(order):
                cfg = all_configs[key]
                log.write("\n### %s pair %d %s, idle %s\n"
                          % (name, pair + 1, key, policy))
                result = one_run(name, key, cfg, args, prof, log, scene,
                                 out_dir, pair + 1, policy)
                result.update({"scenario": name, "config": key,
                               "pair": pair + 1, "position": position})
                doc["runs"].append(result)
                save_progress(doc, out_dir)
                log.flush()
                print("%-16s pair %d  %-34s %-7s rps %8.1f  p99 %7.1f ms  "
                      "errors %s%s" % (name, pair + 1, cfg["label"][:34],
                                       policy, result.get("rps", 0.0),
                                       result.get("p99") or float("nan"),
                                       sum(result["errors"].values()),
                                       "  INVALID: " + "; ".join(
                                           result["invalid"])
                                       if result["invalid"] else ""))
                sys.stdout.flush()


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
    # Where poll cannot be held (no cpuidle states), a run under it would
    # be a default run under poll's name: the profile runs without it
    # and the record says why.
    idle = idlepolicy.describe()
    prof["idle_policies"], not_run = idlepolicy.plan(prof["idle_policies"],
                                                     idle)
    for policy, reason in sorted(not_run.items()):
        print("idle policy %s not run: %s" % (policy, reason))
    if not prof["idle_policies"]:
        return 2
    why = idlepolicy.unavailable(prof["idle_policies"], idle)
    if why:
        print(why)
        return 2
    stop_on_sigterm()
    started = time.time()
    doc = {"host": host_info(), "host_state": hoststate.host_state(),
           "idle": idle, "idle_policies": prof["idle_policies"],
           "idle_policies_not_run": not_run,
           "builds": hoststate.build_identities({k: all_configs[k]
                                                 for k in keys}),
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
    doc["invocations"] = [invocation(doc)]
    if args.append:
        try:
            doc = append_to(out_dir, doc)
        except ValueError as e:
            print(e)
            return 2
    print("host: %s" % json.dumps(doc["host"]))
    print("commit %s, seed %s" % (doc["host_state"]["commit"], args.seed))
    if prof["scale"] != 1.0:
        print("profile %s scaled by %g to %d server CPUs: %s"
              % (doc["profile"], prof["scale"], len(doc["server_cpus"]),
                 ", ".join("%s %s" % (k, prof[k]) for k in SCALED
                           if k in prof)))
    if args.append:
        pack.take_out(os.path.join(out_dir, "raw.log"))
    with open(os.path.join(out_dir, "raw.log"),
              "a" if args.append else "w") as log:
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
    doc["elapsed_s"] = round(time.time() - started
                             + doc.get("elapsed_before_s", 0), 1)
    doc["invocations"][-1]["elapsed_s"] = round(time.time() - started, 1)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    report.write_csv(doc, os.path.join(out_dir, "results.csv"))
    report.write_report(doc, out_dir)
    if "hetero" in scenarios:
        report.write_sim_report(doc, prof, keys, out_dir)
    print("\nreport: %s (%.0f s)" % (os.path.join(out_dir, "report.md"),
                                      doc["elapsed_s"]))
    if args.pack:
        pack.pack(out_dir)
    return 0


def invocation(doc):
    """What one command added to a folder: the command, when, the host's
    state and idle policy then."""
    return {"command": doc["command"],
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "commit": doc["host_state"]["commit"],
            "load_average": doc["host_state"]["load_average"],
            "idle": doc["idle"], "seed": doc["seed"]}


def append_to(out_dir, doc):
    """The folder's results.json, to which this command adds its runs
    (--append): a campaign split into short quiet stretches writes one
    folder.  Refused where the folder was made at another commit, or
    with another profile, baseline or settings that change what a run
    measures."""
    path = os.path.join(out_dir, "results.json")
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError("--append: no results.json in %s (%s)"
                         % (out_dir, e))
    made = old["host_state"]["commit"]
    if made != doc["host_state"]["commit"] or made.endswith("-dirty"):
        raise ValueError("--append: %s was made at %s, this tree is at %s"
                         % (out_dir, made, doc["host_state"]["commit"]))
    for key in ("profile", "baseline", "conf_base", "server_cpus",
                "client_cpus"):
        if old.get(key) != doc.get(key):
            raise ValueError("--append: %s differs (%s, here %s)"
                             % (key, old.get(key), doc.get(key)))
    old["configs"].update(doc["configs"])
    old.setdefault("invocations", [invocation(old)])
    old["invocations"] += doc["invocations"]
    old["elapsed_before_s"] = old.get("elapsed_s", 0)
    old["idle_policies"] = sorted(set(old.get("idle_policies", ["default"]))
                                  | set(doc["idle_policies"]))
    old.setdefault("idle_policies_not_run", {}).update(
        doc["idle_policies_not_run"])
    return old


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


if __name__ == "__main__":
    sys.exit(main())
