# Licensed under the Apache License, Version 2.0; see LICENSE.
"""SO_REUSEPORT listener buckets against the real server."""

import collections
import datetime
import os
import re
import signal
import socket
import unittest

from pfbtest import (Server, Load, http_get, listen_sockets, run_user_ids,
                     NOBPF_SO, NOREUSEPORT_SO, TOP)
from pfbtest.sockets import listener_options, listening_inodes, read_options

# Options the MPM copies from a Listen's socket to its duplicates, as
# read_options() names them.
COPIED = ("backlog", "reuseaddr", "keepalive", "nodelay", "defer_accept",
          "freebind", "sndbuf", "rcvbuf")


def requests_per_bucket(srv):
    """Access-log requests counted per bucket (pid -> bucket from the log)."""
    buckets_of = srv.child_buckets()
    counts = collections.Counter()
    for line in srv.access_log_lines():
        pid = int(line.split()[1])
        counts[buckets_of.get(pid, -1)] += 1
    return counts


def parent_log_times(srv, pattern):
    """Times of the parent's error-log lines matching `pattern` (a regex),
    with the match: [(datetime, match), ...] in log order."""
    found = []
    for line in srv.error_log().splitlines():
        if "[pid %d:" % srv.proc.pid not in line:
            continue
        m = re.search(pattern, line)
        if m:
            when = datetime.datetime.strptime(line[1:line.index("]")],
                                              "%a %b %d %H:%M:%S.%f %Y")
            found.append((when, m))
    return found


def fresh_socket_defaults(family):
    """What the kernel gives a socket nobody configured: the copied
    options must differ from it, or a duplicate that copied nothing would
    look the same as one that copied everything."""
    with socket.socket(family) as s:
        return read_options(s)


class ListenerBuckets(unittest.TestCase):

    def test_listen_buckets_4_opens_4_sockets_per_listen(self):
        # MinSpareServers 8: an idle child for each of the 8 buckets.
        with Server(ports=2, extra="ListenBuckets 4\nMinSpareServers 8\n"
                    "MaxSpareServers 16\n", daemon=True) as srv:
            srv.start()
            for port in srv.ports:
                self.assertEqual(len(listen_sockets(port)), 4,
                                 "port %d: %s" % (port, listen_sockets(port)))
            self.assertIn("PFB00026: SO_REUSEPORT works; listener buckets: 8 "
                          "(4 per Listen, mode reuseport, from explicit",
                          srv.error_log())

    def test_ratio_follows_usable_cpus(self):
        cpus = len(os.sched_getaffinity(0))
        with Server(extra="ListenCoresBucketsRatio 1\n", daemon=True) as srv:
            srv.start()
            self.assertEqual(len(listen_sockets(srv.ports[0])), cpus)
            self.assertIn("listener buckets: %d (%d per Listen, mode "
                          "reuseport, from ratio" % (cpus, cpus),
                          srv.error_log())

    def test_children_spread_and_every_bucket_serves(self):
        extra = ("ListenBuckets 4\nStartServers 8\nMinSpareServers 4\n"
                 "MaxSpareServers 16\n")
        with Server(extra=extra) as srv:
            srv.start()
            ready = srv.wait_ready(8)
            buckets_of = srv.child_buckets()
            self.assertEqual({buckets_of[p] for p in ready}, {0, 1, 2, 3},
                             buckets_of)
            load = Load("127.0.0.1", srv.ports[0], concurrency=8,
                        max_requests=2000).start().wait(300)
            self.assertEqual(load.errors, {})
            self.assertTrue(srv.wait_access_log(2000))
            per_bucket = requests_per_bucket(srv)
            for b in range(4):
                self.assertGreater(per_bucket[b], 100,
                                   "bucket %d starved: %s" % (b, per_bucket))
            self.assertEqual(sum(per_bucket.values()), 2000)

    def test_last_child_of_a_bucket_is_replaced_at_once(self):
        # "At once" means in the parent's wake-up on the exit, not at the
        # next once-a-second maintenance cycle: the replacement's start
        # line follows the exit line within a small fraction of a cycle.
        # Three rounds, so a cycle that happens to come right after the
        # exit cannot pass for it three times.
        extra = ("ListenBuckets 4\nStartServers 4\nMinSpareServers 4\n"
                 "MaxSpareServers 8\n")
        with Server(extra=extra, expect_log=("PFB00035",)) as srv:
            srv.start()
            for round_ in range(3):
                srv.wait_ready(4)
                live = srv.live_buckets()
                self.assertEqual(len(live.get(2, [])), 1, live)
                victim = live[2][0]
                srv.kill_child(victim)
                self.assertTrue(srv.wait_for(
                    lambda: len(srv.live_buckets().get(2, [])) == 1))
                exited = parent_log_times(
                    srv, r"PFB00013: child pid %d slot \d+ bucket 2 " % victim)
                started = parent_log_times(
                    srv, r"PFB00009: child pid (\d+) slot \d+ bucket 2 ")
                self.assertEqual(len(exited), 1, srv.error_log()[-3000:])
                after = [t for t, _ in started if t >= exited[0][0]]
                self.assertTrue(after, "no child started in bucket 2")
                delay = (after[0] - exited[0][0]).total_seconds()
                print("round %d: bucket 2 refilled %.1f ms after its last "
                      "child exited" % (round_ + 1, delay * 1000))
                self.assertLess(delay, 0.25)
            # Nothing queued meanwhile was lost.
            load = Load("127.0.0.1", srv.ports[0], concurrency=4,
                        max_requests=200).start().wait(300)
            self.assertEqual(load.errors, {})
            self.assertEqual(load.ok, 200)

    def test_graceful_restart_renews_bucket_sockets_and_loses_nothing(self):
        """Each graceful restart puts new sockets in the buckets' places
        (whoever kept a copy of an old one loses it), in the same
        reuseport group, and the old ones hand their queued connections
        over: under load, no request fails."""
        extra = "ListenBuckets 4\nStartServers 4\n"
        with Server(extra=extra, daemon=True) as srv:
            srv.start()
            seen = set(listening_inodes(srv.ports[0]))
            self.assertEqual(len(seen), 4)
            load = Load("127.0.0.1", srv.ports[0], concurrency=8).start()
            try:
                for _ in range(5):
                    self.assertTrue(load.wait_served(100), load.errors)
                    srv.restart_gracefully()
                    # The old sockets stop once the new children run.
                    now = srv.wait_for(lambda: (lambda i: i if len(i) == 4
                                                else None)(
                        set(listening_inodes(srv.ports[0]))))
                    self.assertTrue(now, listening_inodes(srv.ports[0]))
                    self.assertFalse(now & seen, "an old socket listens")
                    seen |= now
                self.assertTrue(load.wait_served(100), load.errors)
            finally:
                load.stop()
            self.assertEqual(load.errors, {})

    def test_bucket_count_change_waits_for_full_restart(self):
        with Server(extra="ListenBuckets 4\n", daemon=True) as srv:
            srv.start()
            srv.write_conf("ListenBuckets 2\n")
            srv.graceful()
            self.assertTrue(srv.wait_log("PFB00027"))
            # A graceful restart puts new sockets in the group and hands
            # the old ones' queues over before they go: four again once
            # it has.
            four = srv.wait_for(
                lambda: len(listen_sockets(srv.ports[0])) == 4)
            self.assertTrue(four, listen_sockets(srv.ports[0]))
            srv.signal(signal.SIGHUP)
            two = srv.wait_for(
                lambda: len(listen_sockets(srv.ports[0])) == 2)
            self.assertTrue(two, listen_sockets(srv.ports[0]))
            status, _ = http_get("127.0.0.1", srv.ports[0])
            self.assertEqual(status, 200)

    def test_without_so_reuseport_one_bucket_per_listen(self):
        self.assertTrue(os.path.exists(NOREUSEPORT_SO),
                        "build the shim: make check")
        with Server(ports=2, extra="ListenBuckets 4\n",
                    env={"LD_PRELOAD": NOREUSEPORT_SO}, daemon=True,
                    expect_log=("PFB00024",)) as srv:
            srv.start()
            for port in srv.ports:
                self.assertEqual(len(listen_sockets(port)), 1)
            log = srv.error_log()
            self.assertEqual(log.count("PFB00024"), 1, log)
            self.assertIn("SO_REUSEPORT unavailable (setsockopt(SO_REUSEPORT) "
                          "failed): ListenBuckets ignored, one bucket per "
                          "Listen (2 bucket(s))", log)
            load = Load("127.0.0.1", srv.ports, concurrency=4,
                        max_requests=400).start().wait(300)
            self.assertEqual(load.errors, {})
            self.assertTrue(srv.wait_access_log(400))
            per_bucket = requests_per_bucket(srv)
            self.assertEqual(set(per_bucket), {0, 1})

    def test_more_buckets_than_max_request_workers_is_capped(self):
        extra = ("ListenBuckets 8\nMaxRequestWorkers 4\nServerLimit 4\n"
                 "StartServers 4\nMinSpareServers 4\nMaxSpareServers 5\n")
        with Server(extra=extra, expect_log=("PFB00025",),
                    daemon=True) as srv:
            srv.start()
            self.assertIn("PFB00025", srv.error_log())
            self.assertEqual(len(listen_sockets(srv.ports[0])), 4)
            status, _ = http_get("127.0.0.1", srv.ports[0])
            self.assertEqual(status, 200)

    def test_duplicates_are_the_parents_and_copy_the_originals_options(self):
        # Explicit backlog and buffers, so that copied values differ from
        # what a socket nobody configured has.
        extra = ("ListenBuckets 3\nListenBacklog 77\nSendBufferSize 131072\n"
                 "ReceiveBufferSize 98304\n")
        with Server(extra=extra) as srv:
            srv.start()
            port = srv.ports[0]
            found = listener_options(srv.proc.pid, port)
            self.assertEqual(len(found), 3, found)
            original = found[0]
            defaults = fresh_socket_defaults(socket.AF_INET)
            defaults["backlog"] = 511       # httpd's ListenBacklog default
            for name in COPIED:
                if name != "freebind":      # not set by Listen here
                    self.assertNotEqual(original[name], defaults[name], name)
            for opts in found:
                # Made by the root parent before any child existed: a
                # child (www-data) cannot add a socket to the group.
                self.assertEqual(opts["uid"], 0, opts)
                self.assertEqual(opts["address"], ("127.0.0.1", port))
                self.assertEqual((opts["acceptconn"], opts["reuseport"]),
                                 (1, 1), opts)
                for name in COPIED:
                    self.assertEqual(opts[name], original[name],
                                     "fd %d: %s" % (opts["fd"], name))
            # The kernel then keeps every other uid out of the group.
            for uid, gid in (run_user_ids(), (65534, 65534)):
                self.assertEqual(self.join_as(uid, gid, port), "refused",
                                 "uid %d joined the reuseport group" % uid)
            self.assertEqual(len(listen_sockets(port)), 3)

    @staticmethod
    def join_as(uid, gid, port):
        """Tries, as uid, to bind a SO_REUSEPORT socket to the port."""
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                os.setgid(gid)
                os.setuid(uid)
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                try:
                    s.bind(("127.0.0.1", port))
                    code = 1
                except OSError as e:
                    code = 0 if e.errno == 98 else 2    # EADDRINUSE
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        return {0: "refused", 1: "joined"}.get(
            os.waitstatus_to_exitcode(status), "error")

    def test_ipv6_listener_keeps_v6only_and_address(self):
        self.assertTrue(os.path.exists("/proc/net/if_inet6"),
                        "no IPv6 on this host")
        with Server(extra="ListenBuckets 3\n", listen_host="::1") as srv:
            srv.start()
            port = srv.ports[0]
            found = listener_options(srv.proc.pid, port)
            self.assertEqual(len(found), 3, found)
            default = fresh_socket_defaults(socket.AF_INET6)["v6only"]
            # httpd sets IPV6_V6ONLY on a specific address; it must not be
            # the kernel's default, or copying it would show nothing.
            self.assertNotEqual(found[0]["v6only"], default)
            for opts in found:
                self.assertEqual(opts["family"], socket.AF_INET6)
                self.assertEqual(opts["address"], ("::1", port))
                self.assertEqual(opts["v6only"], found[0]["v6only"],
                                 "fd %d" % opts["fd"])
            for line in listen_sockets(port):
                self.assertIn("[::1]:%d" % port, line)
            load = Load("::1", port, concurrency=4,
                        max_requests=200).start().wait(300)
            self.assertEqual((load.ok, load.errors), (200, {}))


# Debian's mpm_prefork.conf, which mod_php's users run.
DEBIAN_POOL = ("StartServers 5\nMinSpareServers 5\nMaxSpareServers 10\n"
               "MaxRequestWorkers 150\n")


class WarmBuckets(unittest.TestCase):
    """A bucket count never leaves buckets without an idle child of their
    own share of MinSpareServers without saying so: the ratio's count is
    cut down to it, and an explicit count that exceeds it is kept with a
    warning that says what to change."""

    def test_ratio_is_cut_down_to_the_spare_pool(self):
        # 2 usable CPUs, but MinSpareServers 1 keeps one bucket warm.
        extra = ("ListenCoresBucketsRatio 1\nMinSpareServers 1\n"
                 "MaxSpareServers 4\n")
        with Server(extra=extra, daemon=True) as srv:
            srv.start()
            cpus = len(os.sched_getaffinity(0))
            self.assertEqual(len(listen_sockets(srv.ports[0])), 1)
            log = srv.error_log()
            self.assertEqual(log.count("PFB00090"), 1, log)
            self.assertIn("PFB00090: ListenCoresBucketsRatio 1 asks for %d "
                          "bucket(s), but under hash steering "
                          "MinSpareServers 1 keeps an idle child in 1 at "
                          "most: using 1 per Listen, 1 in all" % cpus, log)

    def test_idle_steering_shares_the_pool_and_keeps_the_ratio(self):
        cpus = len(os.sched_getaffinity(0))
        extra = ("ListenCoresBucketsRatio 1\nMinSpareServers 1\n"
                 "MaxSpareServers 4\nListenBucketSteering idle\n")
        with Server(extra=extra, daemon=True) as srv:
            srv.start()
            self.assertEqual(len(listen_sockets(srv.ports[0])),
                             cpus if cpus >= 2 else 1)
            self.assertNotIn("PFB00090", srv.error_log())

    def test_explicit_count_that_starves_buckets_is_kept_with_a_warning(self):
        with Server(extra=DEBIAN_POOL + "ListenBuckets 16\n", daemon=True,
                    expect_log=("PFB00091",)) as srv:
            srv.start()
            self.assertEqual(len(listen_sockets(srv.ports[0])), 16)
            log = srv.error_log()
            text = ("ListenBuckets 16 makes 16 bucket(s) under hash "
                    "steering, more than MinSpareServers 5: each bucket "
                    "keeps a single idle child")
            self.assertEqual(log.count("PFB00091"), 1, log)
            self.assertIn("[mpm_prefork:warn]", [l for l in log.splitlines()
                                                 if "PFB00091" in l][0][:80])
            self.assertIn(text, log)
            self.assertIn("raise MinSpareServers to at least 16, lower "
                          "ListenBuckets to 5, or use ListenBucketSteering "
                          "idle", log)
            # At start-up the console has it too.
            self.assertIn("PFB00091: WARNING: " + text, srv.startup_output)

    def test_explicit_count_within_the_spare_pool_says_nothing(self):
        with Server(extra=DEBIAN_POOL + "ListenBuckets 5\n",
                    daemon=True) as srv:
            srv.start()
            self.assertEqual(len(listen_sockets(srv.ports[0])), 5)
            self.assertNotIn("PFB00091", srv.error_log())
            self.assertNotIn("PFB00091", srv.startup_output)


SHIPPED_CONF = os.path.join(TOP, "server", "mpm", "prefork",
                            "mpm_prefork_buckets.conf")


class ShippedConfiguration(unittest.TestCase):
    """What a2enmod mpm_prefork_buckets enables (the file itself, started
    as admins start httpd): Debian's pool and no bucket directive, so
    httpd's one bucket, whatever the Listens."""

    def test_one_bucket_for_every_listen(self):
        with Server(extra='Include "%s"\n' % SHIPPED_CONF, ports=2,
                    daemon=True) as srv:
            srv.start()
            for port in srv.ports:
                self.assertEqual(len(listen_sockets(port)), 1)
                self.assertEqual(http_get("127.0.0.1", port, "/")[0], 200)
            self.assertIn("listener buckets: 1 (1 per Listen, mode single, "
                          "from off", srv.error_log())


class RatioWithIdleSteering(unittest.TestCase):
    """The ratio with idle steering: buckets that share the spare pool;
    and, where idle steering cannot run, httpd's arrangement with one line
    that says why, never hash's per-bucket pools."""

    EXTRA = (DEBIAN_POOL + "ListenCoresBucketsRatio 1\n"
             "ListenBucketSteering idle\n")

    def test_buckets_on_with_idle_steering(self):
        cpus = len(os.sched_getaffinity(0))
        if cpus < 2:
            self.skipTest("NOT RUN: the ratio gives buckets with 2 or more "
                          "usable CPUs (have %d)" % cpus)
        with Server(extra=self.EXTRA, ports=2, daemon=True) as srv:
            srv.start()
            for port in srv.ports:
                self.assertEqual(len(listen_sockets(port)), cpus)
            log = srv.error_log()
            self.assertIn("listener buckets: %d (%d per Listen, mode "
                          "reuseport, from ratio" % (2 * cpus, cpus), log)
            self.assertIn("PFB00046: ListenBucketSteering idle: eBPF program "
                          "attached to 2 Listen(s)", log)
            for port in srv.ports:
                self.assertEqual(http_get("127.0.0.1", port, "/")[0], 200)

    def test_without_idle_steering_every_listen_shares_one_bucket(self):
        # bpf(2) fails under the shim: the ratio gives no buckets, and one
        # warning says so, at start and at each restart; no fallback to
        # hash steering.  local shares the pool as idle does.
        for mode in ("idle", "local"):
            with self.subTest(mode=mode):
                self.refused(mode)

    def refused(self, mode):
        extra = self.EXTRA.replace("ListenBucketSteering idle",
                                   "ListenBucketSteering " + mode)
        with Server(extra=extra, ports=2,
                    env={"LD_PRELOAD": NOBPF_SO}, daemon=True,
                    expect_log=("PFB00150",)) as srv:
            srv.start()
            for port in srv.ports:
                self.assertEqual(len(listen_sockets(port)), 1)
                self.assertEqual(http_get("127.0.0.1", port, "/")[0], 200)
            srv.restart_gracefully()
            log = srv.error_log()
            lines = [l for l in log.splitlines() if "PFB00150" in l]
            self.assertEqual(len(lines), 2, lines)
            self.assertIn("[mpm_prefork:warn]", lines[0])
            self.assertIn("ListenBucketSteering %s unavailable "
                          "(bpf(BPF_MAP_CREATE) of the socket map failed): "
                          "ListenCoresBucketsRatio 1 ignored, every Listen "
                          "in one bucket as in httpd's prefork" % mode,
                          lines[0])
            self.assertIn("Operation not permitted", lines[0])
            # That line stands for the bucket count's (PFB00026).
            self.assertNotIn("PFB00026", log)
            self.assertNotIn("PFB00043", log)
            self.assertNotIn("PFB00046", log)
            self.assertNotIn("PFB00160", log)
