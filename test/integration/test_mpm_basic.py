# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The MPM as a prefork: serving, the pool, restarts, recycling, stop."""

import os
import signal
import socket
import time
import unittest
import urllib.request

from pfbtest import Server, Load, http_get, read_response, run_user_ids


class PreforkBasics(unittest.TestCase):

    def test_serves_requests(self):
        with Server() as srv:
            srv.start()
            status, body = http_get("127.0.0.1", srv.ports[0], "/index.html")
            self.assertEqual(status, 200)
            self.assertEqual(body, b"hello from prefork buckets\n")
            self.assertEqual(srv.unexpected_log_lines(), [])

    def test_start_servers_children_appear(self):
        with Server(extra="StartServers 3\nMinSpareServers 1\n"
                          "MaxSpareServers 10\n") as srv:
            srv.start()
            kids = srv.wait_for(lambda: len(srv.children()) == 3 and
                                srv.children(), timeout=5)
            self.assertTrue(kids, "expected 3 children, saw %s"
                            % srv.children())

    def test_mod_status_reports_prefork(self):
        with Server() as srv:
            srv.start()
            with urllib.request.urlopen(srv.url("/server-status?auto"),
                                        timeout=10) as r:
                text = r.read().decode()
            self.assertIn("ServerMPM: prefork", text)
            self.assertIn("Scoreboard: ", text)

    def test_ifmodule_prefork_c_sections_apply(self):
        with Server() as srv:
            marker = os.path.join(srv.root, "pf")
            os.mkdir(marker)
            os.chmod(marker, 0o755)
            with open(os.path.join(marker, "index.html"), "w") as f:
                f.write("prefork.c section applied\n")
            srv.extra = ('<IfModule prefork.c>\n  DocumentRoot "%s"\n'
                         '</IfModule>\n<IfModule mpm_prefork_module>\n'
                         '  StartServers 2\n</IfModule>\n' % marker)
            srv.start()
            _, body = http_get("127.0.0.1", srv.ports[0], "/index.html")
            self.assertEqual(body, b"prefork.c section applied\n")

    def test_children_run_as_user(self):
        uid, gid = run_user_ids()
        with Server() as srv:
            srv.start()
            for pid in srv.children():
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
                                                 timeout=20)
                    s.sendall(b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n")
                    read_response(s)
                    held.append(s)
                grown = srv.wait_for(lambda: len(srv.children()) >= 13,
                                     timeout=10)
                self.assertTrue(grown, "pool did not grow: %d children"
                                % len(srv.children()))
            finally:
                for s in held:
                    s.close()
            # One idle child retired per second down to MaxSpareServers.
            shrunk = srv.wait_for(lambda: len(srv.children()) <= 3,
                                  timeout=25, interval=0.5)
            self.assertTrue(shrunk, "pool did not shrink: %d children"
                            % len(srv.children()))

    def test_graceful_restart_under_load_loses_nothing(self):
        with Server(extra="StartServers 4\n") as srv:
            srv.start()
            load = Load("127.0.0.1", srv.ports[0], concurrency=8).start()
            time.sleep(1)
            for _ in range(3):
                srv.graceful()
                time.sleep(1.5)
            load.stop()
            self.assertGreater(load.ok, 200)
            self.assertEqual(load.errors, {})
            self.assertEqual(srv.unexpected_log_lines(), [])
            gens = srv.error_log().count("PFB00019")
            self.assertEqual(gens, 3)

    def test_max_connections_per_child_recycles_without_failures(self):
        with Server(extra="StartServers 2\nMaxConnectionsPerChild 20\n") \
                as srv:
            srv.start()
            load = Load("127.0.0.1", srv.ports[0], concurrency=4,
                        max_requests=600).start().wait(120)
            self.assertEqual(load.errors, {})
            self.assertEqual(load.ok, 600)
            srv.wait_access_log(600)
            pids = {l.split()[1] for l in srv.access_log_lines()}
            # 600 connections at 20 per child: at least 30 children.
            self.assertGreaterEqual(len(pids), 30)

    def test_sigkilled_child_is_replaced(self):
        with Server(extra="StartServers 3\nMinSpareServers 3\n"
                          "MaxSpareServers 6\n") as srv:
            srv.start()
            before = srv.wait_for(lambda: len(srv.children()) >= 3 and
                                  srv.children(), timeout=5)
            victim = before[0]
            os.kill(victim, signal.SIGKILL)
            replaced = srv.wait_for(
                lambda: victim not in srv.children()
                and len(srv.children()) >= 3, timeout=5)
            self.assertTrue(replaced, "children now: %s" % srv.children())
            status, _ = http_get("127.0.0.1", srv.ports[0])
            self.assertEqual(status, 200)
            self.assertIn("PFB00035: child pid %d" % victim, srv.error_log())

    def test_k_stop_leaves_no_process(self):
        with Server(extra="StartServers 4\n") as srv:
            srv.start()
            self.assertGreaterEqual(len(srv.group_processes()), 5)
            self.assertEqual(srv.stop(), 0)
            gone = srv.wait_for(lambda: not srv.group_processes(), timeout=10)
            self.assertTrue(gone, "left running: %s" % srv.group_processes())
            self.assertEqual(srv.proc.returncode, 0)
            self.assertFalse(os.path.exists(os.path.join(srv.root, "run",
                                                         "httpd.pid")))

    def test_graceful_stop_finishes_requests_in_flight(self):
        with Server(extra="StartServers 3\nGracefulShutdownTimeout 10\n") \
                as srv:
            srv.start()
            # A keep-alive connection in mid-request: headers not finished.
            s = socket.create_connection(("127.0.0.1", srv.ports[0]),
                                         timeout=15)
            s.sendall(b"GET /index.html HTTP/1.1\r\nHost: x\r\n")
            time.sleep(0.5)
            srv.signal(signal.SIGWINCH)
            time.sleep(0.5)
            s.sendall(b"Connection: close\r\n\r\n")
            status, body = read_response(s)
            s.close()
            self.assertEqual(status, 200)
            self.assertEqual(body, b"hello from prefork buckets\n")
            gone = srv.wait_for(lambda: srv.proc.poll() is not None,
                                timeout=15)
            self.assertTrue(gone)
            self.assertIn("PFB00015", srv.error_log())

    def test_sighup_restart_serves_again(self):
        with Server(extra="StartServers 2\n") as srv:
            srv.start()
            old = set(srv.children())
            srv.signal(signal.SIGHUP)
            renewed = srv.wait_for(
                lambda: srv.children() and not (set(srv.children()) & old),
                timeout=10)
            self.assertTrue(renewed)
            status, _ = http_get("127.0.0.1", srv.ports[0])
            self.assertEqual(status, 200)
            self.assertIn("PFB00020", srv.error_log())

    def test_several_listens_share_one_bucket_with_accept_mutex(self):
        with Server(ports=2, extra="StartServers 3\n") as srv:
            srv.start()
            load = Load("127.0.0.1", srv.ports, concurrency=6,
                        max_requests=400).start().wait(60)
            self.assertEqual(load.errors, {})
            self.assertEqual(load.ok, 400)
            self.assertEqual(srv.unexpected_log_lines(), [])


if __name__ == "__main__":
    unittest.main()
