#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A discrete-event model of prefork with SO_REUSEPORT listener buckets.

What it models:
- clients in a closed loop (as wrk drives the server): each sends a request
  on a new connection as soon as its previous one is answered;
- steering: "hash" puts each new connection in a bucket chosen uniformly at
  random, which is what the kernel's hash of the 4-tuple does with random
  ephemeral ports; "single" is one shared accept queue; "idle" is
  ListenBucketSteering idle, decided by the very rule the kernel program
  runs (pf_steer_idle_choose() of prefork_steering_rules.h, called through
  pf_steer_idle_pick()): the hash's bucket unless it has no idle child,
  then the first of up to 16 other buckets (random start) with one, else
  the probed bucket with the shortest queue (the model hands it the counts
  the program reads, idle children minus queued connections, without
  their microsecond lag);
- each bucket's accept queue is FIFO and its idle children take connections
  in turn; a queued connection never moves to another bucket;
- service time: exponential with the given mean, plus a fixed per-request
  overhead (accept, parse, log) calibrated against this machine;
- a host of `nodes` NUMA nodes (bucket b on CPU b, CPUs numbered node
  after node; the MPM's map comes from sysfs, so interleaved numbering
  changes nothing here): each connection is received on a CPU chosen
  uniformly (RSS), and a connection served on another node than the one
  that received it costs cross_ms more.  Children of the "cpu" and
  "local" modes are pinned to their bucket's CPU, so the bucket decides;
  others run where the scheduler puts them, on another node with
  probability sched_cross.  Steering "cpu" is the receiving CPU's bucket;
  "local" (the mode that can borrow) is that bucket while it has an idle
  child, else a bucket of the same node with one, else any bucket with
  one, else the receiving CPU's bucket;
- the MPM's per-bucket maintenance once a simulated second, decided by
  the MPM's own pf_maintenance_decide() (prefork_maintenance.c, built into
  build/libpfpolicy.so and called through ctypes; PFB_POLICY_LIB names
  another build), with a fork delay before a new child accepts.  The model
  has no copy of those rules to drift from the C.

  python3 bucketsim.py --buckets 2 --workers 32 --clients 48
  python3 bucketsim.py --predict         # 16, 64 and 256 CPUs

It prints throughput, latency percentiles and Jain's fairness index of
connections over buckets and over children.
"""

import argparse
import collections
import ctypes
import heapq
import json
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
POLICY_LIB = os.environ.get("PFB_POLICY_LIB") or os.path.join(
    HERE, "..", "..", "build", "libpfpolicy.so")


class BucketState(ctypes.Structure):
    """pf_bucket_state_t"""
    _fields_ = [("children", ctypes.c_int), ("idle", ctypes.c_int),
                ("queued", ctypes.c_int)]


class BucketAction(ctypes.Structure):
    """pf_bucket_action_t"""
    _fields_ = [("spawn", ctypes.c_int), ("kill", ctypes.c_int)]


class Limits(ctypes.Structure):
    """pf_limits_t"""
    _fields_ = [("num_buckets", ctypes.c_int),
                ("min_spare_servers", ctypes.c_int),
                ("max_spare_servers", ctypes.c_int),
                ("max_workers", ctypes.c_int),
                ("max_spawn_rate", ctypes.c_int),
                ("shared_pool", ctypes.c_int)]


# pfb_steer_e (include/prefork_buckets.h)
STEERING = {"hash": 0, "cpu": 1, "idle": 2, "local": 3}


class Summary(ctypes.Structure):
    """pf_decision_summary_t"""
    _fields_ = [("spawned", ctypes.c_int), ("killed", ctypes.c_int),
                ("wanted", ctypes.c_int), ("at_max_workers", ctypes.c_int),
                ("fast_ramp_buckets", ctypes.c_int),
                ("rebalanced", ctypes.c_int)]


class Rank(ctypes.Structure):
    """pf_rank_t"""
    _fields_ = [("priority", ctypes.c_longlong), ("bucket", ctypes.c_int),
                ("want", ctypes.c_int)]


def load_policy(path=POLICY_LIB):
    """The MPM's policy library; `make` builds it."""
    try:
        lib = ctypes.CDLL(os.path.abspath(path))
    except OSError as e:
        raise SystemExit("bucketsim: cannot load the MPM's policy library "
                         "%s (%s); run make first" % (path, e))
    lib.pf_maintenance_limits_init.argtypes = [ctypes.POINTER(Limits)] + \
        [ctypes.c_int] * 5
    lib.pf_maintenance_decide.argtypes = [
        ctypes.POINTER(Limits), ctypes.POINTER(BucketState), ctypes.c_int,
        ctypes.POINTER(ctypes.c_int), ctypes.POINTER(BucketAction),
        ctypes.POINTER(Rank), ctypes.POINTER(Summary)]
    lib.pf_steer_idle_probes.argtypes = [ctypes.c_int]
    lib.pf_steer_idle_pick.argtypes = [
        ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.c_uint32,
        ctypes.c_uint32, ctypes.POINTER(ctypes.c_int)]
    lib.pf_steer_idle_pick.restype = ctypes.c_int
    return lib


class Policy:
    """pf_maintenance_decide() for nb buckets, with the server's spawn ramp
    kept between cycles as the MPM keeps it."""

    def __init__(self, nb, min_spare_servers, max_spare_servers, workers,
                 steering="hash", lib=None):
        self.lib = lib or load_policy()
        self.nb = nb
        self.limits = Limits()
        self.lib.pf_maintenance_limits_init(
            ctypes.byref(self.limits), nb, min_spare_servers,
            max_spare_servers, workers,
            STEERING.get(steering, STEERING["hash"]))
        self.rate = ctypes.c_int(1)
        self.state = (BucketState * nb)()
        self.action = (BucketAction * nb)()
        self.scratch = (Rank * nb)()
        self.summary = Summary()

    def decide(self, states, occupied):
        """states: (children, idle, queued) per bucket.  Returns
        [(spawn, kill)] per bucket."""
        for b, (children, idle, queued) in enumerate(states):
            self.state[b].children = children
            self.state[b].idle = idle
            self.state[b].queued = queued
        self.lib.pf_maintenance_decide(
            ctypes.byref(self.limits), self.state, occupied,
            ctypes.byref(self.rate),
            self.action, self.scratch, ctypes.byref(self.summary))
        return [(a.spawn, a.kill) for a in self.action]

    def ramp(self):
        return self.rate.value


class Bucket:
    __slots__ = ("queue", "idle", "children", "accepted")

    def __init__(self):
        self.queue = collections.deque()
        self.idle = []
        self.children = 0
        self.accepted = 0


def jain(values):
    total = float(sum(values))
    if not values or total == 0:
        return 1.0
    return total * total / (len(values) * sum(v * v for v in values))


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1,
            max(0, int(math.ceil(p / 100.0 * len(sorted_values))) - 1))
    return sorted_values[k]


def node_of(bucket, nb, nodes):
    """The node of a bucket's CPU: CPUs numbered node after node."""
    return bucket * nodes // nb


def local_choice(received, idle, nodes, rng):
    """The steering mode that can borrow (one bucket per CPU): the
    receiving CPU's bucket while it has an idle child, else a bucket of
    the same node with one, else any bucket with one, else the receiving
    CPU's (the connection waits there).  idle: idle children per bucket."""
    nb = len(idle)
    if idle[received]:
        return received
    home = node_of(received, nb, nodes)
    same = [c for c in range(nb) if idle[c] and node_of(c, nb, nodes) == home]
    if same:
        return rng.choice(same)
    others = [c for c in range(nb) if idle[c]]
    return rng.choice(others) if others else received


def simulate(buckets=1, workers=32, clients=48, mean_ms=10.0,
             overhead_ms=0.2, requests=100000, warmup=5000, seed=1,
             steering="hash", start_children=None, min_spare_servers=None,
             max_spare_servers=None, fork_ms=5.0, cpus=None, cpu_ms=0.0,
             nodes=1, cross_ms=0.0, sched_cross=None):
    """Runs the model; returns a dict of figures (times in ms).

    With nodes > 1, "cross_share" is the share of connections served on
    another node than the one that received them, each of which took
    cross_ms longer; sched_cross (default: (nodes - 1) / nodes, a
    scheduler that ignores the receiving CPU) is that probability for
    children that are not pinned.

    With cpus set, a request first needs cpu_ms of CPU (exponential) on one
    of that many CPUs, waiting its turn in one run queue, then mean_ms of
    waiting (exponential; 0 for none), as a request that computes and then
    waits for a database does: a busy child then holds its connection
    while the CPUs are saturated, which is what makes queue-driven spawning
    grow the pool under static load."""
    rng = random.Random(seed)
    nb = 1 if steering == "single" else buckets
    pinned = steering in ("cpu", "local")
    if sched_cross is None:
        sched_cross = (nodes - 1) / float(nodes)
    crossed = [0, 0, 0]         # on another node, another CPU, all
    start_children = workers if start_children is None else start_children
    min_total = min_spare_servers if min_spare_servers is not None \
        else max(1, workers // 8)
    max_total = max_spare_servers if max_spare_servers is not None \
        else workers
    bs = [Bucket() for _ in range(nb)]
    policy = Policy(nb, min_total, max_total, workers, steering)
    # The idle program's counts per bucket, kept as the buckets change.
    counts = (ctypes.c_int64 * nb)()
    moved = ctypes.c_int()
    child_count = collections.Counter()
    next_child = [0]
    events = []
    seq = [0]
    now = 0.0
    latencies = []
    completed = [0]
    total_children = [0]
    pending_forks = [0]

    def push(t, kind, data):
        seq[0] += 1
        heapq.heappush(events, (t, seq[0], kind, data))

    def new_child(b, at):
        next_child[0] += 1
        total_children[0] += 1
        bs[b].children += 1
        push(at, "ready", (b, next_child[0]))

    def service_time(cross):
        return overhead_ms + rng.expovariate(1.0 / mean_ms) + \
            (cross_ms if cross else 0.0)

    run_queue = collections.deque()
    running = [0]
    pool_samples = []

    def start(b, child, arrived, t):
        arrived, received = arrived
        bs[b].accepted += 1
        child_count[child] += 1
        cross = False
        if nodes > 1:
            cross = node_of(b, nb, nodes) != node_of(received, buckets,
                                                     nodes) if pinned \
                else rng.random() < sched_cross
        crossed[0] += cross
        crossed[1] += (b != received) if pinned else 1
        crossed[2] += 1
        extra = cross_ms if cross else 0.0
        if cpus is None:
            push(t + service_time(cross), "done", (b, child, arrived))
        elif running[0] < cpus:
            running[0] += 1
            push(t + rng.expovariate(1.0 / cpu_ms) + extra, "cpu",
                 (b, child, arrived))
        else:
            run_queue.append(((b, child, arrived), extra))

    def cpu_done(data, t):
        wait = rng.expovariate(1.0 / mean_ms) if mean_ms > 0 else 0.0
        push(t + overhead_ms + wait, "done", data)
        if run_queue:
            queued, extra = run_queue.popleft()
            push(t + rng.expovariate(1.0 / cpu_ms) + extra, "cpu", queued)
        else:
            running[0] -= 1

    def recount(b):
        counts[b] = len(bs[b].idle) - len(bs[b].queue)

    def idle_steer():
        """ListenBucketSteering idle: the C rule, with a connection's hash
        and the program's random number."""
        return policy.lib.pf_steer_idle_pick(
            counts, nb, rng.getrandbits(32), rng.getrandbits(32),
            ctypes.byref(moved))

    def local_steer(received):
        return local_choice(received, [len(b.idle) for b in bs], nodes, rng)

    def arrive(t):
        # The CPU whose softirq took the SYN (RSS spreads flows evenly).
        received = rng.randrange(buckets) if buckets > 1 else 0
        if steering == "idle" and nb > 1:
            b = idle_steer()
        elif steering == "cpu":
            b = received
        elif steering == "local":
            b = local_steer(received)
        else:
            b = rng.randrange(nb) if nb > 1 else 0
        bucket = bs[b]
        if bucket.idle:
            start(b, bucket.idle.pop(), (t, received), t)
        else:
            bucket.queue.append((t, received))
        recount(b)

    def child_free(b, child, t):
        bucket = bs[b]
        if bucket.queue:
            start(b, child, bucket.queue.popleft(), t)
        else:
            bucket.idle.append(child)
        recount(b)

    def maintenance(t):
        states = [(bucket.children, len(bucket.idle), len(bucket.queue))
                  for bucket in bs]
        for b, (spawn, kill) in enumerate(policy.decide(states,
                                                        total_children[0])):
            for _ in range(spawn):
                new_child(b, t + fork_ms)
            for _ in range(kill):
                if bs[b].idle and bs[b].children > 1:
                    bs[b].idle.pop(0)
                    bs[b].children -= 1
                    total_children[0] -= 1
                    recount(b)
        push(t + 1000.0, "tick", None)

    for i in range(start_children):
        new_child(i % nb, 0.0)
    for _ in range(clients):
        push(0.0, "arrive", None)
    push(1000.0, "tick", None)

    while events and completed[0] < requests + warmup:
        now, _, kind, data = heapq.heappop(events)
        if kind == "arrive":
            arrive(now)
        elif kind == "done":
            b, child, arrived = data
            completed[0] += 1
            if completed[0] > warmup:
                latencies.append(now - arrived)
                if completed[0] == warmup + 1:
                    measure_start = now
            push(now, "arrive", None)
            child_free(b, child, now)
        elif kind == "ready":
            b, child = data
            child_free(b, child, now)
        elif kind == "cpu":
            cpu_done(data, now)
        elif kind == "tick":
            maintenance(now)
            if completed[0] > warmup:
                pool_samples.append(total_children[0])
    elapsed = now - measure_start if latencies else 0.0
    latencies.sort()
    return {
        "steering": steering, "buckets": nb, "workers": workers,
        "clients": clients, "requests": len(latencies),
        "rps": len(latencies) / (elapsed / 1000.0) if elapsed else 0.0,
        "p50": percentile(latencies, 50), "p90": percentile(latencies, 90),
        "p99": percentile(latencies, 99),
        "p99.9": percentile(latencies, 99.9),
        "mean": sum(latencies) / len(latencies) if latencies else 0.0,
        "jain_buckets": jain([b.accepted for b in bs]),
        "jain_children": jain(list(child_count.values())),
        "children_end": [b.children for b in bs],
        "pool_mean": (sum(pool_samples) / len(pool_samples)
                      if pool_samples else float(total_children[0])),
        "pool_max": max(pool_samples) if pool_samples else total_children[0],
        "cross_share": crossed[0] / float(crossed[2]) if crossed[2] else 0.0,
        # Served on another CPU than the one that received the connection
        # (pinned modes; unpinned children: all, as the model cannot say).
        "away_share": crossed[1] / float(crossed[2]) if crossed[2] else 0.0,
    }


def predict(requests=60000, seed=1):
    """Balance and tail latency at 16, 64 and 256 CPUs: one bucket per CPU
    (ListenCoresBucketsRatio 1), 16 children per CPU, 1.5 clients per child,
    exponential 10 ms service, hashing versus one shared queue."""
    rows = []
    for cpus in (16, 64, 256):
        workers = 16 * cpus
        clients = workers * 3 // 2
        for steering in ("single", "hash", "idle"):
            r = simulate(buckets=cpus, workers=workers, clients=clients,
                         requests=requests, warmup=requests // 10, seed=seed,
                         steering=steering)
            r["cpus"] = cpus
            rows.append(r)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buckets", type=int, default=2)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--clients", type=int, default=48)
    parser.add_argument("--mean-ms", type=float, default=10.0)
    parser.add_argument("--overhead-ms", type=float, default=0.2)
    parser.add_argument("--requests", type=int, default=100000)
    parser.add_argument("--steering", choices=("hash", "single", "idle",
                                               "cpu", "local"),
                        default="hash")
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--cross-ms", type=float, default=0.0,
                        help="cost of serving a connection on another node "
                        "than the one that received it")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpus", type=int, default=None,
                        help="CPUs the children share (default: no CPU "
                        "contention)")
    parser.add_argument("--cpu-ms", type=float, default=0.0,
                        help="CPU time per request with --cpus")
    parser.add_argument("--start", type=int, default=None,
                        help="StartServers (default: MaxRequestWorkers)")
    parser.add_argument("--min-spare", type=int, default=None)
    parser.add_argument("--max-spare", type=int, default=None)
    parser.add_argument("--predict", action="store_true")
    args = parser.parse_args()
    if args.predict:
        for r in predict():
            print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                              for k, v in r.items()
                              if k != "children_end"}))
        return 0
    r = simulate(buckets=args.buckets, workers=args.workers,
                 clients=args.clients, mean_ms=args.mean_ms,
                 overhead_ms=args.overhead_ms, requests=args.requests,
                 seed=args.seed, steering=args.steering, cpus=args.cpus,
                 cpu_ms=args.cpu_ms, start_children=args.start,
                 min_spare_servers=args.min_spare,
                 max_spare_servers=args.max_spare, nodes=args.nodes,
                 cross_ms=args.cross_ms)
    print(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())


def write_report(measured, workers, clients, cpus, out_path,
                 requests=200000):
    """sim-report.md: the model against this machine's measured hetero runs
    (measured: {"single": {...}, "hash": {...}, "buckets": N}), then its
    predictions at 16, 64 and 256 CPUs."""
    lines = ["# Scale model report", "",
             "Model: `bench/sim/bucketsim.py` (closed-loop clients, "
             "uniform hashing of new connections to buckets or one shared "
             "queue, FIFO accept queues, exponential service time with mean "
             "10 ms plus 0.2 ms per-request overhead, the MPM's per-bucket "
             "maintenance rules once a simulated second).", "",
             "## Against this machine", "",
             "Same shape as the measured `hetero` scenario: %d children "
             "(MaxRequestWorkers), %d clients." % (workers, clients), "",
             "| case | source | req/s | p50 ms | p90 ms | p99 ms |",
             "|---|---|---|---|---|---|"]
    for case, buckets in (("single", 1), ("hash", measured.get("buckets",
                                                               cpus)),
                          ("idle", measured.get("idle_buckets", 0))):
        m = measured.get(case)
        if buckets < 1:
            continue
        r = simulate(buckets=buckets, workers=workers, clients=clients,
                     requests=requests, warmup=requests // 10,
                     steering=case)
        label = "one shared queue" if case == "single" \
            else "%d hashed buckets" % buckets if case == "hash" \
            else "%d buckets, idle steering" % buckets
        lines.append("| %s | model | %.0f | %.1f | %.1f | %.1f |"
                     % (label, r["rps"], r["p50"], r["p90"], r["p99"]))
        if m:
            lines.append("| %s | measured (median) | %.0f | %.1f | %.1f | "
                         "%.1f |" % (label, m["rps"], m["p50"], m["p90"],
                                     m["p99"]))
            lines.append("| %s | model ÷ measured | %.3f | %.3f | %.3f | "
                         "%.3f |" % (label, r["rps"] / m["rps"],
                                     r["p50"] / m["p50"], r["p90"] / m["p90"],
                                     r["p99"] / m["p99"]))
    lines += ["", "## Predictions", "",
              "One bucket per CPU (ListenCoresBucketsRatio 1), 16 children "
              "per CPU, 1.5 clients per child, exponential 10 ms service.",
              "", "| CPUs | children | steering | req/s | p50 ms | p99 ms | "
              "p99.9 ms | Jain buckets | Jain children |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in predict():
        lines.append("| %d | %d | %s | %.0f | %.1f | %.1f | %.1f | %.4f | "
                     "%.4f |" % (r["cpus"], r["workers"], r["steering"],
                                 r["rps"], r["p50"], r["p99"], r["p99.9"],
                                 r["jain_buckets"], r["jain_children"]))
    lines.append("")
    with open(out_path, "w") as f:
        f.write("\n".join(lines))
    return out_path
