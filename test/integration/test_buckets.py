# Licensed under the Apache License, Version 2.0; see LICENSE.
"""SO_REUSEPORT listener buckets against the real server."""

import collections
import os
import signal
import time
import unittest

from pfbtest import Server, Load, http_get, listen_sockets, NOREUSEPORT_SO

SHIM = NOREUSEPORT_SO


def requests_per_bucket(srv):
    """Access-log requests counted per bucket (pid -> bucket from the log)."""
    buckets_of = srv.child_buckets()
    counts = collections.Counter()
    for line in srv.access_log_lines():
        pid = int(line.split()[1])
        counts[buckets_of.get(pid, -1)] += 1
    return counts


class ListenerBuckets(unittest.TestCase):

    def test_listen_buckets_4_opens_4_sockets_per_listen(self):
        with Server(ports=2, extra="ListenBuckets 4\n") as srv:
            srv.start()
            for port in srv.ports:
                self.assertEqual(len(listen_sockets(port)), 4,
                                 "port %d: %s" % (port, listen_sockets(port)))
            self.assertIn("PFB00026: SO_REUSEPORT works; listener buckets: 8 "
                          "(4 per Listen, mode reuseport, from explicit",
                          srv.error_log())
            self.assertEqual(srv.unexpected_log_lines(), [])

    def test_ratio_follows_usable_cpus(self):
        cpus = len(os.sched_getaffinity(0))
        with Server(extra="ListenCoresBucketsRatio 1\n") as srv:
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
            spread = srv.wait_for(
                lambda: set(srv.child_buckets().values()) == {0, 1, 2, 3},
                timeout=5)
            self.assertTrue(spread, srv.child_buckets())
            load = Load("127.0.0.1", srv.ports[0], concurrency=8,
                        max_requests=2000).start().wait(120)
            self.assertEqual(load.errors, {})
            srv.wait_access_log(2000)
            per_bucket = requests_per_bucket(srv)
            for b in range(4):
                self.assertGreater(per_bucket[b], 100,
                                   "bucket %d starved: %s" % (b, per_bucket))
            self.assertEqual(sum(per_bucket.values()), 2000)

    def test_last_child_of_a_bucket_is_replaced_at_once(self):
        extra = ("ListenBuckets 4\nStartServers 4\nMinSpareServers 4\n"
                 "MaxSpareServers 8\n")
        with Server(extra=extra) as srv:
            srv.start()
            srv.wait_for(lambda: len(srv.children()) >= 4, timeout=5)
            by_bucket = collections.defaultdict(list)
            for pid, b in srv.child_buckets().items():
                if pid in srv.children():
                    by_bucket[b].append(pid)
            victims = by_bucket[2]
            self.assertEqual(len(victims), 1, by_bucket)
            killed_at = time.time()
            os.kill(victims[0], signal.SIGKILL)
            replaced = srv.wait_for(
                lambda: any(b == 2 and pid in srv.children()
                            for pid, b in srv.child_buckets().items()),
                timeout=3)
            self.assertTrue(replaced)
            self.assertLess(time.time() - killed_at, 1.5)
            # Connections meanwhile all complete, none waits forever.
            load = Load("127.0.0.1", srv.ports[0], concurrency=4,
                        max_requests=200, timeout=5).start().wait(60)
            self.assertEqual(load.errors, {})
            self.assertLess(max(load.latencies), 2.0)

    def test_graceful_restart_keeps_bucket_sockets_and_loses_nothing(self):
        extra = "ListenBuckets 4\nStartServers 4\n"
        with Server(extra=extra) as srv:
            srv.start()
            before = listen_sockets(srv.ports[0])
            load = Load("127.0.0.1", srv.ports[0], concurrency=8).start()
            for _ in range(5):
                time.sleep(1)
                srv.graceful()
            time.sleep(1)
            load.stop()
            self.assertEqual(load.errors, {})
            self.assertGreater(load.ok, 200)
            self.assertEqual(len(listen_sockets(srv.ports[0])), len(before))
            self.assertEqual(srv.unexpected_log_lines(), [])

    def test_bucket_count_change_waits_for_full_restart(self):
        with Server(extra="ListenBuckets 4\n") as srv:
            srv.start()
            srv.write_conf("ListenBuckets 2\n")
            srv.graceful()
            noticed = srv.wait_for(lambda: "PFB00027" in srv.error_log(),
                                   timeout=10)
            self.assertTrue(noticed)
            self.assertEqual(len(listen_sockets(srv.ports[0])), 4)
            srv.signal(signal.SIGHUP)
            two = srv.wait_for(
                lambda: len(listen_sockets(srv.ports[0])) == 2, timeout=10)
            self.assertTrue(two, listen_sockets(srv.ports[0]))
            status, _ = http_get("127.0.0.1", srv.ports[0])
            self.assertEqual(status, 200)

    def test_without_so_reuseport_one_bucket_per_listen(self):
        self.assertTrue(os.path.exists(SHIM), "build the shim: make check")
        with Server(ports=2, extra="ListenBuckets 4\n",
                    env={"LD_PRELOAD": SHIM}) as srv:
            srv.start()
            for port in srv.ports:
                self.assertEqual(len(listen_sockets(port)), 1)
            log = srv.error_log()
            self.assertEqual(log.count("PFB00024"), 1, log)
            self.assertIn("SO_REUSEPORT unavailable (setsockopt(SO_REUSEPORT) "
                          "failed): ListenBuckets ignored, one bucket per "
                          "Listen (2 bucket(s))", log)
            self.assertEqual(srv.unexpected_log_lines({"PFB00024"}), [])
            load = Load("127.0.0.1", srv.ports, concurrency=4,
                        max_requests=400).start().wait(60)
            self.assertEqual(load.errors, {})
            srv.wait_access_log(400)
            per_bucket = requests_per_bucket(srv)
            self.assertEqual(set(per_bucket), {0, 1})

    def test_more_buckets_than_max_request_workers_is_capped(self):
        extra = ("ListenBuckets 8\nMaxRequestWorkers 4\nServerLimit 4\n"
                 "StartServers 4\nMinSpareServers 1\nMaxSpareServers 4\n")
        with Server(extra=extra) as srv:
            srv.start()
            self.assertIn("PFB00025", srv.error_log())
            self.assertEqual(len(listen_sockets(srv.ports[0])), 4)
            status, _ = http_get("127.0.0.1", srv.ports[0])
            self.assertEqual(status, 200)

    def test_ipv6_listener_keeps_v6only_and_address(self):
        if not os.path.exists("/proc/net/if_inet6"):
            self.skipTest("no IPv6 on this host")
        with Server(extra="ListenBuckets 3\n", listen_host="::1") as srv:
            srv.start()
            socks = listen_sockets(srv.ports[0])
            self.assertEqual(len(socks), 3)
            for line in socks:
                self.assertIn("[::1]:%d" % srv.ports[0], line)


if __name__ == "__main__":
    unittest.main()
