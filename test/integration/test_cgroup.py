# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Usable CPUs under a real cgroup CPU quota.

The server is started inside a new cgroup with a quota of one CPU
(cgroup v1: cpu.cfs_quota_us / cpu.cfs_period_us, as on RHEL 8 and many
Docker hosts; cgroup v2: cpu.max), and ListenCoresBucketsRatio 1 must then
give one bucket where the machine has more CPUs (test_buckets'
test_ratio_follows_usable_cpus is the same server without the quota).  A
v1 group is made below the harness's own, where a container's would be.
"""

import os
import re
import time
import unittest

from pfbtest import Server, listen_sockets
from pfbtest import DEADLINE

QUOTA_US = 100000
PERIOD_US = 100000


def mountinfo_cgroups():
    """(fstype, root, mount point, super options) of every cgroup mount."""
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            tail = fields[fields.index("-") + 1:]
            if tail[0] in ("cgroup", "cgroup2"):
                mount_point = re.sub(r"\\([0-7]{3})",
                                     lambda m: chr(int(m.group(1), 8)),
                                     fields[4])
                mounts.append((tail[0], fields[3], mount_point,
                               tail[2].split(",")))
    return mounts


def own_group(controller):
    """This process's group in the hierarchy of a v1 controller, or the
    v2 hierarchy (controller None)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            hier, controllers, path = line.rstrip("\n").split(":", 2)
            if controller is None and hier == "0" and controllers == "":
                return path
            if controller is not None and \
                    controller in controllers.split(","):
                return path
    return None


def group_dir(mount_point, root, path):
    if root != "/":
        if not (path == root or path.startswith(root + "/")):
            return None
        path = path[len(root):]
    return mount_point + (path if path != "/" else "")


def quota_group_parent():
    """Where a group with a CPU quota can be made: ("v1" or "v2", the
    directory to make it in), or (None, why not)."""
    if os.geteuid() != 0:
        return None, "making a cgroup needs root"
    mounts = mountinfo_cgroups()
    for fstype, root, mount_point, options in mounts:
        if fstype == "cgroup" and "cpu" in options:
            parent = group_dir(mount_point, root, own_group("cpu") or "/")
            if parent and os.access(parent, os.W_OK):
                return "v1", parent
    for fstype, root, mount_point, options in mounts:
        if fstype != "cgroup2":
            continue
        parent = group_dir(mount_point, root, own_group(None) or "/")
        # v2 puts processes only in leaves, and the parent must hand the
        # cpu controller down: make the group beside ours, under the
        # mount's root, where that is so.
        try:
            with open(os.path.join(mount_point,
                                   "cgroup.subtree_control")) as f:
                if "cpu" in f.read().split() and \
                        os.access(mount_point, os.W_OK):
                    return "v2", mount_point
        except OSError:
            pass
        if parent:
            return None, ("cgroup v2 at %s does not hand the cpu controller "
                          "down" % mount_point)
    return None, "no writable cgroup hierarchy with the cpu controller"


class CpuQuotaGroup:
    """A cgroup with a one-CPU quota, removed on exit."""

    def __init__(self, kind, parent):
        self.kind = kind
        self.path = os.path.join(parent, "pfb-quota-%d" % os.getpid())

    def __enter__(self):
        os.mkdir(self.path)
        if self.kind == "v1":
            self._write("cpu.cfs_period_us", "%d" % PERIOD_US)
            self._write("cpu.cfs_quota_us", "%d" % QUOTA_US)
        else:
            self._write("cpu.max", "%d %d" % (QUOTA_US, PERIOD_US))
        return self

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def wrapper(self):
        """Command prefix that moves the server into the group, then runs
        it: the group's limits hold from its first instruction."""
        return ["/bin/sh", "-c",
                'echo $$ > "$0/cgroup.procs" && exec "$@"', self.path]

    def __exit__(self, *exc):
        # The server and its children were stopped; a group can only go
        # once its last process has been reaped.
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                os.rmdir(self.path)
                return False
            except OSError:
                if not self._has_processes() or time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def _has_processes(self):
        with open(os.path.join(self.path, "cgroup.procs")) as f:
            return f.read().strip() != ""


class CgroupQuota(unittest.TestCase):

    def test_one_cpu_quota_gives_one_bucket_with_ratio_1(self):
        cpus = len(os.sched_getaffinity(0))
        if cpus < 2:
            self.skipTest("NOT RUN: needs 2 or more CPUs to tell a quota "
                          "of 1 from the CPU count (have %d)" % cpus)
        kind, parent = quota_group_parent()
        if kind is None:
            self.skipTest("NOT RUN: %s" % parent)
        with CpuQuotaGroup(kind, parent) as group:
            with Server(extra="ListenCoresBucketsRatio 1\n") as srv:
                srv.wrapper = group.wrapper()
                srv.start()
                self.assertEqual(len(listen_sockets(srv.ports[0])), 1,
                                 listen_sockets(srv.ports[0]))
                self.assertRegex(
                    srv.error_log(),
                    r"listener buckets: 1 \(1 per Listen, mode single, "
                    r"from ratio-one-per-listen: 1 usable CPU\(s\) of %d "
                    r"online, affinity "
                    r"\d+, cgroup quota 1," % os.cpu_count())
        print("cgroup %s quota of 1 CPU on %d CPUs: 1 bucket" % (kind, cpus))


if __name__ == "__main__":
    unittest.main()
