# Licensed under the Apache License, Version 2.0; see LICENSE.
"""One measured run of the load suite, and what it needs: the server a
scenario asks for (server_plan), the load of each scenario
(scenario_run), the warm-up, and the measurement around the load
(measure): the server's cgroup and process counters, the kernel's TCP
and CPU counters, on the rig others' CPU and the server CPU's busy time,
the idle policy and what the idle CPUs did (idlepolicy.py), and the
verdict (validity.py).  suite.py runs pairs of these; poolcurve.py and
stall.py run their own campaigns from the same pieces."""

import json
import os
import random
import re
import resource
import signal
import threading
import time

import cgroupcpu
import hoststate
import idlepolicy
import rig
import validity
from pfbtest import STOCK_EVENT
from servers import (make_server, start_server, server_cpus,
                     server_usage, usage_delta, target, save_config,
                     STATIC_PATH, STATIC_BODY)
from generators import run_wrk, merge_wrk, run_openloop, SlowClients, \
    client_cpus
from measures import (distribution, children_memory, rps_locality,
                      pin_children_away, keep_latencies)
import capacity

HERE = os.path.dirname(os.path.abspath(__file__))

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
        plan["host"] = "127.0.0.1" if getattr(args, "rig_loopback", False) \
            else args.rig.server_addr
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
    fixed = re.fullmatch(r"rate(\d+)", name)
    if fixed:
        # The same absolute rate in every run and on every host.
        return run_openloop(args, url, "%d:%s" % (secs, fixed.group(1)),
                            log=log)
    if name == "capacity":
        step = prof.get("capacity_seconds", 2)
        return capacity.climb(
            lambda rate: run_openloop(args, url, "%d:%d" % (step, rate),
                                      log=log),
            capacity.ladder_from(prof.get("capacity_start", 500)),
            args.max_lag_ms)
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
                    "capacity",
                    "rate", "openloop", "bursts", "slowloris")


def scenario_skips(name, cfg, args=None):
    """Why a configuration cannot run a scenario, or None."""
    if cfg.get("extra") == "ListenBuckets 0\n":
        return "ListenBuckets 0 is the default's arrangement"
    if cfg.get("extra") == "ListenBuckets 1\n" and name != "fourports":
        return "with one Listen, ListenBuckets 1 is the default's arrangement"
    if cfg["kind"] == "anchor" and name not in ANCHOR_SCENARIOS \
            and not re.fullmatch(r"(open|fixed|rate)\d+", name):
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
            pair=0, policy="default"):
    """One measured run on a freshly started, warmed-up server, under the
    idle policy `policy` (idlepolicy.py) from the warm-up to the end."""
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
            with idlepolicy.Hold(policy) as hold:
                args.generator_wrapper = gen_cgroup.wrapper() if args.rig \
                    else None
                warmed = warm_up(name, srv, cfg, args, prof, scene, log)
                if out_dir and pair <= 1 and policy == "default":
                    save_config(srv, key, name, out_dir)
                result = measure(
                    srv, (cgroup, gen_cgroup), args, log,
                    lambda: scenario_run(name, srv, cfg, args, prof, scene,
                                         log))
                result.update(hold.record())
            result["idle_policy"] = policy
            result["warmup"] = warmed
            if args.rig:
                result["rig"]["quiet_wait"] = quiet
            # The server logs a request after its response is out.
            if not cfg.get("path"):
                srv.wait_access_log(result.get("requests", 0), timeout=30)
            result["distribution"] = distribution(srv, cfg, scene)
            if name.startswith("rps"):
                result["rps_cpus"] = scene["veth"].rps_cpus
                result["rps_local_share"] = rps_locality(result, args, scene)
    # Read at the stop, so that what stopping logs is counted too.
    result["log_problems"] = srv.log_problems[:20]
    keep_latencies(result, name, key if policy == "default"
                   else "%s-%s" % (key, policy), pair, out_dir)
    result["invalid"] = judge_run(name, result, args)
    return result


def measure(srv, cgroups, args, log, load):
    """The counters around one measured load (load() returns the
    generator's result, which this completes): the server's cgroup and
    processes, the kernel's TCP and CPU counters, what the server CPUs'
    idle states and interrupts did, and on the rig what others took and
    the server CPUs' busy time less others' there (server_cpus_s)."""
    cgroup, gen_cgroup = cgroups
    use0 = server_usage(srv.proc.pid)
    cg0 = cgroup.usage()
    gen0 = children_cpu()
    kernel = hoststate.Counters(server_cpus(args), client_cpus(args)).start()
    host0 = args.rig.sample([cgroup.path, gen_cgroup.path]) \
        if args.rig else None
    idle0 = idlepolicy.Snapshot(server_cpus(args))
    started = time.time()
    result = load()
    elapsed = time.time() - started
    idle = idlepolicy.delta(idle0, idlepolicy.Snapshot(server_cpus(args)))
    if args.rig:
        result["rig"] = rig.foreign(
            host0, args.rig.sample([cgroup.path, gen_cgroup.path]),
            server_cpus(args), client_cpus(args))
    args.generator_wrapper = None
    result["kernel"] = kernel.stop()
    result["idle"] = idle
    result["idle"].update(idlepolicy.per_request(idle,
                                                 result.get("requests")))
    cg1 = cgroup.usage()
    use = usage_delta(use0, server_usage(srv.proc.pid))
    # The pool as the load left it, before idle children are reaped.
    kids = srv.children()
    result["children_end"] = len(kids)
    result["memory"] = children_memory(kids)
    result["server_cpu_cgroup"] = cgroupcpu.delta(cg0, cg1)
    result["server_cpu_proc_s"] = round(use["cpu"], 2)
    # The cgroup's count where there is one: it includes children that
    # exited during the run and every thread.
    result["server_cpu_s"] = result["server_cpu_cgroup"]["total"] \
        if result["server_cpu_cgroup"] else result["server_cpu_proc_s"]
    if args.rig and result["rig"]["foreign_server_s"] is not None:
        # What the server's CPUs did, softirq included, less what others
        # ran there (report.cpu_us_per_request); busy from the tick's
        # idle accounting where it reads (idlepolicy.delta).
        busy = idle["busy_s"] if idle.get("busy_s") is not None \
            else result["rig"]["server_cpus_busy_s"]
        result["rig"]["server_cpus_busy_s"] = round(busy, 4)
        result["server_cpus_s"] = round(
            busy - result["rig"]["foreign_server_s"], 4)
    result["loadgen_cpu_s"] = round(children_cpu() - gen0, 2)
    result["ctx_voluntary"] = use["voluntary"]
    result["ctx_switches"] = use["voluntary"] + use["nonvoluntary"]
    result["minor_faults"] = use["minflt"]
    result["elapsed_s"] = round(elapsed, 2)
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
    if name == "capacity":
        # The climb's first rate, not a climb.
        run_openloop(args, target(srv, cfg, scene), "%d:%d" % (
            max(1, int(round(warmup))), capacity.ladder_from(
                prof.get("capacity_start", 500))[0]), log=log)
        return {"seconds": warmup}
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


def save_progress(doc, out_dir):
    """results.json after every run, so that a run cut short (a crash, a
    lease that ends) keeps what it measured; report.py reads it."""
    path = os.path.join(out_dir, "results.json")
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)
