#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Which waiting process takes the next connection, for each way a pool
can wait (build/wakeorder, bench/wakeorder.c), across pool sizes and
concurrencies, and what a hostile process can do to each: the
measurements behind the accept path's design (docs/design.md, "Which
child accepts").  Counts only (reuse distance, wake-ups and system calls
per accept), so a busy machine gives them too.

  wakeorder.py --out DIR [--rounds 3] [--connections 20000]
  wakeorder.py --report DIR      # DIR/report.md again, loose or packed

writes DIR/results.jsonl (every run), DIR/report.md (each case's median
over the rounds, with the range) and DIR/host.json (the commit and the
host).  Needs no privilege; each run is a few seconds.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import hoststate  # noqa: E402
import pack  # noqa: E402

BINARY = os.path.join(TOP, "build", "wakeorder")
MODES = ["accept", "mutex", "shared-lt", "shared-oneshot", "exclusive",
         "park"]
POOLS = [64, 256, 1024]
CONCURRENCY = [1, 4, 16]
# Several Listens in one bucket: the modes that take them.
MULTI_MODES = ["mutex", "shared-oneshot", "exclusive"]
# (mode, hostile): what one hostile process of 64 does to the others.
HOSTILE = [("accept", "hoard"), ("exclusive", "hoard"),
           ("exclusive", "hoard-first"), ("shared-lt", "hoard"),
           ("shared-oneshot", "hoard"), ("shared-lt", "del"),
           ("shared-oneshot", "del"), ("shared-lt", "dupadd"),
           ("shared-oneshot", "dupadd"), ("shared-lt", "take-top"),
           ("shared-oneshot", "take-top")]
FIGURES = ["reuse_median", "reuse_p90", "cold_share", "children_used",
           "wakeups_per_accept", "syscalls_per_accept", "blocked_accepts"]


def run(args, mode, children, concurrency, listeners=1, hostile=None):
    command = [BINARY, "--mode", mode, "--children", str(children),
               "--connections", str(args.connections), "--concurrency",
               str(concurrency), "--listeners", str(listeners)]
    if hostile:
        command += ["--hostile", hostile]
    out = subprocess.run(command, capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip()[-300:],
                "command": " ".join(command)}
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["command"] = " ".join(["build/wakeorder"] + command[1:])
    return row


def cases(args):
    for children in POOLS:
        for concurrency in CONCURRENCY:
            for mode in MODES:
                yield (mode, children, concurrency, 1, None)
    for children in POOLS[:2]:
        for concurrency in CONCURRENCY:
            for mode in MULTI_MODES:
                yield (mode, children, concurrency, 2, None)
    for mode, hostile in HOSTILE:
        yield (mode, 64, 4, 1, hostile)


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else \
        (values[mid - 1] + values[mid]) / 2.0


def summarize(rows):
    """Each case's figures: the median over its rounds, and [min, max]."""
    groups = {}
    for r in rows:
        if "error" in r:
            continue
        key = (r["mode"], r["children"], r["concurrency"], r["listeners"],
               r.get("hostile"))
        groups.setdefault(key, []).append(r)
    table = []
    for key, runs in groups.items():
        entry = {"mode": key[0], "children": key[1], "concurrency": key[2],
                 "listeners": key[3], "hostile": key[4], "rounds": len(runs),
                 "stalled": sum(1 for r in runs if "stalled_after" in r)}
        for fig in FIGURES:
            values = [r[fig] for r in runs if r.get(fig) is not None]
            if values:
                entry[fig] = (median(values), min(values), max(values))
        table.append(entry)
    return table


def fmt(entry, fig, digits):
    if fig not in entry:
        return "–"
    mid, lo, hi = entry[fig]
    text = "%.*f" % (digits, mid)
    if lo != hi:
        text += " [%.*f, %.*f]" % (digits, lo, digits, hi)
    return text


def write_report(table, host, args, path):
    lines = ["# Which waiting process takes the next connection", "",
             "Commit %s, %s, kernel %s, %d CPUs; %d connections per run, "
             "%d rounds; each figure the median over the rounds "
             "[min, max].  Made by `python3 bench/wakeorder.py --out "
             "%s --rounds %d --connections %d`; every run's command line "
             "is in results.jsonl." % (host["commit"], host["date"],
                                       host["kernel"], host["cpus"],
                                       args.connections, args.rounds,
                                       os.path.relpath(args.out, TOP),
                                       args.rounds, args.connections), ""]

    def section(title, rows):
        lines.extend(["## " + title, "",
                      "| mode | children | concurrency | reuse median | "
                      "reuse p90 | cold share | processes that accepted | "
                      "wake-ups per accept | system calls per accept | "
                      "accept()s that blocked | stalled rounds |",
                      "|---|---|---|---|---|---|---|---|---|---|---|"])
        for e in rows:
            lines.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s "
                         "| %d of %d |" % (
                             e["mode"] + (" + %s" % e["hostile"]
                                          if e["hostile"] else ""),
                             e["children"], e["concurrency"],
                             fmt(e, "reuse_median", 0),
                             fmt(e, "reuse_p90", 0),
                             fmt(e, "cold_share", 3),
                             fmt(e, "children_used", 0),
                             fmt(e, "wakeups_per_accept", 3),
                             fmt(e, "syscalls_per_accept", 3),
                             fmt(e, "blocked_accepts", 0),
                             e["stalled"], e["rounds"]))
        lines.append("")

    order = {m: i for i, m in enumerate(MODES)}

    def key(e):
        return (e["children"], e["concurrency"], order[e["mode"]])
    section("One listener", sorted(
        [e for e in table if e["listeners"] == 1 and not e["hostile"]],
        key=key))
    section("Two listeners in one bucket", sorted(
        [e for e in table if e["listeners"] == 2], key=key))
    section("One hostile process of 64 (concurrency 4)", sorted(
        [e for e in table if e["hostile"]],
        key=lambda e: (order[e["mode"]], e["hostile"])))
    with open(path, "w") as f:
        f.write("\n".join(lines))
    pack.keep_shape(os.path.dirname(path))


def report_again(folder):
    """DIR/report.md from the folder's results.jsonl and host.json (plain
    or in its raw.tar.xz), with the rounds and connections its runs
    had."""
    with pack.open_text(os.path.join(folder, "results.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    with pack.open_text(os.path.join(folder, "host.json")) as f:
        host = json.load(f)
    made = argparse.Namespace(
        out=folder, rounds=max(r["round"] for r in rows),
        connections=int(re.search(r"--connections (\d+)",
                                  rows[0]["command"]).group(1)))
    path = os.path.join(folder, "report.md")
    write_report(summarize(rows), host, made, path)
    print("report: %s" % path)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--report", metavar="DIR")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=20000)
    args = parser.parse_args()
    if args.report:
        return report_again(args.report)
    if not args.out:
        parser.error("--out DIR, or --report DIR")
    if not os.path.exists(BINARY):
        print("missing %s: make bench-build" % BINARY)
        return 2
    os.makedirs(args.out, exist_ok=True)
    state = hoststate.host_state()
    host = {"commit": state.get("commit"),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "kernel": os.uname().release, "cpus": os.cpu_count(),
            "host_state": state}
    rows = []
    with open(os.path.join(args.out, "results.jsonl"), "w") as f:
        for round_no in range(args.rounds):
            for mode, children, concurrency, listeners, hostile in \
                    cases(args):
                row = run(args, mode, children, concurrency, listeners,
                          hostile)
                row["round"] = round_no + 1
                rows.append(row)
                f.write(json.dumps(row) + "\n")
                f.flush()
                print(json.dumps(row))
                sys.stdout.flush()
    with open(os.path.join(args.out, "host.json"), "w") as f:
        json.dump(host, f, indent=1)
    write_report(summarize(rows), host, args,
                 os.path.join(args.out, "report.md"))
    print("report: %s" % os.path.join(args.out, "report.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
