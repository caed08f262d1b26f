# Licensed under the Apache License, Version 2.0; see LICENSE.
"""What a benchmark result must carry about the host, and the kernel's own
counters around each run.

host_state()   once per result: the commit, the versions, and the settings
               that move figures (CPU frequency governor, SMT, mitigations,
               the ephemeral port range, ulimit -n, somaxconn ...)
Counters       per run: the TCP counters nstat shows (/proc/net/netstat and
               /proc/net/snmp: ListenOverflows, ListenDrops, resets,
               retransmissions ...) and each CPU's time by kind (/proc/stat:
               softirq, idle ...), read before and after, as deltas
"""

import os
import re
import resource
import subprocess

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# The nstat counters kept per run (nstat's names: table prefix + field).
NSTAT_KEEP = ("TcpExtListenOverflows", "TcpExtListenDrops",
              "TcpExtTCPAbortOnData", "TcpExtTCPAbortOnClose",
              "TcpExtTCPAbortOnTimeout", "TcpExtTCPTimeouts",
              "TcpExtTCPSynRetrans", "TcpExtTCPReqQFullDrop",
              "TcpExtTCPBacklogDrop", "TcpExtTW", "TcpExtTWRecycled",
              "TcpExtSyncookiesSent", "TcpActiveOpens", "TcpPassiveOpens",
              "TcpAttemptFails", "TcpEstabResets", "TcpRetransSegs",
              "TcpInErrs", "TcpOutRsts")

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq",
              "steal")


def _read(path, default="n/a"):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def _cmd(command):
    try:
        out = subprocess.run(command, capture_output=True, text=True,
                             timeout=10, cwd=TOP)
        text = (out.stdout + out.stderr).strip()
        return text.splitlines()[0] if text else "n/a"
    except (OSError, subprocess.TimeoutExpired):
        return "n/a"


def commit():
    """The project's commit, with '-dirty' when the tree has changes; in a
    copy without git (run_16cpu.sh's kit), the commit its COMMIT file
    recorded when the kit was packed."""
    rev = _cmd(["git", "rev-parse", "HEAD"])
    if rev == "n/a" or " " in rev:
        packed = _read(os.path.join(TOP, "COMMIT"), None)
        if packed:
            return packed + " (packed)"
        return "n/a (not a git checkout)"
    status = subprocess.run(["git", "status", "--porcelain",
                             "--untracked-files=no"], capture_output=True,
                            text=True, cwd=TOP).stdout
    return rev + ("-dirty" if status.strip() else "")


def mitigations():
    """Each CPU vulnerability and the kernel's mitigation of it."""
    base = "/sys/devices/system/cpu/vulnerabilities"
    if not os.path.isdir(base):
        return "n/a"
    return {name: _read(os.path.join(base, name))
            for name in sorted(os.listdir(base))}


def governors():
    """The distinct cpufreq governors of the online CPUs ('n/a' in guests
    without cpufreq)."""
    found = set()
    base = "/sys/devices/system/cpu"
    for name in os.listdir(base):
        if re.fullmatch(r"cpu\d+", name):
            gov = _read(os.path.join(base, name, "cpufreq",
                                     "scaling_governor"), None)
            if gov:
                found.add(gov)
    return ",".join(sorted(found)) or "n/a (no cpufreq)"


def host_state():
    """The settings a reader needs to reproduce or doubt a figure."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {
        "commit": commit(),
        "cmdline": _read("/proc/cmdline"),
        "governor": governors(),
        "smt_active": _read("/sys/devices/system/cpu/smt/active"),
        "smt_control": _read("/sys/devices/system/cpu/smt/control"),
        "mitigations": mitigations(),
        "ip_local_port_range": " ".join(_read(
            "/proc/sys/net/ipv4/ip_local_port_range").split()),
        "tcp_tw_reuse": _read("/proc/sys/net/ipv4/tcp_tw_reuse"),
        "tcp_max_syn_backlog": _read(
            "/proc/sys/net/ipv4/tcp_max_syn_backlog"),
        "tcp_fin_timeout": _read("/proc/sys/net/ipv4/tcp_fin_timeout"),
        "netdev_max_backlog": _read("/proc/sys/net/core/netdev_max_backlog"),
        "ulimit_n": "%s/%s" % (soft, hard),
        "numa_balancing": _read("/proc/sys/kernel/numa_balancing"),
        "sched_autogroup": _read("/proc/sys/kernel/sched_autogroup_enabled"),
        "thp": _read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "load_average": _read("/proc/loadavg"),
        "openssl": _cmd(["openssl", "version"]),
        "cgroup": cgroup_layout(),
    }


def cgroup_layout():
    if os.path.isdir("/sys/fs/cgroup/cpuacct"):
        return "v1 (cpuacct)"
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "v2"
    return "n/a"


def nstat():
    """nstat's counters, absolute: {name: value}."""
    values = {}
    for path in ("/proc/net/netstat", "/proc/net/snmp"):
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for names, numbers in zip(lines[0::2], lines[1::2]):
            prefix, names = names.split(":", 1)
            _, numbers = numbers.split(":", 1)
            for name, number in zip(names.split(), numbers.split()):
                try:
                    values[prefix + name] = int(number)
                except ValueError:
                    continue
    return values


def cpu_times():
    """{cpu number: {field: ticks}} from /proc/stat."""
    times = {}
    with open("/proc/stat") as f:
        for line in f:
            m = re.match(r"cpu(\d+)\s+(.*)", line)
            if m:
                numbers = [int(x) for x in m.group(2).split()]
                times[int(m.group(1))] = dict(zip(CPU_FIELDS, numbers))
    return times


class Counters:
    """Kernel counters around one run: start(), then stop() gives the
    deltas: nstat's kept counters, and CPU seconds by kind summed over the
    server's CPUs and over the generator's (when they differ)."""

    def __init__(self, server_cpus, client_cpus=None):
        self.server_cpus = list(server_cpus)
        self.client_cpus = list(client_cpus or [])

    def start(self):
        self.nstat0 = nstat()
        self.cpu0 = cpu_times()
        return self

    def stop(self):
        nstat1, cpu1 = nstat(), cpu_times()
        ticks = float(os.sysconf("SC_CLK_TCK"))
        result = {"nstat": {k: nstat1.get(k, 0) - self.nstat0.get(k, 0)
                            for k in NSTAT_KEEP
                            if k in nstat1 or k in self.nstat0}}

        def cpu_sum(cpus):
            total = {f: 0.0 for f in CPU_FIELDS}
            for c in cpus:
                for f in CPU_FIELDS:
                    total[f] += (cpu1.get(c, {}).get(f, 0)
                                 - self.cpu0.get(c, {}).get(f, 0)) / ticks
            return {f: round(v, 3) for f, v in total.items()}
        result["cpu_server"] = cpu_sum(self.server_cpus)
        if self.client_cpus and set(self.client_cpus) != \
                set(self.server_cpus):
            result["cpu_client"] = cpu_sum(self.client_cpus)
        return result


def _sha256(path):
    import hashlib
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except (OSError, TypeError):
        return None


def build_identities(config_map):
    """What each configuration's MPM module is: its path and sha256, and
    for httpd 2.4.62's prefork built here (build/upstream/) the release
    tarball it came from (HTTPD_SRC_DIR) and the patch, by sha256; for
    Debian's modules the package version.  {config: {...}}."""
    src = os.environ.get("HTTPD_SRC_DIR") or os.path.join(
        TOP, "..", "shared", "httpd-src")
    ids = {}
    for key, cfg in config_map.items():
        so = cfg.get("mpm")
        if not so:
            continue
        one = {"module": so, "sha256": _sha256(so)}
        if os.sep + "upstream" + os.sep in so:
            one["tarball_sha256"] = _sha256(os.path.join(
                src, "httpd-2.4.62.tar.xz"))
            one["patch_sha256"] = _sha256(os.path.join(
                TOP, "build", "upstream",
                "prefork-one-listener-2.4.62.patch")) \
                if "onelistener" in so else None
        elif so.startswith("/usr/lib/apache2/"):
            one["package"] = _cmd(["dpkg-query", "-W", "-f",
                                   "${Package} ${Version}", "apache2-bin"])
        else:
            one["commit"] = commit()
        ids[key] = one
    return ids
