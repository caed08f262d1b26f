#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Monitoring that admins already run must keep working.

The status module adds Bucket* lines to mod_status's /server-status?auto,
a bucket's own in httpd's indexed style (Bucket[N]Accepted).
This runs Debian's prometheus-apache-exporter and munin's apache_* plugins
(munin-plugins-core) against three servers and compares what they report:

  stock        Debian's mod_mpm_prefork.so with mod_status (the baseline)
  buckets      this MPM with 2 buckets, mod_status and mod_bucket_status
  unavailable  Debian's prefork with mod_bucket_status ("bucket data
               unavailable" lines, as after switching the MPM back)

The exporter must export the same apache_* metric families as against the
baseline, with apache_up 1 and no error in its log; every munin plugin must
answer autoconf "yes" and the same fields with numeric values.  Ends with
'monitoring: N passed, N failed'.
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))        # test/, for pfbtest
from pfbtest import (STATUS_LOAD, STATUS_LOCATION, STOCK_PREFORK,  # noqa: E402
                     Server, free_port, get_url, wait_for)
from pfbtest.metrics import metric_families  # noqa: E402
from pfbtest.tally import report  # noqa: E402

EXPORTER = os.environ.get("APACHE_EXPORTER",
                          "/usr/bin/prometheus-apache-exporter")
MUNIN_PLUGINS = os.environ.get("MUNIN_PLUGINS", "/usr/share/munin/plugins")
PLUGINS = ("apache_accesses", "apache_processes", "apache_volume")
REQUESTS = 20

# The tools read mod_status's extended lines (Total Accesses, Total kBytes,
# CPULoad ...): asked for outright, whatever the default.
EXTENDED = "ExtendedStatus On\n"
CASES = (
    ("stock", dict(mpm=STOCK_PREFORK, extra=EXTENDED)),
    ("buckets", dict(extra_modules=STATUS_LOAD,
                     extra=EXTENDED + STATUS_LOCATION + "ListenBuckets 2\n")),
    ("unavailable", dict(mpm=STOCK_PREFORK, extra_modules=STATUS_LOAD,
                         extra=EXTENDED + STATUS_LOCATION)),
)


def run_exporter(server):
    """Scrapes the exporter twice (the second scrape sees the first one's
    request counted) and returns (families, samples, log)."""
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen(
            [EXPORTER, "--scrape_uri=" + server.url("/server-status?auto"),
             "--telemetry.address=127.0.0.1:%d" % port, "--log.level=debug"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            url = "http://127.0.0.1:%d/metrics" % port

            def scrape():
                if proc.poll() is not None:
                    return "exited"
                try:
                    status, body = get_url(url, timeout=10)
                except OSError:
                    return None
                return body if status == 200 else None

            first = wait_for(scrape, 20)
            if first == "exited" or first is None:
                continue            # lost its port, or never came up
            body = scrape()
        finally:
            proc.terminate()
            try:
                log = proc.communicate(timeout=10)[0].decode(errors="replace")
            except subprocess.TimeoutExpired:
                proc.kill()
                log = proc.communicate(timeout=5)[0].decode(errors="replace")
        families = {name: kind for name, kind in
                    metric_families(body).items()
                    if name.startswith("apache_")}
        samples = {}
        for line in body.splitlines():
            m = re.match(r"(apache_[a-z_]+)(\{[^}]*\})?\s+(\S+)$", line)
            if m:
                samples[m.group(1) + (m.group(2) or "")] = float(m.group(3))
        return families, samples, log
    raise RuntimeError("prometheus-apache-exporter did not come up")


def run_munin(server):
    """plugin -> (autoconf answer, config field names, fetched values)."""
    port = server.ports[0]
    env = dict(os.environ)
    env["url"] = "http://127.0.0.1:%d/server-status?auto"
    env["ports"] = str(port)
    result = {}
    for plugin in PLUGINS:
        path = os.path.join(MUNIN_PLUGINS, plugin)
        runs = {}
        for arg in ("autoconf", "config", "fetch"):
            argv = [path] if arg == "fetch" else [path, arg]
            proc = subprocess.run(argv, env=env, capture_output=True,
                                  text=True, timeout=60)
            if proc.returncode != 0 or proc.stderr.strip():
                raise AssertionError("%s %s: exit %d, stderr %r"
                                     % (plugin, arg, proc.returncode,
                                        proc.stderr))
            # Field names carry the port; compare them without it.
            runs[arg] = proc.stdout.replace(str(port), "PORT")
        fields = sorted(set(re.findall(r"^(\w+)\.label ", runs["config"],
                                       re.M)))
        values = dict(re.findall(r"^(\w+)\.value (\S+)$", runs["fetch"],
                                 re.M))
        result[plugin] = (runs["autoconf"].strip(), fields, values)
    return result


def observe(name, kwargs):
    # The log's verdict is a check of its own (check_log=False), read once
    # the server stopped, so that lines of its shutdown count too.
    server = Server(check_log=False, **kwargs)
    with server:
        server.start()
        for _ in range(REQUESTS):
            status, _ = server.get("/")
            assert status == 200, "GET / gave %d" % status
        status, auto = server.get("/server-status?auto")
        assert status == 200
        exporter = run_exporter(server)
        munin = run_munin(server)
    bad_log = server.log_problems
    bucket_lines = [line for line in auto.splitlines()
                    if line.startswith("Bucket")]
    print("  %s: /server-status?auto has %d lines, %d of them the status "
          "module's" % (name, len(auto.splitlines()), len(bucket_lines)))
    return dict(auto=auto, bucket_lines=bucket_lines, exporter=exporter,
                munin=munin, bad_log=bad_log)


def main():
    for tool in [EXPORTER] + [os.path.join(MUNIN_PLUGINS, p)
                              for p in PLUGINS]:
        if not os.access(tool, os.X_OK):
            print("missing %s: apt-get install prometheus-apache-exporter "
                  "munin-plugins-core libwww-perl" % tool)
            print("monitoring: 0 passed, 1 failed")
            return 1
    if os.geteuid() != 0:
        print("these tests start apache2 as root (it binds, then drops to "
              "www-data); run them as root")
        print("monitoring: 0 passed, 1 failed")
        return 1
    seen = {}
    results = {}
    for name, kwargs in CASES:
        try:
            seen[name] = observe(name, kwargs)
        except Exception as e:      # one broken case must not hide others
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
            results["%s_runs" % name] = False
    base = seen.get("stock")

    def check(label, ok, detail=""):
        results[label] = bool(ok)
        print("%s %s%s" % ("ok  " if ok else "FAIL", label,
                           (": " + detail) if detail and not ok else ""))

    if base is None:
        return report("monitoring", results)
    base_families, _, _ = base["exporter"]
    print("  exporter families against stock prefork: %s"
          % ", ".join(sorted(base_families)))
    for name, obs in seen.items():
        families, samples, log = obs["exporter"]
        check("%s_server_log_clean" % name, not obs["bad_log"],
              "\n".join(obs["bad_log"]))
        check("%s_exporter_up" % name, samples.get("apache_up") == 1.0,
              "apache_up = %r" % samples.get("apache_up"))
        errors = [line for line in log.splitlines()
                  if "level=error" in line or "level=warn" in line]
        check("%s_exporter_no_scrape_error" % name, not errors,
              "\n".join(errors))
        check("%s_exporter_counts_requests" % name,
              samples.get("apache_accesses_total", 0) >= REQUESTS,
              "apache_accesses_total = %r"
              % samples.get("apache_accesses_total"))
        check("%s_exporter_same_families" % name, families == base_families,
              "missing %s, extra %s, types %s" % (
                  sorted(set(base_families) - set(families)),
                  sorted(set(families) - set(base_families)),
                  sorted(k for k in families if k in base_families
                         and families[k] != base_families[k])))
        for plugin, (autoconf, fields, values) in obs["munin"].items():
            base_plugin = base["munin"][plugin]
            check("%s_munin_%s_autoconf" % (name, plugin), autoconf == "yes",
                  autoconf)
            check("%s_munin_%s_fields" % (name, plugin),
                  fields == base_plugin[1] and
                  sorted(values) == sorted(base_plugin[2]),
                  "config %s / fetch %s against %s / %s"
                  % (fields, sorted(values), base_plugin[1],
                     sorted(base_plugin[2])))
            numeric = all(re.match(r"^-?[0-9.]+$", v) for v in values.values())
            check("%s_munin_%s_values" % (name, plugin),
                  values and numeric, str(values))
    if "buckets" in seen:
        lines = seen["buckets"]["bucket_lines"]
        check("buckets_auto_has_bucket_lines",
              "BucketDataAvailable: 1" in lines, "\n".join(lines[:5]))
        # A bucket's own lines in httpd's indexed style, as mod_proxy's
        # ProxyBalancer[N]Worker[M]Name, which these parsers already meet.
        check("buckets_auto_lines_indexed",
              any(line.startswith("Bucket[1]Accepted: ") for line in lines)
              and not any(re.match(r"Bucket\d", line) for line in lines),
              "\n".join(lines))
    if "unavailable" in seen:
        check("unavailable_auto_says_so",
              "BucketDataAvailable: 0" in seen["unavailable"]["bucket_lines"],
              "\n".join(seen["unavailable"]["bucket_lines"][:5]))
    return report("monitoring", results)


if __name__ == "__main__":
    sys.exit(main())
