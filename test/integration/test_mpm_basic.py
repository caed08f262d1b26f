# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The MPM as a prefork: serving, the pool, restarts, recycling, stop.

Start-up, restarts and stops run the server as admins do, as a daemon
(`apache2 -k start`, and Debian's apachectl), since that is where a line
logged before the error log is open gets lost; the other tests run it in
the foreground."""

import os
import re
import signal
import socket
import unittest
import urllib.request

from pfbtest.sockets import (listening_inodes, process_socket_fds,
                             listener_options)
from pfbtest import (Server, Load, http_get, listen_sockets, read_response,
                     run_user_ids)


class PreforkBasics(unittest.TestCase):

    def test_serves_requests(self):
        with Server(daemon=True) as srv:
            srv.start()
            status, body = http_get("127.0.0.1", srv.ports[0], "/index.html")
            self.assertEqual(status, 200)
            self.assertEqual(body, b"hello from prefork buckets\n")

    def test_start_servers_children_appear(self):
        # MinSpareServers 1 below StartServers: nothing but StartServers
        # explains three children.
        with Server(extra="StartServers 3\nMinSpareServers 1\n"
                          "MaxSpareServers 10\n", daemon=True) as srv:
            srv.start()
            ready = srv.wait_ready(3)
            self.assertEqual(len(ready), 3, "children: %s" % srv.children())
            self.assertEqual(srv.wait_settled(), ready)

    def test_mod_status_reports_prefork(self):
        with Server() as srv:
            srv.start()
            with urllib.request.urlopen(srv.url("/server-status?auto"),
                                        timeout=30) as r:
                text = r.read().decode()
            self.assertIn("ServerMPM: prefork", text)
            self.assertIn("Scoreboard: ", text)

    def test_ifmodule_prefork_c_and_mpm_prefork_module_sections_apply(self):
        # One visible effect from each name the module answers to.
        with Server() as srv:
            marker = os.path.join(srv.root, "pf")
            os.mkdir(marker)
            os.chmod(marker, 0o755)
            with open(os.path.join(marker, "index.html"), "w") as f:
                f.write("prefork.c section applied\n")
            srv.extra = ('<IfModule prefork.c>\n  DocumentRoot "%s"\n'
                         '</IfModule>\n<IfModule mpm_prefork_module>\n'
                         '  <Location /pf-status>\n'
                         '    SetHandler server-status\n'
                         '  </Location>\n</IfModule>\n' % marker)
            srv.start()
            _, body = http_get("127.0.0.1", srv.ports[0], "/index.html")
            self.assertEqual(body, b"prefork.c section applied\n")
            status, body = http_get("127.0.0.1", srv.ports[0], "/pf-status")
            self.assertEqual(status, 200)
            self.assertIn(b"Server MPM: prefork", body)

    def test_children_run_as_user(self):
        # Only children that finished starting have dropped privileges:
        # a child still starting is root for a moment, by design.
        uid, gid = run_user_ids()
        with Server(extra="StartServers 3\n") as srv:
            srv.start()
            ready = srv.wait_ready(3)
            self.assertGreaterEqual(len(ready), 3, srv.children())
            for pid in ready:
                st = os.stat("/proc/%d" % pid)
                self.assertEqual((st.st_uid, st.st_gid), (uid, gid),
                                 "child %d not running as www-data" % pid)
            self.assertEqual(os.stat("/proc/%d" % srv.proc.pid).st_uid, 0)

    def test_pool_grows_under_load_and_shrinks_after(self):
        # Held keep-alive connections each occupy a child.
        extra = ("StartServers 1\nMinSpareServers 1\nMaxSpareServers 2\n"
                 "MaxRequestWorkers 30\n")
        with Server(extra=extra) as srv:
            srv.start()
            held = []
            try:
                for _ in range(12):
                    s = socket.create_connection(("127.0.0.1", srv.ports[0]),
                                                 timeout=60)
                    s.sendall(b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n")
                    read_response(s)
                    held.append(s)
                # 12 held, and at least one idle spare beside them.
                grown = srv.wait_ready(13)
                self.assertGreaterEqual(len(grown), 13, "pool did not grow: "
                                        "%d children" % len(srv.children()))
            finally:
                for s in held:
                    s.close()
            # One idle child retired per second down to MaxSpareServers.
            shrunk = srv.wait_for(lambda: len(srv.children()) <= 3,
                                  timeout=90, interval=0.5)
            self.assertTrue(shrunk, "pool did not shrink: %d children"
                            % len(srv.children()))

    def test_graceful_restart_under_load_loses_nothing(self):
        with Server(extra="StartServers 4\n", daemon=True) as srv:
            srv.start()
            load = Load("127.0.0.1", srv.ports[0], concurrency=8).start()
            try:
                for _ in range(3):
                    self.assertTrue(load.wait_served(100), load.errors)
                    srv.restart_gracefully()
                self.assertTrue(load.wait_served(100), load.errors)
            finally:
                load.stop()
            self.assertEqual(load.errors, {})
            self.assertEqual(srv.log_count("PFB00019"), 3)

    def test_max_connections_per_child_recycles_without_failures(self):
        with Server(extra="StartServers 2\nMaxConnectionsPerChild 20\n") \
                as srv:
            srv.start()
            load = Load("127.0.0.1", srv.ports[0], concurrency=4,
                        max_requests=600).start().wait(300)
            self.assertEqual(load.errors, {})
            self.assertEqual(load.ok, 600)
            self.assertTrue(srv.wait_access_log(600))
            pids = {l.split()[1] for l in srv.access_log_lines()}
            # 600 connections at 20 per child: at least 30 children.
            self.assertGreaterEqual(len(pids), 30)

    def test_sigkilled_child_is_replaced(self):
        extra = "StartServers 3\nMinSpareServers 3\nMaxSpareServers 6\n"
        with Server(extra=extra, expect_log=("PFB00035",)) as srv:
            srv.start()
            before = srv.wait_ready(3)
            self.assertGreaterEqual(len(before), 3, srv.children())
            victim = before[0]
            srv.kill_child(victim)
            after = srv.wait_ready(3)
            self.assertGreaterEqual(len(after), 3, srv.children())
            self.assertNotIn(victim, after)
            status, _ = http_get("127.0.0.1", srv.ports[0])
            self.assertEqual(status, 200)
            self.assertTrue(srv.wait_log("PFB00035: child pid %d" % victim))

    def test_k_stop_leaves_no_process(self):
        for launcher in (True, "apachectl"):
            with self.subTest(launcher=launcher), \
                    Server(extra="StartServers 4\n", daemon=launcher) as srv:
                srv.start()
                # The parent and four children that finished starting.
                self.assertGreaterEqual(len(srv.wait_ready(4)), 4)
                self.assertGreaterEqual(len(srv.group_processes()), 5)
                self.assertEqual(srv.stop(), 0)
                gone = srv.wait_for(lambda: not srv.group_processes())
                self.assertTrue(gone,
                                "left running: %s" % srv.group_processes())
                self.assertTrue(srv.wait_exit())
                self.assertFalse(os.path.exists(
                    os.path.join(srv.root, "run", "httpd.pid")))
                self.assertIn("PFB00014: caught SIGTERM, shutting down",
                              srv.error_log())

    def test_stop_lets_a_connection_teardown_finish(self):
        """A stop that finds a child clearing its connection's pool (the
        cleanups running: mod_ssl's frees the TLS state) lets the teardown
        finish before the child exits: leaving from the signal handler
        would destroy the pools from inside their own cleanups."""
        extra = ("StartServers 1\nMinSpareServers 1\nMaxSpareServers 2\n"
                 "<Location /pfb-test>\n    SetHandler pfb-test\n"
                 "</Location>\n")
        with Server(extra=extra) as srv:
            srv.start()
            s = socket.create_connection(("127.0.0.1", srv.ports[0]),
                                         timeout=60)
            # The cleanup waits for the stop's signal (30 s at most).
            s.sendall(b"GET /pfb-test?teardown=30000 HTTP/1.1\r\n"
                      b"Host: x\r\nConnection: close\r\n\r\n")
            status, _ = read_response(s)
            s.close()
            self.assertEqual(status, 200)
            self.assertTrue(srv.wait_log("PFB00181: pfb-test: teardown "
                                         "begins"))
            self.assertEqual(srv.stop(), 0)
            self.assertTrue(srv.wait_exit())
            self.assertIn("PFB00182: pfb-test: teardown ends (pid %d, "
                          "interrupted by a signal)"
                          % int(re.search(r"teardown begins \(pid (\d+)\)",
                                          srv.error_log()).group(1)),
                          srv.error_log())

    def test_graceful_stop_finishes_requests_in_flight(self):
        with Server(extra="StartServers 3\nGracefulShutdownTimeout 60\n",
                    daemon=True) as srv:
            srv.start()
            srv.wait_ready(3)
            # A connection in mid-request: headers not finished, and a
            # child reading them.
            s = socket.create_connection(("127.0.0.1", srv.ports[0]),
                                         timeout=60)
            s.sendall(b"GET /index.html HTTP/1.1\r\nHost: x\r\n")
            reading = srv.wait_for(lambda: any(
                x["status"] == "R" for x in srv.scoreboard().slots))
            self.assertTrue(reading, "no child is reading the request")
            srv.signal(signal.SIGWINCH)
            # Every copy of the listening socket closed: the parent's, and
            # the children's once they were told to finish.
            closed = srv.wait_for(lambda: not listen_sockets(srv.ports[0]))
            self.assertTrue(closed, listen_sockets(srv.ports[0]))
            s.sendall(b"Connection: close\r\n\r\n")
            status, body = read_response(s)
            s.close()
            self.assertEqual(status, 200)
            self.assertEqual(body, b"hello from prefork buckets\n")
            self.assertTrue(srv.wait_exit())
            self.assertIn("PFB00015", srv.error_log())

    def test_sighup_restart_serves_again(self):
        with Server(extra="StartServers 2\n", daemon=True) as srv:
            srv.start()
            old = set(srv.wait_ready(2))
            srv.signal(signal.SIGHUP)
            renewed = srv.wait_for(
                lambda: srv.children() and not (set(srv.children()) & old))
            self.assertTrue(renewed)
            status, _ = http_get("127.0.0.1", srv.ports[0])
            self.assertEqual(status, 200)
            self.assertIn("PFB00020", srv.error_log())

    def test_listen_buckets_0_shares_one_bucket_with_accept_mutex(self):
        """httpd's arrangement, kept for those who rely on it: every child
        polls every Listen under the accept mutex."""
        with Server(ports=2, extra="StartServers 3\nListenBuckets 0\n") \
                as srv:
            srv.start()
            load = Load("127.0.0.1", srv.ports, concurrency=6,
                        max_requests=400).start().wait(300)
            self.assertEqual(load.errors, {})
            self.assertEqual(load.ok, 400)
            self.assertIn("PFB00018: Accept mutex: ", srv.error_log())
            self.assertNotIn("Accept mutex: none", srv.error_log())
            self.assertIn("mode single", srv.error_log())

    def test_several_listens_share_one_bucket_by_default(self):
        """Neither bucket directive: httpd's arrangement, one bucket whose
        children poll every Listen under the accept mutex, whatever the
        number of Listens (at 2 CPUs a bucket per Listen lost to stock
        prefork on tails: docs/differences.md)."""
        with Server(ports=3, extra="StartServers 6\n", daemon=True) as srv:
            srv.start()
            self.assertTrue(srv.wait_log("listener buckets: 1 (1 per "
                                         "Listen, mode single, from off"))
            self.assertNotIn("Accept mutex: none", srv.error_log())
            load = Load("127.0.0.1", srv.ports, concurrency=6,
                        max_requests=300).start().wait(300)
            self.assertEqual(load.errors, {})
            self.assertEqual(load.ok, 300)
            inodes = {}
            for port in srv.ports:
                inodes.update(listening_inodes(port))
            self.assertEqual(len(inodes), 3)
            for pid in srv.wait_ready(6):
                held = [i for i in process_socket_fds(pid) if i in inodes]
                self.assertEqual(len(held), 3, "child %d" % pid)
            for port in srv.ports:
                for opts in listener_options(srv.proc.pid, port):
                    self.assertEqual(opts["reuseport"], 0)


# The MPM's own start-up lines, in order, without times and pids.
MPM_LINE = re.compile(r"\[mpm_prefork:(\w+)\] \[pid \d+(?::tid \d+)?\] "
                      r"(PFB\d{5}): (.*)")


def mpm_lines(log, until="PFB00017"):
    """(level, tag, text) of the MPM's lines up to the first `until`,
    with the numbers that differ from run to run (ports, pids) left
    out; the child start lines (debug) are left out too."""
    lines = []
    for line in log.splitlines():
        m = MPM_LINE.search(line)
        if not m or m.group(2) in ("PFB00009", "PFB00018"):
            continue
        lines.append((m.group(1), m.group(2),
                      re.sub(r"\d{4,5}", "N", m.group(3))))
        if m.group(2) == until:
            break
    return lines


class DaemonLogging(unittest.TestCase):
    """What start-up and restarts log reaches the error log under
    `apache2 -k start` and `apachectl start` as under -DFOREGROUND: a
    daemon's stderr is /dev/null until core opens the error log, so the
    MPM logs what it decided after that."""

    # A correction (PFB00083), a bucket count that starves buckets
    # (PFB00091), the plan line (PFB00026) and hash steering's program
    # (PFB00101).
    CONF = ("ServerLimit 32\nMaxRequestWorkers 64\nListenBuckets 8\n"
            "StartServers 8\n")
    TAGS = ("PFB00083", "PFB00091")

    def start_lines(self, daemon):
        with Server(extra=self.CONF, daemon=daemon,
                    expect_log=self.TAGS) as srv:
            srv.start()
            self.assertTrue(srv.wait_log("PFB00017"))
            return mpm_lines(srv.error_log()), srv.startup_output

    def test_daemon_and_apachectl_log_what_the_foreground_logs(self):
        foreground, _ = self.start_lines(False)
        tags = [tag for _, tag, _ in foreground]
        self.assertEqual(tags, ["PFB00083", "PFB00091", "PFB00026", "PFB00063",
                                "PFB00101", "PFB00017"], foreground)
        for launcher in (True, "apachectl"):
            with self.subTest(launcher=launcher):
                lines, console = self.start_lines(launcher)
                self.assertEqual(lines, foreground)
                # The console had the warnings once, from the first pass.
                for tag in self.TAGS:
                    self.assertEqual(console.count(tag + ": WARNING: "), 1,
                                     console)

    def test_restarts_log_into_the_error_log(self):
        with Server(extra=self.CONF, daemon=True,
                    expect_log=self.TAGS) as srv:
            srv.start()
            srv.restart_gracefully()
            self.assertTrue(srv.wait_log("PFB00017", 2))
            srv.signal(signal.SIGHUP)
            self.assertTrue(srv.wait_log("PFB00017", 3))
            log = srv.error_log()
            # Each generation: its correction, its warning, its plan.
            for tag in ("PFB00083", "PFB00091", "PFB00026"):
                self.assertEqual(log.count(tag), 3, "%s:\n%s" % (tag, log))
            self.assertEqual(log.count("PFB00019"), 1)
            self.assertEqual(log.count("PFB00020"), 1)

    def test_apachectl_start_graceful_and_stop(self):
        with Server(extra="StartServers 2\n", daemon="apachectl") as srv:
            srv.start()
            status, _ = http_get("127.0.0.1", srv.ports[0])
            self.assertEqual(status, 200)
            self.assertTrue(srv.wait_log("PFB00026"))
            before = srv.scoreboard().newest_generation()
            rc, out = srv.control("graceful")
            self.assertEqual(rc, 0, out)
            self.assertTrue(srv.wait_ready(1, generation=before + 1), out)
            self.assertEqual(srv.log_count("PFB00019"), 1)
            self.assertEqual(srv.stop(), 0)
            self.assertTrue(srv.wait_exit())
            self.assertEqual(srv.group_processes(), [])

    def test_apachectl_start_prints_a_bind_conflict(self):
        with Server(daemon="apachectl") as srv:
            blocker = socket.socket()
            try:
                blocker.bind(("127.0.0.1", 0))
                blocker.listen(1)
                srv.ports = [blocker.getsockname()[1]]
                srv.write_conf()
                rc, out = srv.control("start")
            finally:
                blocker.close()
            self.assertNotEqual(rc, 0)
            self.assertIn("Address already in use", out)
            self.assertIn("Action 'start' failed.", out)
            self.assertIsNone(srv.pid(), "a server started anyway")
            self.assertEqual(srv.group_processes(), [])
