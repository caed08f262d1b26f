# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Bad directive values stop start-up with a clear message; inconsistent
limits are corrected with a warning that says what was used."""

import unittest

from pfbtest import Server

# directive -> (lowest accepted, highest accepted)
DIRECTIVES = {
    "StartServers": (0, 200000),
    "MinSpareServers": (1, 200000),
    "MaxSpareServers": (1, 200000),
    "MaxRequestWorkers": (1, 200000),
    "MaxClients": (1, 200000),
    "ServerLimit": (1, 200000),
    "MaxConnectionsPerChild": (0, 2147483647),
    "MaxRequestsPerChild": (0, 2147483647),
    "GracefulShutdownTimeout": (0, 2147483),
    "ListenCoresBucketsRatio": (0, 200000),
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
                  "expected hash, cpu or idle")
                 for v in ("random", "hashing", "0", "idle,cpu")]
        cases += [("BucketCPUAffinity", v, "is not a switch; expected On or "
                   "Off") for v in ("yes", "1", "onn")]
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
            self.assertIn("ListenBucketSteering takes one argument, hash, cpu "
                          "or idle", srv.startup_output)

    def test_directive_outside_global_context_is_refused(self):
        extra = "<VirtualHost *:80>\nListenBuckets 2\n</VirtualHost>\n"
        with Server(extra=extra) as srv:
            rc = srv.start(expect_failure=True)
            self.assertNotEqual(rc, 0)
            self.assertIn("ListenBuckets cannot occur within", srv.startup_output)

    def test_min_spare_above_max_spare_is_corrected(self):
        with Server(extra="MinSpareServers 10\nMaxSpareServers 5\n",
                    expect_log=("PFB00032",)) as srv:
            srv.start()
            self.assertIn("MinSpareServers of 10 is not below MaxSpareServers "
                          "of 5, increasing MaxSpareServers to 11",
                          srv.error_log())

    def test_max_request_workers_above_server_limit_is_corrected(self):
        with Server(extra="ServerLimit 8\nMaxRequestWorkers 20\n",
                    expect_log=("PFB00032",)) as srv:
            srv.start()
            self.assertIn("MaxRequestWorkers of 20 exceeds ServerLimit value "
                          "of 8 servers, decreasing MaxRequestWorkers to 8",
                          srv.error_log())

    def test_both_bucket_directives_warn_and_explicit_wins(self):
        with Server(extra="ListenBuckets 3\nListenCoresBucketsRatio 1\n",
                    expect_log=("PFB00032",)) as srv:
            srv.start()
            log = srv.error_log()
            self.assertIn("ListenBuckets wins", log)
            self.assertIn("listener buckets: 3 (3 per Listen", log)
