# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The rig: a server isolated on its own CPU of a small, shared machine.

  server     in a network namespace of its own behind a veth pair, on the
             server CPUs (default CPU 0), and so is its receive softirq:
             RPS on the server's end of the pair sends every packet the
             generator sends to the server CPUs;
  generator  in a second namespace, on the client CPUs (default CPU 1),
             with its own receive softirq there;
  the suite  pinned to the client CPUs too, its main thread in the
             server's namespace, so that the harness's probes, the
             servers it starts and the TCP counters it reads
             (ListenOverflows ...) are the server namespace's alone.

What else runs on the host is not stopped, it is measured: every run
records how much CPU other processes took during it (the root cgroup's
time, less the server's cgroup, the generator's cgroup, the suite itself,
the kernel's softirq threads and DAMON's monitor, which scans the memory
the server itself uses and is recorded apart), per CPU where cgroup v1
gives it.  A run
during which others took more than --max-foreign-cpu (5 % of a CPU) is
invalid (validity.py).  wait_quiet() holds each run back, up to a bound,
until the host has been quiet for a few seconds, so that a long profile
finishes in the machine's quiet spells.

The server's CPU per request is what its CPUs did: their busy time
(/proc/stat: all but idle and iowait, which the kernel keeps exactly on a
tickless kernel) less what others ran there, over the requests; this
counts the server's receive softirq, which a cgroup misses whenever the
CPU was idle when a packet came.
"""

import os
import re
import resource
import subprocess
import time

import netns

V1_ROOT = "/sys/fs/cgroup/cpuacct"
V2_ROOTS = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")
# A host is quiet when others took at most the bound's share of a CPU in
# one window of QUIET_WINDOW_S; after a busy one, in QUIET_WINDOWS in a
# row (a build between two compiler runs looks quiet for a moment).
QUIET_WINDOW_S = 0.5
QUIET_WINDOWS = 4


def unavailable():
    """Why the rig cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, rps_cpus, cgroups)"
    if len(os.sched_getaffinity(0)) < 2:
        return "needs two CPUs (one for the server, one for the generator)"
    if not os.path.isdir(V1_ROOT) and not _v2_root():
        return "needs a cgroup hierarchy with CPU accounting"
    return None


def _v2_root():
    for root in V2_ROOTS:
        if os.path.exists(os.path.join(root, "cpu.stat")):
            return root
    return None


def _read(path):
    with open(path) as f:
        return f.read()


def root_usage():
    """Every task's CPU so far (s): {cpu: seconds} from cgroup v1's root
    cpuacct, or {"all": seconds} from cgroup v2's root cpu.stat."""
    try:
        values = _read(os.path.join(V1_ROOT, "cpuacct.usage_percpu")).split()
        return {cpu: int(v) / 1e9 for cpu, v in enumerate(values)}
    except (OSError, ValueError):
        pass
    root = _v2_root()
    for line in _read(os.path.join(root, "cpu.stat")).splitlines():
        key, value = line.split()
        if key == "usage_usec":
            return {"all": int(value) / 1e6}
    return {"all": 0.0}


def cgroup_usage(path):
    """A cgroup's CPU so far, in the shape of root_usage()."""
    if not path:
        return {}
    try:
        values = _read(os.path.join(path, "cpuacct.usage_percpu")).split()
        return {cpu: int(v) / 1e9 for cpu, v in enumerate(values)}
    except (OSError, ValueError):
        pass
    try:
        for line in _read(os.path.join(path, "cpu.stat")).splitlines():
            key, value = line.split()
            if key == "usage_usec":
                return {"all": int(value) / 1e6}
    except (OSError, ValueError):
        pass
    return {}


def softirq_threads():
    """{cpu: pid} of the kernel's ksoftirqd threads: NET_RX that a CPU
    defers runs there, in the root cgroup, on the server's behalf."""
    found = {}
    for name, comm in _kernel_threads():
        m = re.fullmatch(r"ksoftirqd/(\d+)", comm)
        if m:
            found[int(m.group(1))] = int(name)
    return found


def damon_state():
    """Whether DAMON monitors this host, and what (for the record)."""
    base = "/sys/kernel/mm/damon/admin/kdamonds"
    out = {}
    try:
        for n in sorted(os.listdir(base)):
            if n.isdigit():
                d = os.path.join(base, n)
                out[n] = {"state": _read(d + "/state").strip(),
                          "operations": _read(
                              d + "/contexts/0/operations").strip()}
    except OSError:
        return "n/a"
    return out or "none"


def damon_threads():
    """The pids of DAMON's monitoring threads (kdamond.N), where the
    guest runs DAMON: in physical-address mode it scans the memory the
    host's processes use, so its work grows with the server's pool (about
    a third of a CPU with 4096 prefork children on the development VM).
    It works for the host, not for any other user of it: foreign()
    keeps it apart from others' CPU."""
    return [int(name) for name, comm in _kernel_threads()
            if re.fullmatch(r"kdamond\.\d+", comm)]


def _kernel_threads():
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            yield name, _read("/proc/%s/comm" % name).strip()
        except OSError:
            continue


def _thread_seconds(pid):
    try:
        return int(_read("/proc/%d/schedstat" % pid).split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def idle_times():
    """{cpu: idle + iowait seconds} from /proc/stat."""
    ticks = float(os.sysconf("SC_CLK_TCK"))
    times = {}
    for line in _read("/proc/stat").splitlines():
        m = re.match(r"cpu(\d+)\s+(.*)", line)
        if m:
            fields = [int(x) for x in m.group(2).split()]
            times[int(m.group(1))] = (fields[3] + fields[4]) / ticks
    return times


def _process_seconds(pid):
    """A process's CPU so far (s), every thread's; 0 once it is gone."""
    try:
        fields = _read("/proc/%d/stat" % pid).rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) \
            / float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


class Sample:
    """Everyone's CPU at one moment: the root cgroup's, the given
    cgroups', the softirq threads', the suite's own and its helpers'
    (the delay line), each CPU's idle."""

    def __init__(self, cgroups, ksoftirqd, helpers=(), damon=()):
        self.time = time.monotonic()
        self.root = root_usage()
        self.cgroups = [cgroup_usage(path) for path in cgroups]
        self.softirq = {cpu: _thread_seconds(pid)
                        for cpu, pid in ksoftirqd.items()}
        self.damon = sum(_thread_seconds(pid) for pid in damon)
        own = resource.getrusage(resource.RUSAGE_SELF)
        self.own = own.ru_utime + own.ru_stime \
            + sum(_process_seconds(pid) for pid in helpers)
        self.idle = idle_times()


def _delta(after, before):
    return {k: after[k] - before.get(k, 0.0) for k in after}


def foreign(before, after, server_cpus, client_cpus=()):
    """What others took between two samples: in CPUs over the whole host
    ("foreign_cpus", DAMON's monitor apart: "damon_cpus"), and in seconds
    on the server's CPUs where cgroup v1 tells CPUs apart
    ("foreign_server_s", else None; every process but the server's,
    DAMON's included, so that the server's busy time less it is the
    server's own); the server CPUs' busy seconds ("server_cpus_busy_s"),
    the share of the time the server's and the generator's CPUs were
    idle, and the elapsed time."""
    elapsed = after.time - before.time
    root = _delta(after.root, before.root)
    ours = [_delta(a, b) for a, b in zip(after.cgroups, before.cgroups)]
    softirq = _delta(after.softirq, before.softirq)
    damon = max(0.0, getattr(after, "damon", 0.0)
                - getattr(before, "damon", 0.0))
    total = sum(root.values()) - sum(sum(d.values()) for d in ours) \
        - sum(softirq.values()) - (after.own - before.own) - damon
    on_server = None
    if "all" not in root:
        on_server = sum(root.get(c, 0.0) - sum(d.get(c, 0.0) for d in ours)
                        - softirq.get(c, 0.0) for c in server_cpus)
    idle = _delta(after.idle, before.idle)
    busy = sum(max(0.0, elapsed - idle.get(c, 0.0)) for c in server_cpus)

    def idle_share(cpus):
        if not cpus or elapsed <= 0:
            return None
        return round(min(1.0, sum(idle.get(c, 0.0) for c in cpus)
                         / (elapsed * len(cpus))), 4)
    return {"elapsed_s": round(elapsed, 3),
            "damon_cpus": round(damon / elapsed, 4) if elapsed > 0 else None,
            "server_idle_share": idle_share(list(server_cpus)),
            "client_idle_share": idle_share(list(client_cpus)),
            "foreign_cpus": round(max(0.0, total) / elapsed, 4)
            if elapsed > 0 else None,
            "foreign_server_s": round(max(0.0, on_server), 4)
            if on_server is not None else None,
            "server_cpus_busy_s": round(busy, 4)}


class Rig:
    """The namespaces, the veth pair and its RPS, the suite's own CPUs:
    a context manager around every run of a profile."""

    def __init__(self, server_cpus, client_cpus, log=None, delay_ms=None):
        self.server_cpus = list(server_cpus)
        self.client_cpus = list(client_cpus)
        self.log = log
        self.delay_ms = delay_ms
        # With a delay: a delay line on the generator's CPUs in place of
        # the veth pair (delay 0: the same path, undelayed).
        self.veth = netns.VethPair(log, server_ns=True) if delay_ms is None \
            else netns.DelayedPair(delay_ms, log, True, self.client_cpus)
        self.inside = None
        self.affinity = None
        self.ksoftirqd = {}
        self.damon = []

    @property
    def server_addr(self):
        return self.veth.server_addr

    def client_prefix(self):
        """Runs a command in the generator's namespace (taskset comes
        after it, from --client-cpus)."""
        return self.veth.prefix()

    def __enter__(self):
        self.veth.__enter__()
        try:
            self.veth.set_rps(self.server_cpus)
            self.veth.set_client_rps(self.client_cpus)
            self.affinity = os.sched_getaffinity(0)
            os.sched_setaffinity(0, self.client_cpus)
            self.inside = self.veth.enter_server_ns()
            self.inside.__enter__()
            self.ksoftirqd = softirq_threads()
            self.damon = damon_threads()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        if self.inside:
            self.inside.__exit__()
            self.inside = None
        if self.affinity:
            os.sched_setaffinity(0, self.affinity)
            self.affinity = None
        self.veth.__exit__()
        if self.log and getattr(self.veth, "line_result", None):
            self.log.write("# delay line: %s\n" % self.veth.line_result)
        return False

    def sample(self, cgroups):
        line = getattr(self.veth, "line", None)
        return Sample(cgroups, self.ksoftirqd,
                      [line.pid] if line is not None else (), self.damon)

    def describe(self):
        return {"server_ns": self.veth.server_ns, "client_ns": self.veth.ns,
                "server_addr": self.server_addr,
                "client_addr": self.veth.client_addr,
                "server_rps_cpus": self.server_cpus,
                "client_rps_cpus": self.client_cpus,
                "interface": self.veth.host_if,
                "delay_ms": self.delay_ms,
                "generator_sysctls": self.veth.generator_settings(),
                "damon": damon_state()}


def wait_quiet(rig, bound_s, max_foreign, log=None):
    """Waits, up to bound_s, until others took at most max_foreign of a CPU
    in the first window, or else in QUIET_WINDOWS windows in a row (no
    run of the suite's meanwhile).  Returns (seconds waited, whether it
    got quiet)."""
    if bound_s <= 0:
        return 0.0, None
    started = time.monotonic()
    quiet, busy_seen = 0, False
    while True:
        before = rig.sample([])
        time.sleep(QUIET_WINDOW_S)
        share = foreign(before, rig.sample([]), rig.server_cpus)
        if share["foreign_cpus"] <= max_foreign:
            quiet += 1
        else:
            quiet, busy_seen = 0, True
        waited = time.monotonic() - started
        if quiet >= (QUIET_WINDOWS if busy_seen else 1):
            break
        if waited >= bound_s:
            if log:
                log.write("# host not quiet after %.0f s (others took %.0f %% "
                          "of a CPU); running anyway, the run judges itself\n"
                          % (waited, 100 * share["foreign_cpus"]))
            return round(waited, 1), False
    if log and busy_seen:
        log.write("# waited %.0f s for a quiet host\n" % waited)
    return round(waited, 1), True


def host_load():
    """The load average and the busiest processes right now (top -bn1's
    head), for the run's record."""
    try:
        out = subprocess.run(["top", "-bn1", "-w", "160"], capture_output=True,
                             text=True, timeout=20).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return []
    return out[:14]
