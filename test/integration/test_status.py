# Licensed under the Apache License, Version 2.0; see LICENSE.
"""mod_bucket_status against the real server: figures add up, every format
parses, other MPMs get "bucket data unavailable", bad queries get 400."""

import html.parser
import json
import os
import random
import re
import shutil
import subprocess
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from pfbtest import (Server, Load, MPM_STATIC, NOBPF_SO, STOCK_EVENT,
                     STOCK_PREFORK, STATUS_LOAD, STATUS_LOCATION)

LOAD_STATUS = STATUS_LOAD


def fetch(srv, path):
    """GET path; returns (status, content type, body text)."""
    try:
        with urllib.request.urlopen(srv.url(path), timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


# -- strict format checks ----------------------------------------------------

METRIC = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL_VALUE = r'"(?:[^"\\\n]|\\\\|\\"|\\n)*"'
LABELS = r"\{(?:[a-zA-Z_][a-zA-Z0-9_]*=%s(?:,[a-zA-Z_][a-zA-Z0-9_]*=%s)*)?\}" \
    % (LABEL_VALUE, LABEL_VALUE)
SAMPLE = re.compile(r"^(%s)(%s)? (-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$"
                    % (METRIC, LABELS))
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def check_prometheus(text):
    """Text exposition format 0.0.4, strictly: raises AssertionError."""
    assert text.endswith("\n"), "no final newline"
    declared, helped, seen_samples = {}, set(), set()
    current = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert re.fullmatch(METRIC, name), "line %d: bad name" % n
            assert name not in helped, "line %d: HELP twice" % n
            helped.add(name)
        elif line.startswith("# TYPE "):
            parts = line.split(" ")
            assert len(parts) == 4 and parts[3] in TYPES, "line %d" % n
            assert parts[2] not in declared, "line %d: TYPE twice" % n
            assert parts[2] not in seen_samples, \
                "line %d: TYPE after samples" % n
            declared[parts[2]] = parts[3]
            current = parts[2]
        elif line.startswith("#"):
            continue
        else:
            m = SAMPLE.match(line)
            assert m, "line %d malformed: %r" % (n, line)
            name = m.group(1)
            assert name == current, "line %d: %s outside its family" % (n, name)
            assert name in helped, "line %d: no HELP for %s" % (n, name)
            float(m.group(3))
            key = (name, m.group(2))
            assert key not in seen_samples, "line %d: duplicate series" % n
            seen_samples.add(key)
            seen_samples.add(name)
    return declared


class TagBalance(html.parser.HTMLParser):
    VOID = {"meta", "br", "hr", "img", "input", "link"}

    def __init__(self):
        super().__init__()
        self.stack = []
        self.errors = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass                    # <meta ... /> and <rect ... />: complete

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("unexpected </%s> (open: %s)"
                               % (tag, self.stack))
        else:
            self.stack.pop()


def check_html(text):
    parser = TagBalance()
    parser.feed(text)
    parser.close()
    assert not parser.errors, parser.errors
    assert not parser.stack, "unclosed: %s" % parser.stack


def promtool_check(test, body):
    """`promtool check metrics` (Debian's prometheus) reports nothing."""
    promtool = shutil.which("promtool")
    test.assertIsNotNone(promtool, "promtool (Debian package prometheus) "
                         "is part of the test setup")
    checked = subprocess.run([promtool, "check", "metrics"], input=body,
                             capture_output=True, text=True, timeout=30)
    test.assertEqual((checked.returncode, checked.stdout + checked.stderr),
                     (0, ""), body)


# A bucket's own ?auto figures, in httpd's indexed style (mod_proxy's
# ProxyBalancer[N]Worker[M]Name): Bucket[N]Name.
AUTO_BUCKET_KEY = re.compile(r"^Bucket\[(\d+)\]([A-Za-z0-9]+)$")


def parse_auto(text, mod_status=False):
    """'Name: value' lines.  mod_status's own ?auto starts with the bare
    host name and has names with spaces ("Server Built"); ours have none,
    all start with "Bucket", and a bucket's own take the indexed style."""
    values = {}
    lines = text.splitlines()
    if mod_status:
        lines = lines[1:]
    for line in lines:
        key, sep, value = line.partition(":")
        value = value.strip()
        assert sep and key, "bad ?auto line %r" % line
        if not mod_status:
            assert key.startswith("Bucket"), "bad ?auto name %r" % line
        if key.startswith("Bucket"):
            assert " " not in key, "bad ?auto name %r" % line
            assert not key[len("Bucket"):][:1].isdigit() \
                and ("[" not in key or AUTO_BUCKET_KEY.match(key)), \
                "?auto name not in the indexed style: %r" % line
        values[key] = value
    return values


class BucketStatus(unittest.TestCase):

    def server(self, **kw):
        extra = kw.pop("extra", "ListenBuckets 4\nStartServers 8\n")
        return Server(extra=extra + STATUS_LOCATION, extra_modules=LOAD_STATUS,
                      **kw)

    def test_json_counts_add_up_to_the_access_log(self):
        with self.server() as srv:
            srv.start()
            load = Load("127.0.0.1", srv.ports[0], concurrency=8,
                        max_requests=1500).start().wait(300)
            self.assertEqual(load.errors, {})
            self.assertTrue(srv.wait_access_log(1500))
            logged = srv.access_log_lines()
            status, ctype, body = fetch(srv, "/bucket-status?json")
            self.assertEqual(status, 200)
            self.assertEqual(ctype, "application/json")
            doc = json.loads(body)
            self.assertTrue(doc["available"])
            self.assertEqual(doc["mode"], "reuseport")
            self.assertEqual(doc["bucket_count"], 4)
            total = sum(b["accepted"] for b in doc["buckets"])
            # Every request of the load is logged; the harness's readiness
            # probes connect without a request (accepted, not logged), and
            # the JSON request's own connection was accepted too.
            self.assertEqual(sum(1 for l in logged if l.split()[2] == "200"),
                             1500)
            self.assertEqual(total, len(logged) + srv.probe_connections + 1)
            self.assertEqual(doc["balance"]["buckets"]["total"], total)
            for b in doc["buckets"]:
                self.assertGreater(b["accepted"], 0, b)
                self.assertEqual(b["listener"], "127.0.0.1:%d" % srv.ports[0])
                self.assertGreaterEqual(b["children"]["total"], 1)
            self.assertGreater(doc["balance"]["buckets"]["jain"], 0.8)
            self.assertLessEqual(doc["balance"]["buckets"]["jain"], 1.0)
            # Live children only: a child retired under load takes its
            # count with it, so the children add up to at most the total.
            by_children = sum(c["accepted"] for c in doc["children"])
            self.assertLessEqual(by_children, total)
            self.assertGreater(by_children, total // 2)
            self.assertEqual({c["bucket"] for c in doc["children"]},
                             {0, 1, 2, 3})

    def test_auto_and_server_status_sections_parse(self):
        with self.server(extra="ListenBuckets 2\nServerLimit 64\n"
                         "MaxRequestWorkers 40\n") as srv:
            srv.start()
            status, ctype, body = fetch(srv, "/bucket-status?auto")
            self.assertEqual(status, 200)
            self.assertTrue(ctype.startswith("text/plain"))
            values = parse_auto(body)
            self.assertEqual(values["BucketDataAvailable"], "1")
            self.assertEqual(values["BucketCount"], "2")
            self.assertEqual(values["BucketMode"], "reuseport")
            self.assertIn("Bucket[1]Accepted", values)
            self.assertEqual(values["Bucket[0]Listener"],
                             "127.0.0.1:%d" % srv.ports[0])
            self.assertEqual(values["BucketSteeringFallback"], "none")
            float(values["BucketBalanceJain"])
            # Booleans as 1 or 0, and the limits the server runs with.
            self.assertEqual(values["BucketSoReuseport"], "1")
            self.assertEqual(values["BucketCPUAffinity"], "0")
            self.assertEqual(values["BucketMaxRequestWorkers"],
                             "40")
            self.assertEqual(values["BucketServerLimit"],
                             "64")
            _, _, auto = fetch(srv, "/server-status?auto")
            values = parse_auto(auto, mod_status=True)
            self.assertEqual(values["ServerMPM"], "prefork")
            self.assertEqual(values["BucketCount"], "2")
            _, _, page = fetch(srv, "/server-status")
            self.assertIn("<h2>Listener buckets</h2>", page)

    def test_prometheus_output_passes_strict_check(self):
        with self.server(extra="ListenBuckets 4\nStartServers 8\n"
                         "ServerLimit 64\nMaxRequestWorkers 40\n") as srv:
            srv.start()
            load = Load("127.0.0.1", srv.ports[0], concurrency=4,
                        max_requests=200).start().wait(300)
            self.assertEqual((load.ok, load.errors), (200, {}))
            status, ctype, body = fetch(srv, "/bucket-status?prometheus")
            self.assertEqual(status, 200)
            self.assertEqual(ctype, "text/plain; version=0.0.4; charset=utf-8")
            families = check_prometheus(body)
            promtool_check(self, body)
            self.assertEqual(families["httpd_bucket_accepted_connections_total"],
                             "counter")
            self.assertEqual(body.count(
                "httpd_bucket_accepted_connections_total{"), 4)
            self.assertIn("httpd_bucket_per_listen 4\n", body)
            self.assertIn("httpd_bucket_generation ", body)
            start = re.search(r"^httpd_bucket_start_time_seconds (\S+)$",
                              body, re.M)
            self.assertTrue(start, body)
            self.assertLess(abs(float(start.group(1)) - time.time()), 3600)
            self.assertRegex(body, r'httpd_bucket_build_info\{version="[^"]+'
                             r'",httpd="Apache/2\.4\.[^"]*",mpm="prefork"\} 1')
            self.assertIn('steering="hash",steering_wanted="hash",'
                          'steering_fallback="none"', body)
            self.assertIn("httpd_bucket_max_request_workers %d\n"
                          % 40, body)
            self.assertIn("httpd_bucket_server_limit %d\n"
                          % 64, body)
            # A scrape configuration's own parameters are ignored.
            status, _, extra = fetch(srv, "/bucket-status?prometheus&x=1")
            self.assertEqual(status, 200)
            check_prometheus(extra)
            self.assertEqual(fetch(srv, "/bucket-status?module=a&prometheus=")
                             [0], 200)
            doc = json.loads(fetch(srv, "/bucket-status?json")[2])
            self.assertEqual(doc["schema_version"], 1)
            self.assertEqual((doc["directives"]["MaxRequestWorkers"],
                              doc["directives"]["ServerLimit"]), (40, 64))
            # Gone: a precomputed rate and since-start balance gauges.
            self.assertNotIn("_last_10s", body)
            self.assertNotIn("httpd_bucket_balance", body)

    def test_prometheus_output_under_idle_steering_and_its_fallback(self):
        # Idle steering adds two families; refused (bpf(2) fails under the
        # shim) it says so in httpd_bucket_info and ?auto.
        for preload, fallback in ((None, "none"), (NOBPF_SO, "refused")):
            env = {"LD_PRELOAD": preload} if preload else {}
            expect = ("PFB00043",) if preload else ()
            with self.server(extra="ListenBuckets 2\nStartServers 4\n"
                             "ListenBucketSteering idle\n", env=env,
                             expect_log=expect) as srv:
                srv.start()
                body = fetch(srv, "/bucket-status?prometheus=")[2]
                check_prometheus(body)
                promtool_check(self, body)
                self.assertIn('steering_wanted="idle",steering_fallback="%s"'
                              % fallback, body)
                self.assertEqual(
                    "httpd_bucket_steering_idle{" in body, preload is None)
                values = parse_auto(fetch(srv, "/bucket-status?auto")[2])
                self.assertEqual(values["BucketSteeringFallback"], fallback)
                self.assertEqual("Bucket[1]SteeringKept" in values,
                                 preload is None)
                self.assertEqual("Bucket[1]SteeringIdle" in values,
                                 preload is None)

    def test_the_recommended_setups_fallback_is_a_refusal(self):
        # README's recommended lines where idle steering cannot run (no
        # CAP_BPF: the shim makes bpf(2) fail): one bucket for every
        # Listen, which the steering alert must see as refused.
        extra = ("<IfDirective ListenBucketSteering>\n"
                 "    ListenCoresBucketsRatio 1\n"
                 "    ListenBucketSteering idle\n"
                 "</IfDirective>\n")
        several = len(os.sched_getaffinity(0)) > 1
        with self.server(extra=extra, env={"LD_PRELOAD": NOBPF_SO},
                         expect_log=("PFB00150",) if several else ()) as srv:
            srv.start()
            values = parse_auto(fetch(srv, "/bucket-status?auto")[2])
            body = fetch(srv, "/bucket-status?prometheus=")[2]
            check_prometheus(body)
            if several:
                self.assertEqual((values["BucketMode"],
                                  values["BucketModeReason"],
                                  values["BucketSteeringFallback"]),
                                 ("single", "idle-steering-unavailable",
                                  "refused"))
                self.assertIn('mode="single",mode_reason="idle-steering-'
                              'unavailable",', body)
                self.assertIn('steering="hash",steering_wanted="idle",'
                              'steering_fallback="refused"', body)
            else:
                # One usable CPU: one socket per Listen by the ratio, which
                # is no fault.
                self.assertEqual(values["BucketSteeringFallback"],
                                 "one-bucket-per-listen")

    def test_the_banner_follows_server_tokens(self):
        # httpd_bucket_build_info's httpd label says what the server's
        # own Server header says, no more.
        for tokens, banner in (("Prod", "Apache"), ("Full", None)):
            with self.server(extra="ServerTokens %s\n" % tokens) as srv:
                srv.start()
                with urllib.request.urlopen(srv.url("/"), timeout=30) as r:
                    header = r.headers.get("Server")
                if banner is not None:
                    self.assertEqual(header, banner)
                body = fetch(srv, "/bucket-status?prometheus=")[2]
                self.assertIn(',httpd="%s",' % header, body)
                self.assertEqual(bool(re.search(r'httpd="Apache/2\.4', body)),
                                 tokens == "Full", body)

    def test_html_page_is_well_formed_and_refreshes(self):
        with self.server() as srv:
            srv.start()
            status, ctype, body = fetch(srv, "/bucket-status?refresh=5")
            self.assertEqual(status, 200)
            self.assertTrue(ctype.startswith("text/html"))
            check_html(body)
            self.assertIn('<meta http-equiv="refresh" content="5"/>', body)
            self.assertIn("<svg", body)
            self.assertEqual(body.count("<tr><td>"), 4)

    def test_bad_queries_get_400_and_fuzzing_never_breaks_it(self):
        with self.server(extra="ListenBuckets 2\nStartServers 4\n") as srv:
            srv.start()
            for query in ("xml", "json&auto", "refresh=0", "refresh=abc",
                          "json&refresh=5", "%00", "&&"):
                self.assertEqual(fetch(srv, "/bucket-status?" + query)[0],
                                 400, query)
            rng = random.Random(20261122)
            alphabet = "autojsnprmeh=&0123456789%-+;/"
            codes = {}
            for _ in range(600):
                query = "".join(rng.choice(alphabet)
                                for _ in range(rng.randint(0, 40)))
                code = fetch(srv, "/bucket-status?"
                             + urllib.parse.quote(query, safe="=&%"))[0]
                codes[code] = codes.get(code, 0) + 1
                self.assertIn(code, (200, 400), query)
            self.assertIn(400, codes)
            self.assertEqual(fetch(srv, "/bucket-status?json")[0], 200)
            # No crash or warning logged: Server's exit checks the log.

    def assert_unavailable_everywhere(self, srv, mpm_word):
        phrase = "bucket data unavailable: the running MPM is %s" % mpm_word
        status, _, body = fetch(srv, "/bucket-status")
        self.assertEqual(status, 200)
        self.assertIn(phrase, body)
        check_html(body)
        doc = json.loads(fetch(srv, "/bucket-status?json")[2])
        self.assertFalse(doc["available"])
        self.assertIn(phrase, doc["reason"])
        values = parse_auto(fetch(srv, "/bucket-status?auto")[2])
        self.assertEqual(values["BucketDataAvailable"], "0")
        self.assertIn(phrase, values["BucketDataUnavailableReason"])
        prom = fetch(srv, "/bucket-status?prometheus")[2]
        check_prometheus(prom)
        promtool_check(self, prom)
        # Another MPM is the admin's choice, told apart from a fault.
        self.assertIn('httpd_bucket_data_available{reason="other-mpm"} 0\n',
                      prom)
        self.assertIn('mpm="%s"} 1\n' % mpm_word, prom)
        self.assertIn(phrase, fetch(srv, "/server-status")[2])

    def skip_if_mpm_is_built_in(self):
        # Another MPM cannot be loaded into an httpd with one built in; a
        # run against such a build passes --allow-skips.
        if MPM_STATIC:
            self.skipTest("MPM_SO=static: no other MPM can be loaded")

    def test_stock_event_mpm_gets_no_bucket_data(self):
        self.skip_if_mpm_is_built_in()
        with self.server(extra="", mpm=STOCK_EVENT) as srv:
            srv.start()
            self.assertIn("event", fetch(srv, "/server-status?auto")[2])
            self.assert_unavailable_everywhere(srv, "event")

    def test_stock_prefork_gets_no_bucket_data(self):
        self.skip_if_mpm_is_built_in()
        with self.server(extra="", mpm=STOCK_PREFORK) as srv:
            srv.start()
            self.assert_unavailable_everywhere(srv, "prefork")
