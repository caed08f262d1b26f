# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A network namespace for the load generator, joined by a veth pair to
the server's, with RPS spreading the server side's incoming packets over
the server's CPUs (the suite's `rps` scenarios and its rig).

On loopback the CPU that processes a SYN is the client's own, so `cpu`
steering is measured there in a setting it is not meant for, and the
softirq of a connection's handshake (where stock prefork walks every
child's wait-queue entry) is charged to the generator.  Through a veth
with RPS, each flow's packets are processed on a CPU picked by the flow's
hash from rps_cpus, as a multi-queue NIC would spread them.

The load generator runs in a new namespace (`ip netns exec`).  The server
listens on the other end's address: in this namespace, or, with
server_ns=True (the rig), in a second new namespace that the suite's own
main thread enters (enter_server_ns()), so that the servers it starts,
the harness's probes and the kernel's counters it reads (/proc/net:
ListenOverflows ...) are the server namespace's alone, untouched by
whatever else runs on the host.  Addresses come from a private /30 that no
route here overlaps, so traffic stays on the pair.  Deleting the
namespaces deletes both ends of the veth; __exit__ does it on every path,
after ending whatever still runs in them (only the suite's own processes
can).  Needs root.
"""

import ctypes
import ipaddress
import os
import signal
import subprocess
import time

CLONE_NEWNET = 0x40000000


def _ip(*args, check=True):
    return subprocess.run(["ip"] + list(args), capture_output=True,
                          text=True, timeout=30, check=check)


def cpu_list(text):
    """"0-3,8" -> [0, 1, 2, 3, 8]."""
    cpus = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            cpus.extend(range(int(lo), int(hi) + 1))
        elif part.strip():
            cpus.append(int(part))
    return sorted(set(cpus))


def cpu_mask(cpus):
    """The hex mask rps_cpus takes, 32-bit words separated by commas."""
    value = sum(1 << c for c in cpus)
    words = []
    while True:
        words.append("%08x" % (value & 0xffffffff))
        value >>= 32
        if not value:
            break
    return ",".join(reversed(words))


# The generator namespace's TCP settings (VethPair.generator_ports).
GENERATOR_SYSCTLS = (("net.ipv4.tcp_tw_reuse", "1"),
                     ("net.ipv4.ip_local_port_range", "1024 65535"))


def _used_networks():
    nets = []
    for args in (["-4", "route", "show", "table", "all"],
                 ["-4", "-o", "addr", "show"]):
        for line in _ip(*args, check=False).stdout.splitlines():
            for word in line.split():
                try:
                    net = ipaddress.ip_network(word, strict=False)
                except ValueError:
                    continue
                if net.version == 4 and str(net) != "0.0.0.0/0":
                    nets.append(net)
    return nets


def free_subnet():
    """A /30 in 10.0.0.0/8 that no route or address here overlaps."""
    used = _used_networks()
    start = os.getpid() % 200
    for i in range(200):
        net = ipaddress.ip_network("10.%d.%d.0/30" % (213 + (i // 200),
                                                     (start + i) % 200))
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free 10.x /30 for the veth pair")


class VethPair:
    """Context manager: the client namespace and the veth pair.

    server_addr   the address the server listens on (this namespace, or
                  the server namespace)
    client_addr   the generator's address (in the namespace)
    prefix()      the command prefix that runs a generator there
    set_rps(cpus) RPS on the server side's receive queue
    set_client_rps(cpus)  RPS on the generator side's
    server_ns     the server namespace's name (server_ns=True), else None
    enter_server_ns()  a context manager: the calling thread (the suite's
                  main thread) in the server namespace, and back
    """

    def __init__(self, log=None, server_ns=False):
        tag = os.getpid() % 100000
        self.ns = "pfb-load-%d" % os.getpid()
        self.server_ns = "pfb-srv-%d" % os.getpid() if server_ns else None
        # Interface names: at most 15 characters.
        self.host_if = "pfbs%d" % tag
        self.peer_if = "pfbc%d" % tag
        self.log = log
        self.created = False
        self.server_created = False
        net = free_subnet()
        hosts = list(net.hosts())
        self.server_addr, self.client_addr = str(hosts[0]), str(hosts[1])
        self.prefixlen = net.prefixlen
        self.rps_cpus = []

    def _say(self, text):
        if self.log:
            self.log.write("$ %s\n" % text)

    def _run(self, *args):
        self._say("ip " + " ".join(args))
        _ip(*args)

    def _server_side(self):
        """`ip` arguments that address the server's end."""
        return ["-n", self.server_ns] if self.server_ns else []

    def __enter__(self):
        try:
            self._run("netns", "add", self.ns)
            self.created = True
            if self.server_ns:
                self._run("netns", "add", self.server_ns)
                self.server_created = True
            self._run("link", "add", self.host_if, "type", "veth", "peer",
                      "name", self.peer_if, "netns", self.ns)
            if self.server_ns:
                self._run("link", "set", self.host_if, "netns",
                          self.server_ns)
                self._run("-n", self.server_ns, "link", "set", "lo", "up")
            side = self._server_side()
            self._run(*(side + ["addr", "add", "%s/%d" % (
                self.server_addr, self.prefixlen), "dev", self.host_if]))
            self._run(*(side + ["link", "set", self.host_if, "up"]))
            self._run("-n", self.ns, "addr", "add", "%s/%d" % (
                self.client_addr, self.prefixlen), "dev", self.peer_if)
            self._run("-n", self.ns, "link", "set", self.peer_if, "up")
            self._run("-n", self.ns, "link", "set", "lo", "up")
            self.generator_ports()
            self._wait_up()
        except BaseException:
            self.cleanup()
            raise
        return self

    def generator_ports(self):
        """The generator's namespace reuses its TIME_WAIT ports and has
        every unprivileged one.  A server that closes after the client
        read its answer (httpd's lingering close shuts down after the
        response and its log line; on the veth the FIN comes through
        RPS, later than the answer) leaves TIME_WAIT on the generator's
        side; without reuse (tcp_tw_reuse 2 reuses loopback's only)
        every connect() then walks tens of thousands of occupied ports,
        and the generator, not the server, sets a closed loop's pace:
        the rig's stall (docs/benchmarks.md).  Namespace-local settings:
        the host's are untouched."""
        for key, value in GENERATOR_SYSCTLS:
            self._say("ip netns exec %s sysctl -w %s=%s"
                      % (self.ns, key, value))
            subprocess.run(["ip", "netns", "exec", self.ns, "sysctl", "-q",
                            "-w", "%s=%s" % (key, value)], check=True,
                           timeout=30, capture_output=True)

    def generator_settings(self):
        """The generator namespace's settings, for the run's record."""
        out = {}
        for key, _ in GENERATOR_SYSCTLS:
            got = subprocess.run(["ip", "netns", "exec", self.ns, "sysctl",
                                  "-n", key], capture_output=True,
                                 text=True, timeout=30).stdout
            out[key] = " ".join(got.split())
        return out

    def _wait_up(self, timeout=10):
        """The server side's address is usable (no longer tentative)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            out = _ip(*(self._server_side() + [
                "-o", "addr", "show", "dev", self.host_if])).stdout
            if self.server_addr in out and "tentative" not in out:
                return
            time.sleep(0.05)

    def _write_rps(self, ns, interface, cpus):
        """rps_cpus of every receive queue of an interface, in its
        namespace (sysfs shows a namespace's interfaces to a process of
        that namespace only: `ip netns exec` mounts its own /sys)."""
        mask = cpu_mask(cpus)
        script = ('for q in /sys/class/net/%s/queues/rx-*; do '
                  'echo %s > "$q/rps_cpus" || exit 1; done'
                  % (interface, mask))
        command = (["ip", "netns", "exec", ns] if ns else []) + \
            ["sh", "-c", script]
        self._say(" ".join(command[:-1]) + " '%s'" % script)
        subprocess.run(command, check=True, timeout=30, capture_output=True)

    def set_rps(self, cpus):
        """Spreads the flows the server receives over these CPUs."""
        self._write_rps(self.server_ns, self.host_if, cpus)
        self.rps_cpus = list(cpus)

    def set_client_rps(self, cpus):
        """Processes what the generator receives on these CPUs."""
        self._write_rps(self.ns, self.peer_if, cpus)

    def prefix(self):
        return ["ip", "netns", "exec", self.ns]

    def server_prefix(self):
        """The command prefix that runs a process in the server's
        namespace (empty: it is this one)."""
        return ["ip", "netns", "exec", self.server_ns] if self.server_ns \
            else []

    def enter_server_ns(self):
        return _ThreadInNamespace("/var/run/netns/%s" % self.server_ns)

    def pids(self, ns=None):
        out = _ip("netns", "pids", ns or self.ns, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()
                and int(p) != os.getpid()]

    def _end_processes(self, ns):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self.pids(ns)
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.time() + 5
            while pids and self.pids(ns) and time.time() < deadline:
                time.sleep(0.05)

    def cleanup(self):
        """Ends what still runs in the namespaces (the suite's servers and
        generators: nothing else can be there), then deletes them and
        the veth pair."""
        if self.server_created:
            self._end_processes(self.server_ns)
            self._say("ip netns del %s" % self.server_ns)
            _ip("netns", "del", self.server_ns, check=False)
            self.server_created = False
        if not self.created:
            return
        self._end_processes(self.ns)
        self._say("ip netns del %s" % self.ns)
        _ip("netns", "del", self.ns, check=False)
        # Normally gone with the namespace (its peer was there).
        if os.path.exists("/sys/class/net/%s" % self.host_if):
            _ip("link", "del", self.host_if, check=False)
        self.created = False

    def __exit__(self, *exc):
        self.cleanup()
        return False


DELAYLINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                         "build", "delayline")


class DelayedPair(VethPair):
    """VethPair's namespaces and addresses, joined by a delay line instead
    of a veth pair: a TUN device in each namespace and build/delayline
    between them (bench/delayline.c), which passes what the server
    sends after delay_ms and what the generator sends at once.  For
    kernels without netem; delay_ms 0 gives the same path undelayed, the
    baseline to compare with.  Needs root."""

    def __init__(self, delay_ms, log=None, server_ns=True, cpus=None):
        VethPair.__init__(self, log, server_ns)
        self.delay_ms = delay_ms
        self.cpus = cpus
        self.line = None
        self.line_result = None

    def __enter__(self):
        if not os.path.exists(DELAYLINE):
            raise RuntimeError("missing %s: make bench-build" % DELAYLINE)
        try:
            self._run("netns", "add", self.ns)
            self.created = True
            self._run("netns", "add", self.server_ns)
            self.server_created = True
            command = (["taskset", "-c", ",".join(str(c) for c in self.cpus)]
                       if self.cpus else []) + [
                DELAYLINE, "--server-ns", self.server_ns, "--client-ns",
                self.ns, "--server-if", self.host_if, "--client-if",
                self.peer_if, "--delay-ms", "%g" % self.delay_ms]
            self._say(" ".join(command))
            self.line = subprocess.Popen(command, stdout=subprocess.PIPE,
                                         text=True)
            if self.line.stdout.readline().strip() != "ready":
                raise RuntimeError("delayline did not start")
            for ns, ifname, here, there in (
                    (self.server_ns, self.host_if, self.server_addr,
                     self.client_addr),
                    (self.ns, self.peer_if, self.client_addr,
                     self.server_addr)):
                self._run("-n", ns, "addr", "add", here, "peer", there,
                          "dev", ifname)
                self._run("-n", ns, "link", "set", ifname, "up")
                self._run("-n", ns, "link", "set", "lo", "up")
            self.generator_ports()
            self._wait_up()
        except BaseException:
            self.cleanup()
            raise
        return self

    def cleanup(self):
        if self.line is not None:
            self.line.send_signal(signal.SIGTERM)
            try:
                out, _ = self.line.communicate(timeout=30)
                self.line_result = out.strip().splitlines()[-1] \
                    if out.strip() else None
            except subprocess.TimeoutExpired:
                self.line.kill()
                self.line.wait()
            self.line = None
        VethPair.cleanup(self)


class _ThreadInNamespace:
    """The calling thread in a network namespace (setns(2)) for the
    `with` block, then back in the one it came from.  Processes it starts
    and threads it creates meanwhile are born there."""

    def __init__(self, path):
        self.path = path
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.back = None

    def _setns(self, fd):
        if self.libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, "setns(%s): %s" % (self.path, os.strerror(err)))

    def __enter__(self):
        self.back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            self._setns(fd)
        except OSError:
            os.close(self.back)
            raise
        finally:
            os.close(fd)
        return self

    def __exit__(self, *exc):
        try:
            self._setns(self.back)
        finally:
            os.close(self.back)
        return False
