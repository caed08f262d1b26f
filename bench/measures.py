# Licensed under the Apache License, Version 2.0; see LICENSE.
"""What the suite reads from a server after a run and from the host:
connections per bucket and per child (Jain's index), each request's
reuse distance, the children's memory, RPS locality, the host's
description, system calls per request from a sampled strace, and where
the crossnode profile moves children."""

import collections
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time

import netns
import stats
from pfbtest import HTTPD
from generators import client_prefix
from servers import make_server, start_server, server_cpus, target

# A child that waited through more requests than this since its last
# one serves cold (reuse_distance()).
COLD_REUSE = 64


def jain(values):
    values = [v for v in values]
    if not values or sum(values) == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def distribution(srv, cfg, scene=None):
    """Per-bucket and per-child (status module) and per-child (access log
    pid) counts."""
    result = {}
    scene = scene or {}
    if cfg["kind"] == "apache":
        try:
            import urllib.request
            ctx = None
            if scene.get("tls"):
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            with urllib.request.urlopen(
                    target(srv, cfg, scene, path="/bucket-status?json"),
                    timeout=10, context=ctx) as r:
                doc = json.load(r)
            if doc.get("available"):
                result["buckets"] = [b["accepted"] for b in doc["buckets"]]
                result["bucket_jain"] = doc["balance"]["buckets"]["jain"]
                result["bucket_children"] = [b["children"]["total"]
                                             for b in doc["buckets"]]
                result["status_children"] = len(doc["children"])
                result["status_child_jain"] = \
                    doc["balance"]["children"]["jain"]
        except (OSError, ValueError, KeyError):
            pass
    per_child = collections.Counter()
    for line in srv.access_log_lines():
        fields = line.split()
        # The harness's and the suite's log formats have the pid second.
        if len(fields) > 2 and fields[1].isdigit():
            per_child[fields[1]] += 1
    if per_child:
        result["children"] = sorted(per_child.values(), reverse=True)
        result["child_jain"] = jain(list(per_child.values()))
        result.update(reuse_distance(srv.access_log_lines()))
    return result


def reuse_distance(lines):
    """How long ago, in requests, each request's child last served one
    (access log order): with a process per connection, a child that
    served a moment ago is warm, one that waited through many others'
    requests is cold.  The median, and the share of requests whose child
    had waited through more than 64 (cold_share)."""
    last, dist = {}, []
    for i, line in enumerate(lines):
        fields = line.split()
        if len(fields) > 2 and fields[1].isdigit():
            if fields[1] in last:
                dist.append(i - last[fields[1]])
            last[fields[1]] = i
    if not dist:
        return {}
    dist.sort()
    return {"reuse_median": dist[len(dist) // 2],
            "cold_share": round(sum(1 for d in dist if d > COLD_REUSE)
                                / float(len(dist)), 4)}


def thread_counts(pids):
    """Each process's threads from /proc: its main thread's CPU time
    (schedstat, ns) and sleeps (voluntary switches: each ends in one
    wake-up), and the same summed over its other threads (a prefork
    child's lingering thread).  {pid: (main_ns, main_sleeps, other_ns,
    other_sleeps, other_threads)}; a process gone meanwhile is left out."""
    counts = {}
    for pid in pids:
        main = [0, 0]
        other = [0, 0, 0]
        try:
            for task in os.listdir("/proc/%d/task" % pid):
                base = "/proc/%d/task/%s/" % (pid, task)
                with open(base + "schedstat") as f:
                    ns = int(f.read().split()[0])
                sleeps = 0
                with open(base + "status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches"):
                            sleeps = int(line.split()[1])
                if int(task) == pid:
                    main = [ns, sleeps]
                else:
                    other = [other[0] + ns, other[1] + sleeps, other[2] + 1]
        except (OSError, ValueError, IndexError):
            continue
        counts[pid] = tuple(main + other)
    return counts


def thread_delta(before, after, requests, connections):
    """What the processes alive at both readings did between them, per
    request and per connection: the main threads' busy µs, the other
    threads' busy µs and wake-ups (their sleeps), and how many other
    threads there were."""
    main_ns = main_sleeps = other_ns = other_sleeps = threads = 0
    for pid, now in after.items():
        then = before.get(pid)
        if then is None:
            continue
        main_ns += now[0] - then[0]
        main_sleeps += now[1] - then[1]
        other_ns += now[2] - then[2]
        other_sleeps += now[3] - then[3]
        threads += now[4]
    if not requests or not connections:
        return {}
    return {"main_busy_us_per_request": main_ns / 1e3 / requests,
            "main_sleeps_per_request": main_sleeps / float(requests),
            "thread_busy_us_per_request": other_ns / 1e3 / requests,
            "thread_wakeups_per_connection": other_sleeps
            / float(connections),
            "other_threads": threads}


def children_memory(pids):
    """Total RSS and PSS (kB) of these processes.  PSS divides each shared
    page among the processes that map it, so forked children that share
    the parent's pages are not counted many times over."""
    rss = pss = 0
    for pid in pids:
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return {"rss_kb": rss, "pss_kb": pss}


def rps_locality(result, args, scene):
    """Share of connections in the buckets of the CPUs that RPS sends
    packets to.  With one bucket per server CPU (bucket j on the j-th
    server CPU, as cpu steering maps them), a connection whose SYN was
    processed on CPU c and that landed on c's bucket counts here; when
    RPS covers only some CPUs, cpu steering should put every connection
    there, and hash or idle about the covered CPUs' share."""
    buckets = result.get("distribution", {}).get("buckets")
    cpus = server_cpus(args)
    if not buckets or len(buckets) != len(cpus) or not sum(buckets):
        return None
    covered = set(scene["veth"].rps_cpus)
    if covered >= set(cpus):
        return None             # every bucket's CPU: nothing to tell
    local = sum(n for cpu, n in zip(cpus, buckets) if cpu in covered)
    return round(local / float(sum(buckets)), 4)


def host_info():
    def cmd(command):
        try:
            out = subprocess.run(command, capture_output=True, text=True,
                                 timeout=10)
            return (out.stdout + out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "n/a"

    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return "n/a"
    sockets = "n/a"
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"^Socket\(s\):\s+(\d+)", lscpu, re.M)
    if m:
        sockets = int(m.group(1))
    model = re.search(r"^Model name:\s+(.*)$", lscpu, re.M)
    nodes = len([d for d in os.listdir("/sys/devices/system/node")
                 if re.fullmatch(r"node\d+", d)]) \
        if os.path.isdir("/sys/devices/system/node") else "n/a"
    reuseport = "no"
    try:
        a, b = socket.socket(), socket.socket()
        for s in (a, b):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", a.getsockname()[1]))
        reuseport = "yes"
        a.close()
        b.close()
    except OSError:
        pass
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "cpus_online": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": model.group(1) if model else "n/a",
        "sockets": sockets, "numa_nodes": nodes,
        "kernel": os.uname().release,
        "so_reuseport": reuseport,
        "tcp_migrate_req": read("/proc/sys/net/ipv4/tcp_migrate_req"),
        "somaxconn": read("/proc/sys/net/core/somaxconn"),
        "apache2": cmd([HTTPD, "-v"]),
        "nginx": cmd(["nginx", "-v"]),
        "wrk": cmd(["wrk", "-v"]),
        "ab": cmd(["ab", "-V"]),
        "gcc": cmd(["gcc", "--version"]),
        "python": sys.version.split()[0],
    }


def syscalls_per_request(cfg, args, plan, out_dir, log):
    """strace -c -f of every server process over 1000 requests (ab -c 4,
    HTTP/1.0, a connection each): system calls per request, the most
    frequent ones, and poll()s per accept, which shows a lingering close
    that sleeps."""
    requests = 1000
    trace = os.path.join(out_dir, "strace-%s.txt" % cfg["key"])
    with make_server(cfg, args, plan) as srv:
        start_server(srv, cfg, plan)
        pids = [srv.proc.pid] + srv.children()
        tracer = subprocess.Popen(
            ["strace", "-c", "-f", "-o", trace]
            + sum((["-p", str(p)] for p in pids), []),
            stderr=subprocess.DEVNULL)
        wait_traced(pids)
        command = client_prefix(args) + [
            "ab", "-q", "-n", str(requests), "-c", "4",
            target(srv, cfg, {})]
        subprocess.run(["timeout", "120"] + command, capture_output=True)
        log.write("$ strace -c -f -o %s -p <each server process> ; %s\n"
                  % (trace, " ".join(command)))
        tracer.send_signal(signal.SIGINT)
        try:
            tracer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            tracer.kill()
    calls = {}
    try:
        with open(trace) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 5 and fields[-1].isidentifier() and \
                        fields[3].isdigit() and fields[-1] != "total":
                    calls[fields[-1]] = int(fields[3])
    except OSError:
        return {}
    total = sum(calls.values())
    top = sorted(calls.items(), key=lambda kv: -kv[1])[:10]
    accepts = calls.get("accept4", 0) + calls.get("accept", 0)
    polls = sum(calls.get(k, 0) for k in ("poll", "ppoll"))
    return {"per_request": round(total / float(requests), 1),
            "requests": requests, "calls": calls,
            "poll_per_accept": round(polls / float(accepts), 3)
            if accepts else None,
            "top": {k: round(v / float(requests), 2) for k, v in top}}


def wait_traced(pids, timeout=30):
    """Waits until strace is attached to every pid (TracerPid set)."""
    def traced(pid):
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("TracerPid:"):
                        return int(line.split()[1]) != 0
        except OSError:
            return True         # gone: nothing left to wait for
        return False
    deadline = time.time() + timeout
    while time.time() < deadline and not all(traced(p) for p in pids):
        time.sleep(0.05)


def cpu_nodes():
    """{cpu: NUMA node} from sysfs ({} without NUMA information)."""
    nodes = {}
    base = "/sys/devices/system/node"
    if not os.path.isdir(base):
        return nodes
    for name in os.listdir(base):
        m = re.fullmatch(r"node(\d+)", name)
        if not m:
            continue
        try:
            with open(os.path.join(base, name, "cpulist")) as f:
                for cpu in netns.cpu_list(f.read().strip()):
                    nodes[cpu] = int(m.group(1))
        except (OSError, ValueError):
            continue
    return nodes


def away_cpu(cpu, cpus, nodes):
    """Where pfb-N-cpu-away runs the children of `cpu`'s bucket: with the
    server's CPUs on several nodes, the CPU of the same rank on the next
    node (whatever the numbering: interleaved too); on one node, the CPU
    half the list away."""
    by_node = collections.defaultdict(list)
    for c in cpus:
        by_node[nodes.get(c, 0)].append(c)
    order = sorted(by_node)
    if len(order) > 1:
        here = nodes.get(cpu, 0)
        there = by_node[order[(order.index(here) + 1) % len(order)]]
        return there[by_node[here].index(cpu) % len(there)]
    return cpus[(cpus.index(cpu) + len(cpus) // 2) % len(cpus)]


def pin_children_away(srv, args, log):
    """Moves each child of bucket b (pinned to the server CPU of rank b by
    BucketCPUAffinity) away (away_cpu()): the connections that cpu
    steering gives it are then served away from the CPU, or the node,
    that received them.  The pool is fixed in these runs, so no child
    starts later."""
    cpus = server_cpus(args)
    nodes = cpu_nodes()
    moved = 0
    for slot in srv.scoreboard().serving():
        if not 0 <= slot["bucket"] < len(cpus):
            continue
        target = away_cpu(cpus[slot["bucket"]], cpus, nodes)
        try:
            os.sched_setaffinity(slot["pid"], {target})
            moved += 1
        except OSError:
            continue
    log.write("# moved %d children away from their bucket's CPU\n" % moved)


def keep_latencies(result, name, key, pair, out_dir):
    """Writes the run's latency histogram (latency/*.gz) and takes the
    percentiles from it."""
    hist = result.pop("hist", None) or {}
    if not hist:
        return
    result.update(stats.hist_summary(hist))
    if out_dir and pair:
        rel = os.path.join("latency", "%s-%s-p%d.hist.gz" % (name, key, pair))
        stats.write_hist(os.path.join(out_dir, rel), hist)
        result["latency_file"] = rel
