# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A server's CPU time from its own cgroup.

Summing /proc/PID/stat over a server's processes misses children that exit
during a run (and what they spent is added to the parent only once it reaps
them), and it cannot tell threads' time apart from the generator's on a
shared CPU.  So every server run gets a cgroup of its own: the command that
starts the server enters it first (wrapper()), every process the server
forks stays in it, and the cgroup's counter is read before and after the
measured load.  cgroup v1 (cpuacct.usage, cpuacct.stat) or v2 (cpu.stat)
where the cpu controller is enabled; without either, CPU is left out
(None) rather than guessed.  The cgroup is removed on every path, its
leftover processes killed first.
"""

import os
import signal
import time

V1 = "/sys/fs/cgroup/cpuacct"
V2_CANDIDATES = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")


def _v2_root():
    for root in V2_CANDIDATES:
        try:
            with open(os.path.join(root, "cgroup.controllers")) as f:
                if "cpu" in f.read().split():
                    return root
        except OSError:
            continue
    return None


class ServerCgroup:
    """One cgroup for one server run: a context manager."""

    def __init__(self, name):
        self.name = "pfb-bench-%d-%s" % (os.getpid(), name)
        self.path = None
        self.kind = None

    def __enter__(self):
        if os.geteuid() != 0:
            return self
        if os.path.isdir(V1):
            candidates = [("v1", V1)]
        else:
            root = _v2_root()
            candidates = [("v2", root)] if root else []
        for kind, root in candidates:
            path = os.path.join(root, self.name)
            try:
                os.mkdir(path)
            except FileExistsError:
                pass
            except OSError:
                continue
            self.path, self.kind = path, kind
            break
        return self

    def wrapper(self):
        """A command prefix that moves the command into the cgroup before
        it runs (every process it forks stays there)."""
        if not self.path:
            return []
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"',
                self.path]

    def usage(self):
        """(total, user, system) CPU seconds so far, or None."""
        if not self.path:
            return None
        try:
            if self.kind == "v1":
                with open(os.path.join(self.path, "cpuacct.usage")) as f:
                    total = int(f.read()) / 1e9
                stat = {}
                with open(os.path.join(self.path, "cpuacct.stat")) as f:
                    for line in f:
                        k, v = line.split()
                        stat[k] = int(v) / float(os.sysconf("SC_CLK_TCK"))
                return (total, stat.get("user", 0.0), stat.get("system", 0.0))
            stat = {}
            with open(os.path.join(self.path, "cpu.stat")) as f:
                for line in f:
                    k, v = line.split()
                    stat[k] = int(v) / 1e6
            return (stat.get("usage_usec", 0.0), stat.get("user_usec", 0.0),
                    stat.get("system_usec", 0.0))
        except (OSError, ValueError):
            return None

    def pids(self):
        if not self.path:
            return []
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                return [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            return []

    def __exit__(self, *exc):
        if not self.path:
            return False
        # The server was stopped already; anything left is ours to end.
        deadline = time.time() + 15
        while time.time() < deadline:
            left = self.pids()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        for _ in range(100):
            try:
                os.rmdir(self.path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
        return False


def delta(before, after):
    """CPU seconds spent between two usage() readings, or None."""
    if before is None or after is None:
        return None
    return {"total": round(after[0] - before[0], 4),
            "user": round(after[1] - before[1], 4),
            "system": round(after[2] - before[2], 4)}
