# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Bad directive values stop start-up with a clear message; inconsistent
limits are corrected with a warning that says what was used."""

import unittest

from pfbtest import Server, http_get

# directive -> (lowest accepted, highest accepted).  The pool's directives
# take any whole number httpd's prefork takes and correct it as httpd does
# (CORRECTIONS below); only junk is refused.
INT_MAX = 2147483647
DIRECTIVES = {
    "StartServers": (0, INT_MAX),
    "MinSpareServers": (0, INT_MAX),
    "MaxSpareServers": (0, INT_MAX),
    "MaxRequestWorkers": (0, INT_MAX),
    "MaxClients": (0, INT_MAX),
    "ServerLimit": (0, INT_MAX),
    "MaxConnectionsPerChild": (0, INT_MAX),
    "MaxRequestsPerChild": (0, INT_MAX),
    "GracefulShutdownTimeout": (0, 2147483),
    "ListenCoresBucketsRatio": (0, INT_MAX),
    "ListenBuckets": (0, 200000),
}

BAD_VALUES = ["abc", "8x", "0x10", "1.5", "-1", "2147483648",
              "9223372036854775808", '""']

class BadConfiguration(unittest.TestCase):

    def assert_refused(self, directive, value, lo, hi):
        with Server(extra="%s %s\n" % (directive, value)) as srv:
            rc = srv.start(expect_failure=True)
            out = srv.startup_output
            self.assertNotEqual(rc, 0, "%s %s accepted" % (directive, value))
            if value == '""':
                # Core counts the arguments first and shows the help text,
                # which states the range.
                self.assertIn("%s takes one argument, an integer from %d to "
                              "%d" % (directive, lo, hi), out)
            else:
                self.assertIn("%s: '%s' is " % (directive, value), out)
                self.assertIn("expected an integer from %d to %d" % (lo, hi),
                              out)
            self.assertEqual(srv.group_processes(), [])

    def test_every_directive_refuses_bad_values(self):
        for directive, (lo, hi) in DIRECTIVES.items():
            values = list(BAD_VALUES)
            values.append(str(hi + 1))
            if lo > 0:
                values.append(str(lo - 1))
            for value in values:
                with self.subTest(directive=directive, value=value):
                    self.assert_refused(directive, value, lo, hi)

    def test_switch_directives_refuse_bad_values(self):
        cases = [("ListenBucketSteering", v, "is not a steering mode; "
                  "expected hash, cpu, idle or local")
                 for v in ("random", "hashing", "0", "idle,cpu", "locality")]
        cases += [(d, v, "is not a switch; expected On or Off")
                  for d in ("BucketCPUAffinity", "ChildSyscallFilter")
                  for v in ("yes", "1", "onn")]
        for directive, value, expected in cases:
            with self.subTest(directive=directive, value=value):
                with Server(extra="%s %s\n" % (directive, value)) as srv:
                    rc = srv.start(expect_failure=True)
                    self.assertNotEqual(rc, 0)
                    self.assertIn("%s: '%s' %s" % (directive, value, expected),
                                  srv.startup_output)
                    self.assertEqual(srv.group_processes(), [])
        with Server(extra="ListenBucketSteering\n") as srv:
            self.assertNotEqual(srv.start(expect_failure=True), 0)
            self.assertIn("ListenBucketSteering takes one argument, hash, cpu, "
                          "idle or local", srv.startup_output)

    def test_directive_outside_global_context_is_refused(self):
        for directive in ("ListenBuckets 2", "ChildSyscallFilter off"):
            extra = "<VirtualHost *:80>\n%s\n</VirtualHost>\n" % directive
            with self.subTest(directive=directive):
                with Server(extra=extra) as srv:
                    rc = srv.start(expect_failure=True)
                    self.assertNotEqual(rc, 0)
                    self.assertIn("%s cannot occur within"
                                  % directive.split()[0],
                                  srv.startup_output)

    def test_junk_reaches_the_console_when_started_as_a_daemon(self):
        # apachectl start and httpd -k start read the configuration before
        # they detach: the refusal is on the console and in the exit
        # status, and nothing is left running.
        for launcher in (True, "apachectl"):
            with self.subTest(launcher=launcher):
                with Server(extra="MaxRequestWorkers 8x\n",
                            daemon=launcher) as srv:
                    rc = srv.start(expect_failure=True)
                    self.assertNotEqual(rc, 0)
                    self.assertIn("MaxRequestWorkers: '8x' is not a whole "
                                  "number; expected an integer from 0 to "
                                  "%d" % INT_MAX, srv.startup_output)
                    self.assertEqual(srv.group_processes(), [])


# httpd 2.4's prefork (2.4.37 to 2.4.62 alike) accepts these values and
# corrects them with a warning, in its check_config hook; and in its run
# hook it silently raises MaxSpareServers above MinSpareServers and starts
# no more than MaxRequestWorkers.  Each is corrected the same way here, with
# a warning of its own: (label, configuration, tags of the warnings, the
# console's text, the MPM's answers to ap_mpm_query() afterwards).
CORRECTIONS = [
    ("ServerLimit above the compile-time limit",
     "ServerLimit 300000\nMaxRequestWorkers 10\n", ("PFB00080",),
     "ServerLimit of 300000 exceeds the compile-time limit of 200000 "
     "servers, decreasing to 200000",
     {"server-limit": 200000, "max-workers": 10}),
    ("ServerLimit 0",
     "ServerLimit 0\nMinSpareServers 1\nMaxSpareServers 2\n",
     ("PFB00081", "PFB00083", "PFB00086"),
     "ServerLimit of 0 not allowed, increasing to 1",
     {"server-limit": 1, "max-workers": 1}),
    ("MaxRequestWorkers above ServerLimit",
     "ServerLimit 8\nMaxRequestWorkers 20\n", ("PFB00083",),
     "MaxRequestWorkers of 20 exceeds ServerLimit value of 8 servers, "
     "decreasing MaxRequestWorkers to 8",
     {"server-limit": 8, "max-workers": 8}),
    ("MaxRequestWorkers 0",
     "MaxRequestWorkers 0\nMinSpareServers 1\nMaxSpareServers 2\n",
     ("PFB00084", "PFB00086"),
     "MaxRequestWorkers of 0 not allowed, increasing to 1",
     {"max-workers": 1}),
    ("MaxClients 0, the old name",
     "MaxClients 0\nMinSpareServers 1\nMaxSpareServers 2\n",
     ("PFB00084", "PFB00086"),
     "MaxRequestWorkers of 0 not allowed, increasing to 1",
     {"max-workers": 1}),
    ("StartServers 0",
     "StartServers 0\nMinSpareServers 1\nMaxSpareServers 2\n",
     ("PFB00085",), "StartServers of 0 not allowed, increasing to 1",
     {"min-spare": 1, "max-spare": 2}),
    ("StartServers above MaxRequestWorkers",
     "StartServers 12\nMaxRequestWorkers 6\nServerLimit 6\n",
     ("PFB00086",),
     "StartServers of 12 exceeds MaxRequestWorkers of 6, decreasing "
     "StartServers to 6", {"max-workers": 6}),
    ("MinSpareServers 0",
     "MinSpareServers 0\n", ("PFB00087",),
     "MinSpareServers of 0 not allowed, increasing to 1",
     {"min-spare": 1, "max-spare": 10}),
    ("MaxSpareServers 0",
     "MaxSpareServers 0\n", ("PFB00088",),
     "MaxSpareServers of 0 is not above MinSpareServers of 5, increasing "
     "MaxSpareServers to 6", {"min-spare": 5, "max-spare": 6}),
    ("MaxSpareServers below MinSpareServers",
     "MinSpareServers 10\nMaxSpareServers 5\n", ("PFB00088",),
     "MaxSpareServers of 5 is not above MinSpareServers of 10, increasing "
     "MaxSpareServers to 11", {"min-spare": 10, "max-spare": 11}),
    ("every pool directive 0",
     "ServerLimit 0\nMaxRequestWorkers 0\nStartServers 0\n"
     "MinSpareServers 0\nMaxSpareServers 0\n",
     ("PFB00081", "PFB00084", "PFB00085", "PFB00087", "PFB00088"),
     "MinSpareServers of 0 not allowed, increasing to 1",
     {"server-limit": 1, "max-workers": 1, "min-spare": 1,
      "max-spare": 2}),
]


class HttpdCorrections(unittest.TestCase):
    """Started as admins start httpd (-k start), as the stock
    configurations these come from are: each correction is printed on the
    console by the first pass over the configuration, written to the
    error log once by the second, and in force."""

    def assert_corrected(self, extra, tags, text, limits, daemon=True):
        with Server(extra=extra, expect_log=tags, daemon=daemon) as srv:
            srv.start()
            log = srv.error_log()
            # A foreground server's console is its stdout, read when it
            # exits; a daemon's is what -k start printed.
            console = srv.startup_output if daemon else None
            for tag in tags:
                self.assertEqual(log.count(tag), 1,
                                 "%s in the error log:\n%s" % (tag, log))
                if console is not None:
                    self.assertIn("%s: WARNING: " % tag, console)
            self.assertIn(text, log)
            if console is not None:
                self.assertIn(text, console)
            board = srv.scoreboard()
            for key, value in limits.items():
                self.assertEqual(board.limits.get(key), value,
                                 "%s: %s" % (key, board.limits))
            status, _ = http_get("127.0.0.1", srv.ports[0])
            self.assertEqual(status, 200)

    def test_each_of_httpds_corrections_in_daemon_mode(self):
        for label, extra, tags, text, limits in CORRECTIONS:
            with self.subTest(label):
                self.assert_corrected(extra, tags, text, limits)

    def test_corrections_read_the_same_in_the_foreground(self):
        label, extra, tags, text, limits = CORRECTIONS[2]
        self.assert_corrected(extra, tags, text, limits, daemon=False)

    def test_server_limit_kept_across_a_graceful_restart(self):
        with Server(extra="ServerLimit 16\nMaxRequestWorkers 16\n",
                    daemon=True, expect_log=("PFB00082",)) as srv:
            srv.start()
            srv.write_conf("ServerLimit 32\nMaxRequestWorkers 16\n")
            srv.restart_gracefully()
            self.assertTrue(srv.wait_log("PFB00082"))
            self.assertIn("changing ServerLimit to 32 from the original "
                          "value of 16 is not allowed during a restart",
                          srv.error_log())
            self.assertEqual(srv.log_count("PFB00082"), 1)
            self.assertEqual(srv.scoreboard().limits["server-limit"], 16)

    def test_both_bucket_directives_warn_and_explicit_wins(self):
        with Server(extra="ListenBuckets 3\nListenCoresBucketsRatio 1\n",
                    daemon=True, expect_log=("PFB00089",)) as srv:
            srv.start()
            log = srv.error_log()
            self.assertEqual(log.count("PFB00089"), 1, log)
            self.assertIn("ListenBuckets wins", log)
            self.assertIn("ListenBuckets wins", srv.startup_output)
            self.assertIn("listener buckets: 3 (3 per Listen", log)
