# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A network namespace for the load generator, joined to this one by a
veth pair, with RPS spreading the server side's incoming packets over the
server's CPUs (the suite's `rps` scenarios).

On loopback the CPU that processes a SYN is the client's own, so `cpu`
steering is measured there in a setting it is not meant for.  Through a
veth with RPS, each flow's packets are processed on a CPU picked by the
flow's hash from rps_cpus, as a multi-queue NIC would spread them.

The server stays in this namespace and listens on the veth's address; the
load generator runs in the new namespace (`ip netns exec`).  Addresses come
from a private /30 that no route here overlaps, so traffic stays on the
pair.  Deleting the namespace deletes both ends of the veth; __exit__ does
it on every path, after ending whatever still runs in the namespace (only
the suite's own generators can).  Needs root.
"""

import ipaddress
import os
import signal
import subprocess
import time


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

    server_addr   the address the server listens on (this namespace)
    client_addr   the generator's address (in the namespace)
    prefix()      the command prefix that runs a generator there
    set_rps(cpus) RPS on the server side's receive queue
    """

    def __init__(self, log=None):
        tag = os.getpid() % 100000
        self.ns = "pfb-load-%d" % os.getpid()
        # Interface names: at most 15 characters.
        self.host_if = "pfbs%d" % tag
        self.peer_if = "pfbc%d" % tag
        self.log = log
        self.created = False
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

    def __enter__(self):
        try:
            self._run("netns", "add", self.ns)
            self.created = True
            self._run("link", "add", self.host_if, "type", "veth", "peer",
                      "name", self.peer_if, "netns", self.ns)
            self._run("addr", "add", "%s/%d" % (self.server_addr,
                                                self.prefixlen),
                      "dev", self.host_if)
            self._run("link", "set", self.host_if, "up")
            self._run("-n", self.ns, "addr", "add", "%s/%d" % (
                self.client_addr, self.prefixlen), "dev", self.peer_if)
            self._run("-n", self.ns, "link", "set", self.peer_if, "up")
            self._run("-n", self.ns, "link", "set", "lo", "up")
            self._wait_up()
        except BaseException:
            self.cleanup()
            raise
        return self

    def _wait_up(self, timeout=10):
        """The host side's address is usable (no longer tentative)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            out = _ip("-o", "addr", "show", "dev", self.host_if).stdout
            if self.server_addr in out and "tentative" not in out:
                return
            time.sleep(0.05)

    def set_rps(self, cpus):
        """Spreads the flows the server receives over these CPUs."""
        path = "/sys/class/net/%s/queues/rx-0/rps_cpus" % self.host_if
        mask = cpu_mask(cpus)
        self._say("echo %s > %s" % (mask, path))
        with open(path, "w") as f:
            f.write(mask)
        self.rps_cpus = list(cpus)

    def prefix(self):
        return ["ip", "netns", "exec", self.ns]

    def pids(self):
        out = _ip("netns", "pids", self.ns, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    def cleanup(self):
        """Ends what still runs in the namespace (the suite's generators:
        nothing else can be there), then deletes it and the veth pair."""
        if not self.created:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self.pids()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.time() + 5
            while pids and self.pids() and time.time() < deadline:
                time.sleep(0.05)
        self._say("ip netns del %s" % self.ns)
        _ip("netns", "del", self.ns, check=False)
        # Normally gone with the namespace (its peer was there).
        if os.path.exists("/sys/class/net/%s" % self.host_if):
            _ip("link", "del", self.host_if, check=False)
        self.created = False

    def __exit__(self, *exc):
        self.cleanup()
        return False
