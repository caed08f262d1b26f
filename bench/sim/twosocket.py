#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Projections to a two-socket host: static close and hetero under hash,
idle, cpu and local (the steering mode that keeps a connection on the
receiving CPU's bucket while it has an idle child, then borrows from its
own node, then from any), with a cost per connection served away from
the CPU, or the node, that received it.

  python3 twosocket.py --w-us 55 --x-away-us 8 --node-factor 2.1
  python3 twosocket.py ... --out bench/results/DIR/two-socket-projection.md

Inputs, each measured (docs/two-socket.md says how):
  --w-us         server CPU per request, static close, cpu steering with
                 every connection served on the CPU that received it
                 (suite.py --profile anchors or 16cpu: pfb-N-cpu)
  --x-away-us    extra server CPU per connection served on another CPU of
                 the same node (suite.py --profile crossnode on a
                 one-socket host: pfb-N-cpu-away minus pfb-N-cpu)
  --x-node-us    the same for another node (crossnode on a two-socket
                 host); without it, x-away-us times --node-factor (the
                 host's remote/local distance in
                 /sys/devices/system/node/node0/distance, 21/10 on most)
  --sched-cross  for children that are not pinned (hash, idle): the share
                 of connections the scheduler runs on another node;
                 default (nodes - 1) / nodes, a scheduler that ignores
                 where the packets arrived

Static close is CPU-bound with the generator on other hosts, so
req/s = CPUs / (w + x_away * away_share + x_node * node_share); the shares
come from the model (bucketsim.simulate) at the static load's shape.
Hetero (exponential 10 ms, 16 children and 24 clients per CPU) comes from
the model directly: p99 is set by queueing, and whether a mode can lend
children across buckets.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bucketsim  # noqa: E402

MODES = ("hash", "idle", "cpu", "local")


def shares(steering, cpus, nodes, sched_cross, requests, clients_per_cpu,
           mean_ms, seed=1):
    """The model's run of one mode on a host of cpus CPUs (one bucket per
    CPU, 16 children per CPU)."""
    return bucketsim.simulate(
        buckets=cpus, workers=16 * cpus, clients=clients_per_cpu * cpus,
        mean_ms=mean_ms, requests=requests, warmup=requests // 10,
        steering=steering, nodes=nodes, sched_cross=sched_cross, seed=seed,
        cross_ms=0.0)


def static_close(args):
    """req/s per mode, CPU-bound: CPUs / cost per request."""
    cpus = args.cpus_per_node * args.nodes
    x_node = args.x_node_us if args.x_node_us is not None \
        else args.x_away_us * args.node_factor
    rows = []
    for mode in MODES:
        # Static close: each request is short next to the time between a
        # client's requests through the kernel, so a bucket's children
        # are mostly idle at once or busy at once; 12 clients per CPU
        # against 16 children keeps idle children about, as wrk -c256
        # against 256-512 children does on 16 CPUs.
        r = shares(mode, cpus, args.nodes, args.sched_cross,
                   args.requests, 12, 0.1)
        node = r["cross_share"]
        # Unpinned children: another CPU of the node too, in proportion.
        away = r["away_share"] - node if mode in ("cpu", "local") \
            else 1.0 - 1.0 / cpus - node
        cost = args.w_us + args.x_away_us * max(0.0, away) + x_node * node
        rows.append({"mode": mode, "node_share": node,
                     "away_share": max(0.0, away), "cost_us": cost,
                     "rps": cpus * 1e6 / cost})
    base = [r for r in rows if r["mode"] == "cpu"][0]["rps"]
    for r in rows:
        r["vs_cpu"] = r["rps"] / base
    return rows, x_node


def hetero(args, x_node):
    cpus = args.cpus_per_node * args.nodes
    rows = []
    single = bucketsim.simulate(
        buckets=1, workers=16 * cpus, clients=24 * cpus, mean_ms=10.0,
        requests=args.requests, warmup=args.requests // 10,
        steering="single")
    for mode in MODES:
        r = bucketsim.simulate(
            buckets=cpus, workers=16 * cpus, clients=24 * cpus,
            mean_ms=10.0, requests=args.requests,
            warmup=args.requests // 10, steering=mode, nodes=args.nodes,
            sched_cross=args.sched_cross, cross_ms=x_node / 1000.0)
        r["p99_vs_single"] = r["p99"] / single["p99"]
        rows.append(r)
    return rows, single


def report(args):
    cpus = args.cpus_per_node * args.nodes
    static, x_node = static_close(args)
    het, single = hetero(args, x_node)
    lines = ["# Two-socket projection (model)", "",
             "`%s`" % " ".join(["twosocket.py"] + sys.argv[1:]), "",
             "Host: %d nodes × %d CPUs, one bucket per CPU, 16 children "
             "per CPU. Inputs: w = %.1f µs per request served on the "
             "receiving CPU, %.1f µs more on another CPU of its node, "
             "%.1f µs more on another node; children that are not pinned "
             "(hash, idle) run on another node for %s of connections." % (
                 args.nodes, args.cpus_per_node, args.w_us, args.x_away_us,
                 x_node, "%.0f %%" % (100 * args.sched_cross)
                 if args.sched_cross is not None else
                 "%.0f %%" % (100.0 * (args.nodes - 1) / args.nodes)), "",
             "## Static close (CPU-bound, generator on other hosts)", "",
             "| mode | served on another node | on another CPU of the node | "
             "µs/request | req/s | × cpu |", "|---|---|---|---|---|---|"]
    for r in static:
        lines.append("| %s | %.1f %% | %.1f %% | %.1f | %.0f | %.3f |" % (
            r["mode"], 100 * r["node_share"], 100 * r["away_share"],
            r["cost_us"], r["rps"], r["vs_cpu"]))
    lines += ["", "## Hetero (exponential 10 ms, %d children, %d clients)"
              % (16 * cpus, 24 * cpus), "",
              "One shared queue (one bucket): %.0f req/s, p99 %.1f ms." % (
                  single["rps"], single["p99"]), "",
              "| mode | req/s | p50 ms | p99 ms | p99 ÷ one bucket | served "
              "on another node |", "|---|---|---|---|---|---|"]
    for r in het:
        lines.append("| %s | %.0f | %.1f | %.1f | %.3f | %.1f %% |" % (
            r["steering"], r["rps"], r["p50"], r["p99"], r["p99_vs_single"],
            100 * r["cross_share"]))
    lines += ["", "The model has no cache: a child's first request after a "
              "long idle time costs what any other does (see the pool "
              "scenarios for that cost), and its scheduler places unpinned "
              "children by --sched-cross alone.", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.
                                     RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n", 2)[2])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--cpus-per-node", type=int, default=16)
    parser.add_argument("--w-us", type=float, required=True)
    parser.add_argument("--x-away-us", type=float, required=True)
    parser.add_argument("--x-node-us", type=float)
    parser.add_argument("--node-factor", type=float, default=2.1)
    parser.add_argument("--sched-cross", type=float)
    parser.add_argument("--requests", type=int, default=60000)
    parser.add_argument("--out")
    args = parser.parse_args()
    text = report(args)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
