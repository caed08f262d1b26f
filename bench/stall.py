#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The rig's stall: why a closed loop of short connections can leave both
the server's CPU and the generator's idle on this virtual machine.

  python3 bench/stall.py run --out DIR --budget-s 540   # again until
                                                           # it says done
  python3 bench/stall.py report DIR

Each run is wrk in closed loop (static close: a connection per request)
against a fresh server on CPU 0, the generator on CPU 1, along one of
three paths (a fourth on request), in the same pairs:

  rps       the rig as it measures: a veth pair between two namespaces,
            RPS on each end sending what arrives to the receiver's CPU
            (the server's packets are processed on CPU 0, the
            generator's on CPU 1);
  norps     the same veth pair with RPS off at both ends: what a CPU
            sends is received on that CPU (the generator's CPU runs the
            server's receive softirq, as on loopback);
  loopback  the generator in the server's namespace, to its 127.0.0.1;
  rps-noreuse  the rps path with the generator's namespace at the
            kernel's defaults for its ports (tcp_tw_reuse 2: loopback's
            TIME_WAIT ports only; 32768 to 60999), as the rig had them
            before the stall was found (netns.VethPair.generator_ports);

with 32 and 256 connections (more in flight: if the stall is a latency
the loop waits on, more connections hide it), under both idle policies
(idlepolicy.py: `poll` holds /dev/cpu_dma_latency at 0, so an idle vCPU
polls instead of halting, and a wake-up costs it no trip through the
hypervisor).  Configurations: stock prefork and this MPM with one bucket
(a process per connection), the blocking anchor (a process per
connection, nothing else) and the epoll anchor (an event loop: one
wake-up serves many connections).  Each run records the idle share of
both CPUs, halts and IPIs on each per request, the server CPU per
request and the requests per second; the report gives, per unit, the
medians over the pairs and whether the stall rule (validity.py: both
CPUs idle more than 10 % in a closed-loop peak) fired.
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "test"))

from pfbtest import exit_on_sigterm  # noqa: E402
import cgroupcpu  # noqa: E402
import hoststate  # noqa: E402
import idlepolicy  # noqa: E402
import netns  # noqa: E402
import pack  # noqa: E402
import rig  # noqa: E402
import stats  # noqa: E402
import stalltrace  # noqa: E402
import validity  # noqa: E402
from generators import run_wrk, client_cpus  # noqa: E402
from measures import host_info  # noqa: E402
from profiles import configs  # noqa: E402
from runner import measure, server_plan, save_progress  # noqa: E402
from servers import (make_server, start_server, server_cpus,  # noqa: E402
                     target, save_config)

CONFIGS = ("stock", "pfb-1", "anchor-blocking", "anchor-epoll")
PATHS = ("rps", "norps", "loopback", "rps-noreuse")
# The kernel's defaults for the generator's ports (path rps-noreuse).
NOREUSE = (("net.ipv4.tcp_tw_reuse", "2"),
           ("net.ipv4.ip_local_port_range", "32768 60999"))
CONNECTIONS = (32, 256)
WORKERS = 64


def plan_units(seed, pairs, keys, paths, connections, policies, first=1):
    """Every run, pair after pair, each pair's units in a seeded shuffle."""
    plan = []
    for pair in range(first, first + pairs):
        units = [(k, p, c, pol) for k in keys for p in paths
                 for c in connections for pol in policies]
        random.Random("%s/stall/%d" % (seed, pair)).shuffle(units)
        plan += [{"id": "p%d-%s-%s-%d-%s" % (pair, k, p, c, pol),
                  "pair": pair, "config": k, "path": p, "connections": c,
                  "policy": pol} for k, p, c, pol in units]
    return plan


def stalled(run):
    """The stall rule on a run (validity.py's, without the others)."""
    return any(why.startswith(validity.STALL_REASON)
               for why in run.get("invalid", []))


def pending(plan, runs, bound, attempts=2):
    """The units still to run: the plan's not yet run, then, once, each
    unit whose every run so far was during a busy host (others over the
    bound): a busy spell costs a run, not the unit."""
    done = {}
    for r in runs:
        done.setdefault(r["id"], []).append(r)
    todo = [u for u in plan if u["id"] not in done]
    if todo:
        return todo
    return [u for u in plan if len(done[u["id"]]) < attempts
            and not any(foreign_ok(r, bound) for r in done[u["id"]])]


def set_path(r, path, args):
    """RPS at both ends of the rig's veth pair for `path`; loopback keeps
    the generator in the server's namespace (generators.client_prefix);
    rps-noreuse puts back the kernel's defaults for the generator's ports
    (tcp_tw_reuse 2, ports 32768 to 60999: the rig before its fix)."""
    on = path in ("rps", "rps-noreuse")
    r.veth.set_rps(r.server_cpus if on else [])
    r.veth.set_client_rps(r.client_cpus if on else [])
    args.rig_loopback = path == "loopback"
    settings = NOREUSE if path == "rps-noreuse" else netns.GENERATOR_SYSCTLS
    for key, value in settings:
        subprocess.run(r.veth.prefix() + ["sysctl", "-q", "-w",
                                          "%s=%s" % (key, value)],
                       check=True, timeout=30, capture_output=True)


def kernel_trace(delay, seconds, cpus, log):
    """stalltrace.EVENTS on every CPU for `seconds`, after `delay`, in a
    tracing instance of ours; the summary (stalltrace.summarize) or
    {"error": why}."""
    time.sleep(delay)
    log.write("# tracing %s for %s s (%s)\n" % (
        ",".join(stalltrace.EVENTS), seconds, stalltrace.INSTANCE))
    try:
        text = stalltrace.record(seconds)
    except OSError as e:
        return {"error": "tracing: %s" % e}
    return stalltrace.summarize(stalltrace.parse(text), cpus)


def time_wait(prefix, since_s=None):
    """TIME_WAIT sockets in a namespace (prefix: `ip netns exec NS`, or
    none for this one); with since_s, only those that entered TIME_WAIT
    in the last since_s seconds (their timer, 60 s from entry, has more
    than 60 - since_s left): a count of the run's own, where the
    difference of two counts would take off those that expired."""
    out = subprocess.run(prefix + ["ss", "-tanoH", "state", "time-wait"],
                         capture_output=True, text=True, timeout=30).stdout
    if since_s is None:
        return len(out.splitlines())
    return sum(1 for line in out.splitlines()
               if timewait_left(line) > TIME_WAIT_S - since_s)


# A socket's TIME_WAIT lasts this long on Linux (TCP_TIMEWAIT_LEN).
TIME_WAIT_S = 60.0


def timewait_left(line):
    """Seconds left on an `ss -o` line's timewait timer (0 if none)."""
    m = re.search(r"timer:\(timewait,(?:(\d+)min)?(?:(\d+)sec)?"
                  r"(?:(\d+)ms)?", line)
    if not m:
        return 0.0
    mins, secs, ms = (int(x) if x else 0 for x in m.groups())
    return 60 * mins + secs + ms / 1e3


def one(unit, all_configs, args, settings, log, out_dir, trace=False):
    """One run of a unit on a fresh server; with trace, a perf trace of
    its middle (stalltrace.py) in result["trace"]."""
    cfg = dict(all_configs[unit["config"]], key=unit["config"])
    set_path(args.rig, unit["path"], args)
    prof = {"workers": WORKERS, "start": WORKERS,
            "seconds": settings["seconds"]}
    plan = server_plan("static-close", prof, args, {})
    quiet = rig.wait_quiet(args.rig, args.quiet_wait, args.max_foreign_cpu,
                           log)
    client = [int(c) for c in client_cpus(args)]
    log.write("\n### %s\n" % unit["id"])
    with cgroupcpu.ServerCgroup("stall") as cgroup, \
            cgroupcpu.ServerCgroup("stall-gen") as gen_cgroup:
        with make_server(cfg, args, plan, cgroup) as srv:
            start_server(srv, cfg, plan)
            if unit["pair"] == 1 and unit["policy"] == "default":
                save_config(srv, unit["config"], "stall-%s" % unit["path"],
                            out_dir)
            url = target(srv, cfg, {})
            with idlepolicy.Hold(unit["policy"]) as hold:
                args.generator_wrapper = gen_cgroup.wrapper()
                run_wrk(args, url, unit["connections"], settings["warmup"],
                        log=log)
                args.generator_wrapper = gen_cgroup.wrapper()

                gen_ns = [] if unit["path"] == "loopback" \
                    else args.rig.veth.prefix()
                began = time.time()

                def load():
                    traced = {}
                    tracer = threading.Thread(target=lambda: traced.update(
                        kernel_trace(1.0, 0.3, server_cpus(args) + client,
                                     log)))
                    before = idlepolicy.Snapshot(client)
                    if trace:
                        tracer.start()
                    result = run_wrk(args, url, unit["connections"],
                                     settings["seconds"], log=log)
                    result["client_idle"] = idlepolicy.delta(
                        before, idlepolicy.Snapshot(client))
                    if trace:
                        tracer.join(180)
                        result["trace"] = traced
                    return result
                result = measure(srv, (cgroup, gen_cgroup), args, log, load)
                since = time.time() - began
                waits = {"generator_run": time_wait(gen_ns, since),
                         "server_run": time_wait([], since),
                         "window_s": round(since, 1)}
            result.update(hold.record())
            result["time_wait"] = waits
            result["seconds"] = settings["seconds"]
            result["warmup_s"] = settings["warmup"]
    result.pop("hist", None)
    result["rig"]["quiet_wait"] = quiet
    result.update({k: unit[k] for k in ("id", "pair", "config", "path",
                                        "connections")})
    result["idle_policy"] = unit["policy"]
    result["log_problems"] = srv.log_problems[:20]
    result["invalid"] = validity.judge_run("static-close", result,
                                           args.max_lag_ms,
                                           args.max_foreign_cpu)
    args.rig_loopback = False
    return result


def cmd_run(args):
    why = rig.unavailable() or idlepolicy.unavailable(args.policies)
    if why:
        print("stall: %s" % why)
        return 2
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.json")
    if os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
    else:
        seed = args.seed or str(int(time.time()))
        doc = {"kind": "stall", "host": host_info(),
               "host_state": hoststate.host_state(),
               "idle": idlepolicy.describe(), "seed": seed,
               "settings": {"seconds": args.seconds, "warmup": args.warmup,
                            "pairs": args.pairs, "workers": WORKERS,
                            "max_foreign_cpu": args.max_foreign_cpu},
               "configs": {k: configs(args)[k]["label"]
                           for k in args.configs},
               "plan": plan_units(seed, args.pairs, args.configs,
                                  args.paths, args.connections,
                                  args.policies),
               "runs": [], "invocations": []}
    commit = hoststate.commit()
    if commit != doc["host_state"]["commit"] or (
            commit.endswith("-dirty") and not args.allow_dirty):
        print("stall: %s was planned at %s; this tree is at %s"
              % (args.out, doc["host_state"]["commit"], commit))
        return 2
    exit_on_sigterm()
    all_configs = configs(args)
    started = time.time()
    doc["invocations"].append({
        "command": " ".join(["stall.py"] + sys.argv[1:]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "load_average": hoststate.host_state()["load_average"]})
    todo = pending(doc["plan"], doc["runs"], args.max_foreign_cpu)
    took = [r["took_s"] for r in doc["runs"] if r.get("took_s")]
    each = max(took) if took else 12.0
    ran = 0
    pack.take_out(os.path.join(args.out, "raw.log"))
    with open(os.path.join(args.out, "raw.log"), "a") as log, \
            rig.Rig(server_cpus(args), client_cpus(args), log) as r:
        args.rig = r
        doc["rig"] = r.describe()
        for unit in todo:
            if time.time() - started + each > args.budget_s:
                break
            t0 = time.time()
            result = one(unit, all_configs, args, doc["settings"], log,
                         args.out)
            result["took_s"] = round(time.time() - t0, 1)
            doc["runs"].append(result)
            save_progress(doc, args.out)
            ran += 1
            server = result["idle"]
            print("%-44s %7.0f req/s  idle: server %3.0f %%, generator %3.0f "
                  "%%  halts/req %.2f%s" % (
                      unit["id"], result.get("rps", 0),
                      100 * share(server), 100 * share(result.get(
                          "client_idle")),
                      server.get("halts_per_request") or 0,
                      "  INVALID: " + "; ".join(result["invalid"])
                      if result["invalid"] else ""))
            sys.stdout.flush()
        args.rig = None
    doc["invocations"][-1]["elapsed_s"] = round(time.time() - started, 1)
    save_progress(doc, args.out)
    write_report(doc, args.out)
    left = len(pending(doc["plan"], doc["runs"], args.max_foreign_cpu))
    print("stall: %d runs; %s" % (ran, "%d to go: run it again" % left
                                  if left else "the plan is done"))
    if not left:
        # The campaign is over: the folder takes its published shape.
        pack.pack(args.out)
    return 0


def share(idle):
    """The idle share of the CPUs a snapshot pair covered."""
    if not idle or idle.get("idle_s") is None or not idle.get("elapsed_s"):
        return float("nan")
    ncpus = max(1, round((idle["busy_s"] + idle["idle_s"])
                         / idle["elapsed_s"]))
    return idle["idle_s"] / (idle["elapsed_s"] * ncpus)


def foreign_ok(run, bound):
    return (run.get("rig") or {}).get("foreign_cpus", 1.0) <= bound


def _ci(values, digits):
    values = [v for v in values if v is not None and v == v]
    return stats.fmt_ci(stats.median_ci(values), digits) if values else "–"


def write_report(doc, out_dir):
    bound = doc["settings"]["max_foreign_cpu"]
    lines = ["# The rig's stall", "",
             "Commit %s; seed %s; %d pairs planned, %d runs made (%d during "
             "which others took over %.0f %% of a CPU, left out below). "
             "wrk closed loop, a connection per request, %d s after %d s "
             "of warm-up, on a fresh server of %d children; server on CPU "
             "%s, generator on CPU %s. Idle shares from the tick's idle "
             "time; halts: entries into a halting idle state; IPIs: "
             "function-call and rescheduling interrupts; medians [95 %% CI, "
             "or min–max with its coverage] over the pairs. Stalled: the "
             "runs the stall rule judges so (both CPUs idle over 10 %%)." % (
                 doc["host_state"]["commit"], doc["seed"],
                 doc["settings"]["pairs"], len(doc["runs"]),
                 len([r for r in doc["runs"] if not foreign_ok(r, bound)]),
                 100 * bound, doc["settings"]["seconds"],
                 doc["settings"]["warmup"], doc["settings"]["workers"],
                 ",".join(map(str, doc["rig"]["server_rps_cpus"])),
                 ",".join(map(str, doc["rig"]["client_rps_cpus"]))), "",
             "| configuration | path | connections | idle policy | runs | "
             "req/s | server CPU idle % | generator CPU idle % | stalled | "
             "server halts/req | generator halts/req | server IPIs/req | "
             "generator IPIs/req | server CPU µs/req | generator CPU "
             "µs/req | TIME_WAIT left on the generator's side, per 1000 "
             "connections |",
             "|---" * 16 + "|"]
    units = []
    for u in doc["plan"]:
        key = (u["config"], u["path"], u["connections"], u["policy"])
        if key not in units:
            units.append(key)
    for key in sorted(units, key=lambda k: (list(doc["configs"]).index(k[0]),
                                            PATHS.index(k[1]), k[2],
                                            k[3] != "default")):
        runs = [r for r in doc["runs"] if (r["config"], r["path"],
                                           r["connections"],
                                           r["idle_policy"]) == key
                and foreign_ok(r, bound)]
        if not runs:
            continue
        lines.append("| %s | %s | %d | %s | %d | %s | %s | %s | %d of %d | "
                     "%s | %s | %s | %s | %s | %s | %s |" % (
                         doc["configs"][key[0]], key[1], key[2],
                         idlepolicy.label(key[3], doc.get("idle")), len(runs),
                         _ci([r.get("rps") for r in runs], 0),
                         _ci([100 * share(r["idle"]) for r in runs], 0),
                         _ci([100 * share(r.get("client_idle"))
                              for r in runs], 0),
                         len([r for r in runs if stalled(r)]), len(runs),
                         _ci([r["idle"].get("halts_per_request")
                              for r in runs], 2),
                         _ci([per_request(r, "halts") for r in runs], 2),
                         _ci([r["idle"].get("ipis_per_request")
                              for r in runs], 2),
                         _ci([per_request(r, "ipis") for r in runs], 2),
                         _ci([cpu_us(r) for r in runs], 1),
                         _ci([1e6 * r["loadgen_cpu_s"] / r["requests"]
                              for r in runs if r.get("requests")], 0),
                         _ci([tw_per_1000(r) for r in runs], 0)))
    lines += trace_lines(doc)
    lines += ["", "Raw data: results.json (every run: the server's and the "
              "generator's CPU idle, interrupts, softnet counters, "
              "nstat), raw.log (every command), configs/.", ""]
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))
    pack.keep_shape(out_dir)


def tw_per_1000(run):
    """TIME_WAIT sockets the measured load left on the generator's side,
    per 1000 connections."""
    w = run.get("time_wait")
    if not w or "generator_run" not in w or not run.get("requests"):
        return None
    return 1e3 * w["generator_run"] / float(run["requests"])


def per_request(run, what):
    c = run.get("client_idle")
    if not c or not run.get("requests"):
        return None
    if what == "halts":
        return c["halts"] / float(run["requests"])
    return (c["irqs"].get("CAL", 0) + c["irqs"].get("RES", 0)) \
        / float(run["requests"])


def cpu_us(run):
    if run.get("server_cpus_s") is None or not run.get("requests"):
        return None
    return run["server_cpus_s"] * 1e6 / run["requests"]


def cmd_trace(args):
    """One traced run of each unit named (--configs x --paths x
    --connections x --policies), into DIR's results.json ("traces") and
    its report."""
    why = rig.unavailable()
    if why:
        print("stall: %s" % why)
        return 2
    with open(os.path.join(args.folder, "results.json")) as f:
        doc = json.load(f)
    exit_on_sigterm()
    all_configs = configs(args)
    units = plan_units("trace", 1, args.configs, args.paths,
                       args.connections, args.policies)
    traces = doc.setdefault("traces", [])
    pack.take_out(os.path.join(args.folder, "raw.log"))
    with open(os.path.join(args.folder, "raw.log"), "a") as log, \
            rig.Rig(server_cpus(args), client_cpus(args), log) as r:
        args.rig = r
        for unit in units:
            result = one(unit, all_configs, args, dict(doc["settings"],
                                                       seconds=3),
                         log, args.folder, trace=True)
            one_trace = {k: result.get(k) for k in (
                "config", "path", "connections", "idle_policy", "rps",
                "invalid", "trace")}
            one_trace["commit"] = hoststate.commit()
            one_trace["foreign_cpus"] = result["rig"]["foreign_cpus"]
            traces.append(one_trace)
            save_progress(doc, args.folder)
            print(json.dumps(one_trace))
        args.rig = None
    write_report(doc, args.folder)
    return 0


def trace_lines(doc):
    traces = doc.get("traces")
    if not traces:
        return []
    lines = ["", "## Where the loop waits (perf traces)", "",
             "Each a fresh run of its unit, 0.3 s of the kernel's trace of "
             "%s one second into it, in a tracing instance whose buffer no "
             "process drains meanwhile (stall.py trace; stalltrace.py): the "
             "idle share of each CPU, the share of the time both were idle "
             "at once and what ended those spans, and how long an IPI took "
             "from its sending to its handler on a target that was idle "
             "(a halted vCPU woken through the hypervisor) or busy." % ", "
             .join("`%s`" % e for e in stalltrace.EVENTS), "",
             "| configuration | path | connections | idle policy | req/s | "
             "server idle | generator idle | both idle (spans, median µs) "
             "| both-idle spans ended by | IPI to an idle CPU, median / p90 "
             "µs | IPI to a busy CPU, median µs | server CPU woken by |",
             "|---" * 12 + "|"]
    for t in traces:
        tr = t.get("trace") or {}
        if tr.get("error"):
            lines.append("| %s | %s | %d | %s | – | trace: %s |" % (
                t["config"], t["path"], t["connections"], t["idle_policy"],
                tr["error"][:80]))
            continue
        cpus = sorted(tr["cpus"], key=int)
        both = tr["both_idle"]
        lines.append("| %s | %s | %d | %s | %.0f | %.0f %% | %.0f %% | "
                     "%.0f %% (%d, %s) | %s | %s / %s | %s | %s |" % (
                         doc["configs"].get(t["config"], t["config"]),
                         t["path"], t["connections"],
                         idlepolicy.label(t["idle_policy"], doc.get("idle")),
                         t.get("rps") or 0,
                         100 * tr["cpus"][cpus[0]]["idle_share"],
                         100 * tr["cpus"][cpus[-1]]["idle_share"],
                         100 * both["share"], both["spans"],
                         both["median_us"],
                         ", ".join("%s %d" % kv for kv in sorted(
                             both["ended_by"].items(), key=lambda kv:
                             -kv[1])),
                         tr["ipi_delay_to_idle"]["median_us"],
                         tr["ipi_delay_to_idle"]["p90_us"],
                         tr["ipi_delay_to_busy"]["median_us"],
                         ", ".join("%s %d" % kv for kv in sorted(
                             tr["cpus"][cpus[0]]["wakers"].items(),
                             key=lambda kv: -kv[1]))))
    return lines


def load_doc(folder):
    """A folder's results.json, or the published results.json.gz."""
    path = os.path.join(folder, "results.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    import gzip
    with gzip.open(path + ".gz", "rt") as f:
        return json.load(f)


def cmd_report(args):
    doc = load_doc(args.folder)
    write_report(doc, args.folder)
    print(os.path.join(args.folder, "report.md"))
    return 0


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--out", required=True)
    run.add_argument("--budget-s", type=float, default=540)
    run.add_argument("--pairs", type=int, default=3)
    run.add_argument("--seconds", type=int, default=3)
    run.add_argument("--warmup", type=int, default=1)
    run.add_argument("--configs", type=lambda s: s.split(","),
                     default=list(CONFIGS))
    run.add_argument("--paths", type=lambda s: s.split(","),
                     default=list(PATHS[:3]))
    run.add_argument("--connections", type=lambda s: [int(x) for x in
                                                      s.split(",")],
                     default=list(CONNECTIONS))
    run.add_argument("--policies", type=idlepolicy.parse_policies,
                     default=list(idlepolicy.POLICIES))
    run.add_argument("--seed")
    run.add_argument("--quiet-wait", type=float, default=60)
    run.add_argument("--max-foreign-cpu", type=float,
                     default=validity.MAX_FOREIGN_CPU)
    run.add_argument("--server-cpus", default="0")
    run.add_argument("--client-cpus", default="1")
    run.add_argument("--allow-dirty", action="store_true")
    rep = sub.add_parser("report")
    rep.add_argument("folder")
    tr = sub.add_parser("trace", help="a traced run of each unit")
    tr.add_argument("folder")
    tr.add_argument("--configs", type=lambda s: s.split(","),
                    default=["pfb-1"])
    tr.add_argument("--paths", type=lambda s: s.split(","),
                    default=["rps", "loopback"])
    tr.add_argument("--connections", type=lambda s: [int(x) for x in
                                                     s.split(",")],
                    default=[32])
    tr.add_argument("--policies", type=idlepolicy.parse_policies,
                    default=list(idlepolicy.POLICIES))
    for p in (tr,):
        p.add_argument("--server-cpus", default="0")
        p.add_argument("--client-cpus", default="1")
        p.add_argument("--quiet-wait", type=float, default=60)
        p.add_argument("--max-foreign-cpu", type=float,
                       default=validity.MAX_FOREIGN_CPU)
    args = parser.parse_args()
    args.buckets = 2
    args.mpm_before = None
    args.conf_base = "debian"
    args.rig = None
    args.rig_loopback = False
    args.generator_wrapper = None
    args.wrk_threads = 1
    args.max_lag_ms = validity.MAX_LAG_MS
    return args


def main():
    args = parse_args()
    return {"run": cmd_run, "report": cmd_report,
            "trace": cmd_trace}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
