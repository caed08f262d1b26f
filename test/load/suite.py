#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The load-test suite: a scenario matrix over this MPM, Debian's stock
prefork and event MPMs and nginx, run interleaved, with a report.

  python3 test/load/suite.py --quick          # CI smoke test, < 2 minutes
  python3 test/load/suite.py --full           # < 15 minutes on 2 cores
  python3 test/load/suite.py --profile=16cpu  # issue 14's table (scaled
                                              # to the server's CPUs)
  python3 test/load/suite.py --profile=php    # mod_php, mixed cost
  python3 test/load/suite.py --profile=rps    # veth + RPS in a netns
  python3 test/load/suite.py --profile=default  # the package's shipped
                                              # configuration against stock
                                              # prefork, Debian's pool
  python3 test/load/suite.py --profile=anchors --server-cpus 0 \
      --client-cpus 1                         # anchors, floors, CPU/request
  python3 test/load/suite.py --profile=pool   # cost against the pool's size
  python3 test/load/suite.py --profile=workloads  # keep-alive 100, TLS
  python3 test/load/suite.py --profile=linger --mpm-before OLD.so
  python3 test/load/suite.py --profile=bigbox --server-cpus 0-31 \
      --client-cpus 32-63                     # a many-core host
  python3 test/load/suite.py --list           # configurations, scenarios
  python3 test/load/report.py DIR/results.json  # the report again, from
                                              # the published files

Every scenario runs each configuration once per pair, in an order shuffled
anew for each pair (--seed), each run on a freshly started server that is
warmed up with the same load first (--warmup), for the profile's number of
pairs.  The report gives medians with distribution-free 95 % confidence
intervals and per-pair ratios to the baseline (Debian's stock prefork).
Each run records its server's CPU from a cgroup of its own, context
switches, the kernel's TCP counters (nstat: ListenOverflows, ListenDrops
...), softirq and idle time of the server's and the generator's CPUs, the
generator's own errors and lag, and every request's latency (latency/*.gz,
a histogram at 1 us).  A run whose generator failed (EADDRNOTAVAIL, socket
errors, send lag beyond --max-lag-ms) is marked invalid, left out of every
median and never used as a baseline.  Everything goes to one folder
(--out, default bench-results/suite-<time>): results.json, results.csv,
report.md, the servers' configurations (configs/), the host's state and
the project's commit, and gnuplot charts.  Traffic goes to 127.0.0.1 only,
or, in the rps scenarios, over a veth pair to a network namespace the suite
creates and deletes; every run is bounded by timeouts and every server is
stopped on every path.
"""

import argparse
import array
import collections
import contextlib
import csv
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
# test/, for pfbtest (the one bootstrap, see test/pfbtest/__init__.py).
sys.path.insert(0, os.path.dirname(HERE))

from pfbtest import (Server, STOCK_PREFORK, STOCK_EVENT, MPM_SO, HTTPD,  # noqa
                     MODULES, STATUS_SO, STATUS_LOCATION, TEST_HANDLER_SO,
                     STAT_PGRP,
                     free_port, live_pids, listen_sockets, read_response,
                     Scoreboard, exit_on_sigterm)
import report  # noqa: E402
import netns  # noqa: E402
import openloop  # noqa: E402
import cgroupcpu  # noqa: E402
import hoststate  # noqa: E402
import latency  # noqa: E402
import validity  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "sim"))
import bucketsim  # noqa: E402

WRK_SCRIPT = os.path.join(HERE, "wrk_report.lua")
OPENLOOP = os.path.join(HERE, "openloop.py")

PROFILES = {
    "quick": {"pairs": 1, "seconds": 2, "fault_seconds": 6, "warmup": 0,
              "workers": 32,
              "connections": 32, "open_rate": 800, "slow_clients": 8,
              "configs": ["pfb-1", "pfb-single", "pfb-ratio1", "pfb-N",
                          "pfb-N-cpu", "pfb-N-idle", "stock",
                          "stock-ratio1", "event", "nginx"],
              "scenarios": ["static-close", "hetero", "graceful"]},
    "full": {"pairs": 3, "seconds": 3, "fault_seconds": 6, "workers": 32,
             "connections": 32, "open_rate": 1500, "slow_clients": 16,
             "fault_pairs": 2,
             "scenarios": ["static-close", "static-keepalive", "fourports",
                           "hetero", "openloop", "bursts", "slowloris",
                           "graceful", "kills"]},
    # A many-core, two-socket host: pin the server and the load generator
    # apart (--server-cpus / --client-cpus, or numactl), thousands of
    # connections and children.
    "bigbox": {"pairs": 5, "seconds": 20, "fault_seconds": 20,
               "workers": 4096, "connections": 2000, "open_rate": 50000,
               "slow_clients": 512, "fault_pairs": 3,
               "scenarios": ["static-close", "static-keepalive", "fourports",
                             "hetero", "openloop", "bursts", "slowloris",
                             "graceful", "kills"]},
    # Issue 14's table, as measured on a 16-CPU host: wrk -t16 -c256,
    # MaxRequestWorkers 512 and StartServers 256 for static close; 256
    # children and 384 clients for hetero; open-loop load at 50 % and 80 %
    # of stock event's closed-loop req/s in the same run.  The sizes are
    # for `cpus` server CPUs and are scaled (see SCALED) to fewer.
    "16cpu": {"cpus": 16, "pairs": 5, "seconds": 10, "fault_seconds": 10,
              "warmup": 2,
              "workers": 512, "start": 256, "connections": 256,
              "wrk_threads": 16, "hetero_workers": 256, "open_rate": 16000,
              "slow_clients": 64, "buckets": "cpus",
              "configs": ["stock", "stock-ratio1", "pfb-1", "pfb-per-listen",
                          "pfb-N", "pfb-N-idle", "pfb-N-cpu", "event",
                          "event-tuned", "nginx", "nginx-tuned"],
              "scenarios": ["static-close", "hetero", "fourports",
                            "open50", "open80"]},
    # The anchors and floors side by side: server CPU per request at a
    # fixed open-loop rate below every server's saturation (`rate`, the
    # profile's open_rate), peak closed-loop throughput, keep-alive.  Pin
    # the generator apart (--server-cpus, --client-cpus).  The
    # differences isolate a process per connection (anchor-blocking -
    # anchor-epoll), the lingering close (anchor-blocking-linger -
    # anchor-blocking), httpd's core (pfb-floor - anchor-blocking) and
    # configuration (pfb-1 - pfb-floor).
    "anchors": {"cpus": 16, "pairs": 6, "seconds": 10, "warmup": 2,
                "workers": 512, "start": 256, "connections": 256,
                "wrk_threads": 16, "open_rate": 16000, "buckets": "cpus",
                "strace": True,
                "configs": ["anchor-epoll", "anchor-blocking",
                            "anchor-blocking-linger", "pfb-floor", "pfb-1",
                            "pfb-N-idle", "pfb-N-cpu", "stock",
                            "stock-ratio1", "event", "event-tuned", "nginx",
                            "nginx-tuned"],
                "scenarios": ["rate", "static-close", "keepalive100"]},
    # Cost against the pool's size: static close at a fixed concurrency
    # (16 connections per server CPU) with 64 to 4096 children.
    "pool": {"pairs": 6, "seconds": 8, "warmup": 2, "workers": 64,
             "connections_per_cpu": 16, "buckets": "cpus",
             "configs": ["stock", "stock-ratio1", "pfb-1", "pfb-N"],
             "scenarios": ["pool64", "pool256", "pool1024", "pool4096"]},
    # Real sites' workloads: keep-alive with 100 requests per connection,
    # TLS with keep-alive and TLS with a new connection (and handshake)
    # for every request.
    "workloads": {"cpus": 16, "pairs": 6, "seconds": 10, "warmup": 2,
                  "workers": 512, "start": 256, "connections": 256,
                  "wrk_threads": 16, "buckets": "cpus",
                  "configs": ["stock", "stock-ratio1", "pfb-1", "pfb-N-idle",
                              "event", "event-tuned", "nginx",
                              "nginx-tuned"],
                  "scenarios": ["keepalive100", "tls-keepalive",
                                "tls-close"]},
    # The model's cross-node cost, calibrated: packets received by RPS on
    # every server CPU, cpu steering, children on the receiving CPU
    # against children half the CPU list away (on a two-socket host: the
    # other node).  Needs root (the rps scenario's namespace).
    "crossnode": {"pairs": 6, "seconds": 10, "warmup": 2, "workers": 32,
                  "connections": 32, "buckets": "cpus",
                  "configs": ["pfb-N-cpu", "pfb-N-cpu-away"],
                  "scenarios": ["rps"]},
    # The lingering close before and after: --mpm-before names the MPM
    # built from the commit before it (pfb-1-before); the blocking anchor
    # with and without httpd's lingering close prices it alone.
    "linger": {"pairs": 6, "seconds": 8, "warmup": 2, "workers": 32,
               "connections": 32, "open_rate": 2000, "strace": True,
               "configs": ["pfb-1", "pfb-1-before", "anchor-blocking",
                           "anchor-blocking-linger"],
               "scenarios": ["rate", "static-close"]},
    # mod_php (pool sizes: PHP_POOL).
    "php": {"pairs": 3, "seconds": 5, "workers": 32, "connections": 32,
            "buckets": "cpus",
            "configs": ["pfb-1", "pfb-N", "pfb-N-idle", "stock",
                        "stock-ratio1"],
            "scenarios": ["php"]},
    # What the package ships (mpm_prefork_buckets.conf: Debian's pool
    # 5/5/10/150, no bucket directive) against Debian's stock prefork with
    # its own mpm_prefork.conf, the same pool: the shipped default must
    # never be slower.  pfb-1 (the same arrangement from the profile's
    # pool) rides along; add --configs pfb-N-idle,... to compare buckets.
    # hetero with 48 clients, as issue 20 measured it.
    "default": {"pairs": 3, "seconds": 8, "workers": 150, "start": 5,
                "min_spare": 5, "max_spare": 10, "connections": 32,
                "hetero_clients": 48,
                "configs": ["pfb-shipped", "pfb-1", "stock"],
                "scenarios": ["static-close", "hetero", "fourports", "php"]},
    # Packets spread over the server's CPUs by RPS on a veth (netns.py);
    # `rps-half` spreads them over half of the server's CPUs only, so the
    # share of connections in those CPUs' buckets shows whether each
    # connection landed on the bucket of the CPU that received it.
    "rps": {"pairs": 3, "seconds": 5, "workers": 32, "connections": 32,
            "buckets": "cpus",
            "configs": ["pfb-1", "pfb-N", "pfb-N-idle", "pfb-N-cpu"],
            "scenarios": ["rps", "rps-half"]},
}

# Profile entries that grow with the server's CPUs: a profile with a
# `cpus` entry is scaled by server CPUs / cpus where the server has fewer
# (or by --scale).
SCALED = ("workers", "start", "connections", "wrk_threads", "hetero_workers",
          "slow_clients", "open_rate")

# What the other scenarios need, for profiles made for one scenario (php,
# rps) run with --scenarios.
DEFAULTS = {"fault_seconds": 6, "open_rate": 800, "slow_clients": 8,
            "warmup": 1}

# Every scenario the suite knows, for --list; openNN (any percentage) runs
# at NN % of stock event's static-close req/s.
SCENARIOS = ["static-close", "static-keepalive", "keepalive100",
             "fourports", "hetero", "openloop", "rate", "bursts",
             "slowloris", "graceful", "kills", "open50", "open80", "php",
             "rps", "rps-half", "tls-keepalive", "tls-close", "pool64",
             "pool256", "pool1024", "pool4096"]

# A child that waited through more requests than this since its last
# one serves cold (reuse_distance()).
COLD_REUSE = 64
# The pool scenarios' warm-up lasts until nearly every child has served,
# for at most this many seconds per child (warm_pool()).
POOL_WARMUP_PER_CHILD = 0.015
# Scenarios whose errors are the server's result, not a failed generator.
FAULT_SCENARIOS = validity.FAULT_SCENARIOS
# Requests per connection in keepalive100 and the TLS keep-alive scenario,
# on every server (MaxKeepAliveRequests, keepalive_requests, the anchors).
KEEPALIVE_REQUESTS = 100

# The static scenarios' file: 100 bytes, as in issue 14's measurements.
STATIC_PATH = "/static100.html"
# The floor configuration answers the same 100 bytes from a handler here.
FLOOR_PATH = "/floor"
ANCHOR_DIR = os.path.join(TOP, "build", "anchors")
STATIC_BODY = ("static file of one hundred bytes for the load suite "
               + "x" * 47 + "\n")
assert len(STATIC_BODY) == 100

PHP_SCRIPT = os.path.join(HERE, "php", "mixed.php")
# The php scenario's pool, in any profile (a profile may set php_* keys):
# Debian's stock prefork sizes (StartServers 5, MinSpareServers 5,
# MaxSpareServers 10, MaxRequestWorkers 150), and 8 clients per server CPU,
# well under the cap, so that the pool at the end shows what a mode keeps
# for the load; a warm-up lets the pool grow and PHP's opcache fill first.
PHP_POOL = {"php_workers": 150, "php_start": 5, "php_min_spare": 5,
            "php_max_spare": 10, "php_clients_per_cpu": 8, "php_warmup": 2}
PHP_CONF = ("<FilesMatch \\.php$>\n    SetHandler application/x-httpd-php\n"
            "</FilesMatch>\n")

# One openloop.py process keeps its schedule up to about this rate: it
# costs about 180 µs of CPU per request (a connection each, two thirds of
# it the kernel's), so a rate of N needs about N / 5500 CPUs of generator.
# Higher rates are split over several processes whose latencies are
# merged.
OPENLOOP_RATE_PER_PROC = 3000

# The package's configuration file, as a2enmod mpm_prefork_buckets puts
# it in place.
SHIPPED_CONF = os.path.join(TOP, "server", "mpm", "prefork",
                            "mpm_prefork_buckets.conf")

CONFIG_ORDER = ["pfb-shipped", "pfb-1", "pfb-single", "pfb-per-listen",
                "pfb-ratio1", "pfb-N", "pfb-N-cpu", "pfb-N-cpu-away",
                "pfb-N-idle", "pfb-N-local", "pfb-floor", "pfb-1-before",
                "stock", "stock-ratio1", "event", "event-tuned", "nginx",
                "nginx-tuned", "anchor-epoll", "anchor-blocking",
                "anchor-blocking-linger"]
BASELINE = "stock"
# What a profile without its own list runs: every configuration but the
# shipped one, whose Debian pool would override the profile's and make the
# comparison with stock's unfair (profile default runs it with that pool).
DEFAULT_CONFIGS = [k for k in CONFIG_ORDER if k != "pfb-shipped"]


def configs(args):
    n = args.buckets
    with open(SHIPPED_CONF) as f:
        shipped = f.read()
    return {
        "pfb-shipped": {"label": "this MPM as shipped "
                        "(mpm_prefork_buckets.conf)", "kind": "apache",
                        "mpm": MPM_SO, "extra": shipped},
        "pfb-1": {"label": "this MPM, no bucket directive (one bucket, "
                  "httpd's arrangement)", "kind": "apache", "mpm": MPM_SO,
                  "extra": ""},
        "pfb-per-listen": {"label": "this MPM, ListenBuckets 1 (a bucket "
                           "per Listen)", "kind": "apache", "mpm": MPM_SO,
                           "extra": "ListenBuckets 1\n"},
        "pfb-single": {"label": "this MPM, ListenBuckets 0 (httpd's shared "
                       "poll of several Listens)", "kind": "apache",
                       "mpm": MPM_SO, "extra": "ListenBuckets 0\n"},
        "pfb-ratio1": {"label": "this MPM, ListenCoresBucketsRatio 1",
                       "kind": "apache", "mpm": MPM_SO,
                       "extra": "ListenCoresBucketsRatio 1\n"},
        "pfb-N": {"label": "this MPM, ListenBuckets %d" % n,
                  "kind": "apache", "mpm": MPM_SO,
                  "extra": "ListenBuckets %d\n" % n},
        "pfb-N-cpu": {"label": "this MPM, ListenBuckets %d, steering cpu "
                      "+ BucketCPUAffinity" % n,
                      "kind": "apache", "mpm": MPM_SO,
                      "extra": "ListenBuckets %d\nListenBucketSteering cpu\n"
                               "BucketCPUAffinity on\n" % n},
        # The calibration of the model's cross-node cost: cpu steering's
        # children moved, after start, to another CPU (with the server on
        # several nodes: on the next node; see away_cpu()), so that every
        # connection is served away from where it was received.
        "pfb-N-cpu-away": {"label": "this MPM, ListenBuckets %d, steering "
                           "cpu, children pinned away from their CPU" % n,
                           "kind": "apache", "mpm": MPM_SO, "away": True,
                           "extra": "ListenBuckets %d\nListenBucketSteering "
                                    "cpu\nBucketCPUAffinity on\n" % n},
        "pfb-N-idle": {"label": "this MPM, ListenBuckets %d, steering idle"
                       % n, "kind": "apache", "mpm": MPM_SO,
                       "extra": "ListenBuckets %d\nListenBucketSteering "
                                "idle\n" % n},
        # Locality that can borrow: the receiving CPU's bucket while it has
        # an idle child, else its node's, else any; children pinned.
        "pfb-N-local": {"label": "this MPM, ListenBuckets %d, steering "
                        "local + BucketCPUAffinity" % n, "kind": "apache",
                        "mpm": MPM_SO,
                        "extra": "ListenBuckets %d\nListenBucketSteering "
                                 "local\nBucketCPUAffinity on\n" % n},
        # The floor: this MPM with nothing per request but httpd's core
        # and a fixed 100-byte answer (no file, no access log, no
        # ExtendedStatus).
        "pfb-floor": {"label": "this MPM, floor (fixed-response handler, "
                      "no log, ExtendedStatus Off)", "kind": "apache",
                      "mpm": MPM_SO, "path": FLOOR_PATH,
                      "extra": "ExtendedStatus Off\n<Location %s>\n"
                               "    SetHandler pfb-fixed\n</Location>\n"
                               % FLOOR_PATH},
        "pfb-1-before": {"label": "this MPM before the change (--mpm-before), "
                         "1 bucket", "kind": "apache",
                         "mpm": args.mpm_before, "extra": ""},
        "stock": {"label": "stock prefork", "kind": "apache",
                  "mpm": STOCK_PREFORK, "extra": ""},
        "stock-ratio1": {"label": "stock prefork, ListenCoresBucketsRatio 1",
                         "kind": "apache", "mpm": STOCK_PREFORK,
                         "extra": "ListenCoresBucketsRatio 1\n"},
        "event": {"label": "stock event as shipped", "kind": "apache",
                  "mpm": STOCK_EVENT, "extra": "", "event": "shipped"},
        "event-tuned": {"label": "stock event, ThreadsPerChild 25 sized to "
                        "the load, ListenCoresBucketsRatio 1",
                        "kind": "apache", "mpm": STOCK_EVENT,
                        "extra": "ListenCoresBucketsRatio 1\n",
                        "event": "tuned"},
        "nginx": {"label": "nginx as shipped", "kind": "nginx",
                  "tuned": False},
        "nginx-tuned": {"label": "nginx tuned (reuseport, access_log off, "
                        "worker_cpu_affinity auto, open_file_cache)",
                        "kind": "nginx", "tuned": True},
        "anchor-epoll": {"label": "anchor: an epoll loop per CPU, reuseport",
                         "kind": "anchor", "binary": "anchor_epoll"},
        "anchor-blocking": {"label": "anchor: processes blocking in "
                            "accept()", "kind": "anchor",
                            "binary": "anchor_blocking"},
        "anchor-blocking-linger": {"label": "anchor: blocking in accept(), "
                                   "httpd's lingering close",
                                   "kind": "anchor",
                                   "binary": "anchor_blocking",
                                   "linger": True},
    }


# ---------------------------------------------------------------------------
# Servers

def prefork_tuning(plan):
    """By default the whole pool from the start: short runs measure the
    steady state, not the spawn ramp.  A profile may start smaller and set
    the spare bounds (16cpu, php)."""
    workers, start = plan["workers"], plan["start"]
    min_spare = plan.get("min_spare") or max(1, start // 4)
    max_spare = plan.get("max_spare") or workers
    return ("StartServers %d\nMinSpareServers %d\nMaxSpareServers %d\n"
            "MaxRequestWorkers %d\nServerLimit %d\n"
            % (start, min_spare, max_spare, workers, workers))


# Debian 12's mpm_event.conf, as shipped.
EVENT_SHIPPED = ("StartServers 2\nMinSpareThreads 25\nMaxSpareThreads 75\n"
                 "ThreadLimit 64\nThreadsPerChild 25\nMaxRequestWorkers 150\n"
                 "MaxConnectionsPerChild 0\n")
EVENT_THREADS = 25


def event_children(cfg, start):
    """The processes stock event starts with."""
    if cfg.get("event") == "shipped":
        return 2
    return max(2, int(math.ceil(start / float(EVENT_THREADS))))


def event_tuning(cfg, plan):
    """As shipped, or ThreadsPerChild 25 with every worker the profile
    asks for started at once (and a bucket per CPU through the
    configuration's ListenCoresBucketsRatio 1)."""
    if cfg.get("event") == "shipped":
        return EVENT_SHIPPED
    children = max(2, int(math.ceil(plan["workers"] / float(EVENT_THREADS))))
    return ("ThreadsPerChild %d\nThreadLimit %d\nStartServers %d\n"
            "MinSpareThreads %d\nMaxSpareThreads %d\nServerLimit %d\n"
            "MaxRequestWorkers %d\n"
            % (EVENT_THREADS, EVENT_THREADS,
               event_children(cfg, plan["start"]), EVENT_THREADS,
               children * EVENT_THREADS, children * 2,
               children * EVENT_THREADS))


APACHE_COMMON = ("KeepAliveTimeout 5\nLogLevel warn\n"
                 "<Location /pfb-test>\n    SetHandler pfb-test\n"
                 "</Location>\n" + STATUS_LOCATION)

# Debian 12's apache2.conf, the parts that act per request (every httpd
# configuration gets them unless --conf-base bare): no .htaccess lookup
# anywhere, FollowSymLinks (no lstat per path component), no DNS.  Its
# MaxKeepAliveRequests (100) is what keepalive100 measures.
APACHE_DEBIAN = """Timeout 300
KeepAlive On
MaxKeepAliveRequests {keepalive}
KeepAliveTimeout 5
HostnameLookups Off
<Directory />
    Options FollowSymLinks
    AllowOverride None
    Require all denied
</Directory>
<Directory "{htdocs}">
    Options Indexes FollowSymLinks
    AllowOverride None
    Require all granted
</Directory>
AccessFileName .htaccess
<FilesMatch "^\\.ht">
    Require all denied
</FilesMatch>
"""

# mod_ssl as Debian's ssl.conf sets it up, on the one Listen.
APACHE_TLS = """SSLRandomSeed startup builtin
SSLRandomSeed connect builtin
SSLSessionCache shmcb:{root}/run/ssl_scache(512000)
SSLSessionCacheTimeout 300
SSLCipherSuite HIGH:!aNULL
SSLProtocol all -SSLv3
SSLEngine on
SSLCertificateFile {cert}
SSLCertificateKeyFile {key}
"""


def server_plan(name, prof, args, scene):
    """What a scenario's server looks like: ports, pool sizes, the address
    it listens on, extra configuration and modules, files to serve."""
    plan = {"ports": 4 if name == "fourports" else 1,
            "workers": prof["workers"],
            "start": prof.get("start", prof["workers"]),
            "host": "127.0.0.1", "conf": "", "modules": "",
            "files": {STATIC_PATH: STATIC_BODY},
            "tls": scene.get("tls"), "keepalive": KEEPALIVE_REQUESTS}
    if name == "hetero" and prof.get("hetero_workers"):
        plan["workers"] = plan["start"] = prof["hetero_workers"]
    # A profile's spare bounds (default: Debian's pool).
    for key in ("min_spare", "max_spare"):
        if prof.get(key):
            plan[key] = prof[key]
    pool = re.fullmatch(r"pool(\d+)", name)
    if pool:
        plan["workers"] = plan["start"] = int(pool.group(1))
    if name == "php":
        php = php_settings(prof)
        plan.update(workers=php["php_workers"], start=php["php_start"],
                    min_spare=php["php_min_spare"],
                    max_spare=php["php_max_spare"], conf=PHP_CONF,
                    modules="LoadModule php_module %s\n" % scene["php_so"])
        with open(PHP_SCRIPT) as f:
            plan["files"]["/mixed.php"] = f.read()
        # Stopping, mod_php's children may take over 3 s to exit, under
        # either prefork: exit() runs every library's destructors and
        # free(), which write to pages shared with the parent, and each
        # copy-on-write fault flushes TLBs on the other CPUs (perf on this
        # 2-CPU VM: 20 children took 2-4 s).  httpd then logs that it
        # sends SIGTERM again; the stop is not what this scenario measures.
        plan["expect"] = ("PFB00051", "AH00045")
    if name.startswith("rps"):
        plan["host"] = scene["veth"].server_addr
    return plan


def php_settings(prof):
    return {k: prof.get(k, v) for k, v in PHP_POOL.items()}


def php_clients(prof, args):
    return php_settings(prof)["php_clients_per_cpu"] * len(server_cpus(args))


def write_files(root, files):
    for path, body in files.items():
        with open(os.path.join(root, "htdocs", path.lstrip("/")), "w") as f:
            f.write(body)


def apache_server(cfg, args, plan, wrapper):
    tuning = event_tuning(cfg, plan) if cfg["mpm"] == STOCK_EVENT \
        else prefork_tuning(plan)
    modules = ("LoadModule bucket_status_module %s\n"
               "LoadModule pfb_test_handler_module %s\n%s"
               % (STATUS_SO, TEST_HANDLER_SO, plan["modules"]))
    if plan["tls"]:
        modules += ("LoadModule socache_shmcb_module %s\n"
                    "LoadModule ssl_module %s\n"
                    % (os.path.join(MODULES, "mod_socache_shmcb.so"),
                       os.path.join(MODULES, "mod_ssl.so")))
    # The suite records unexpected log lines in each run's result (and the
    # smoke test fails on them) rather than stopping at the first.
    srv = Server(extra=tuning + APACHE_COMMON + plan["conf"] + cfg["extra"],
                 ports=plan["ports"], mpm=cfg["mpm"], extra_modules=modules,
                 check_log=False,
                 expect_log=EXPECTED_LOG + plan.get("expect", ()),
                 listen_host=plan["host"])
    if args.conf_base == "debian":
        srv.extra = APACHE_DEBIAN.format(
            keepalive=plan["keepalive"],
            htdocs=os.path.join(srv.root, "htdocs")) + srv.extra
    if plan["tls"]:
        srv.extra += APACHE_TLS.format(root=srv.root, cert=plan["tls"][0],
                                       key=plan["tls"][1])
        # The harness reads the scoreboard over the server's one Listen.
        srv.scoreboard = lambda timeout=30: tls_scoreboard(srv, timeout)
    write_files(srv.root, plan["files"])
    srv.wrapper = wrapper
    return srv


def tls_scoreboard(srv, timeout):
    """Server.scoreboard() over TLS, for the TLS scenarios' servers."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((srv.listen_host, srv.ports[0]),
                                  timeout=timeout) as raw:
        with ctx.wrap_socket(raw) as s:
            srv.probe_connections += 1
            s.settimeout(timeout)
            s.sendall(b"GET /pfb-scoreboard HTTP/1.1\r\nHost: localhost\r\n"
                      b"Connection: close\r\n\r\n")
            status, body = read_response(s)
    if status != 200:
        raise AssertionError("GET /pfb-scoreboard over TLS: %d" % status)
    return Scoreboard(body.decode())


def make_cert(directory):
    """A self-signed ECDSA P-256 certificate for localhost (the kind most
    sites serve now), made with openssl; (cert, key) paths."""
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    if os.path.exists(cert) and os.path.exists(key):
        return cert, key
    os.makedirs(directory, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec",
                    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "30",
                    "-subj", "/CN=localhost",
                    "-addext", "basicConstraints=critical,CA:FALSE",
                    "-addext", "subjectAltName=DNS:localhost"], check=True,
                   capture_output=True, timeout=60)
    os.chmod(directory, 0o755)
    for path in (cert, key):
        os.chmod(path, 0o644)
    return cert, key


class NginxServer:
    """Debian's nginx, as shipped (Debian's nginx.conf: a worker per CPU,
    one shared listener, the combined access log, sendfile, gzip) or
    tuned (a reuseport socket and a CPU per worker, no access log, an open
    file cache)."""

    def __init__(self, cfg, plan, args, wrapper):
        self.nports = plan["ports"]
        self.args = args
        self.plan = plan
        self.tuned = cfg.get("tuned", False)
        self.wrapper = wrapper
        self.root = tempfile.mkdtemp(prefix="pfb-nginx-")
        os.chmod(self.root, 0o755)
        os.mkdir(os.path.join(self.root, "htdocs"))
        with open(os.path.join(self.root, "htdocs", "index.html"), "w") as f:
            f.write("hello from prefork buckets\n")
        write_files(self.root, plan["files"])
        self.proc = None
        self.ports = []
        self.probe_connections = 0
        self.conf = os.path.join(self.root, "nginx.conf")
        # One worker per server CPU, as `worker_processes auto` would give
        # nginx started under the same taskset.
        self.cpus = server_cpus(args)
        self.workers = len(self.cpus)

    def write_conf(self):
        ssl_opts = " ssl" if self.plan["tls"] else ""
        listens = "".join("        listen 127.0.0.1:%d%s%s;\n"
                          % (p, " reuseport" if self.tuned else "", ssl_opts)
                          for p in self.ports)
        tls = ""
        if self.plan["tls"]:
            tls = ("        ssl_certificate %s;\n        ssl_certificate_key "
                   "%s;\n" % self.plan["tls"])
        mime = "/etc/nginx/mime.types"
        types = ("    include %s;\n" % mime if os.path.exists(mime) else
                 "    types { text/html html; }\n")
        if self.tuned:
            # worker_cpu_affinity auto binds worker i to the i-th CPU of
            # the host; spelt out, it keeps to the server's CPUs.
            masks = " ".join(
                "".join("1" if c == cpu else "0"
                        for c in range(max(self.cpus), -1, -1))
                for cpu in self.cpus)
            head = ("worker_processes %d;\nworker_cpu_affinity %s;\n"
                    "events { worker_connections 8192; }\n"
                    % (self.workers, masks))
            http = ("    access_log off;\n    sendfile on;\n"
                    "    tcp_nopush on;\n"
                    "    open_file_cache max=1000 inactive=20s;\n"
                    "    open_file_cache_valid 30s;\n"
                    "    ssl_session_cache shared:SSL:10m;\n")
        else:
            head = ("worker_processes %d;\n"
                    "events { worker_connections 768; }\n" % self.workers)
            http = ("    access_log %s/access.log;\n    sendfile on;\n"
                    "    tcp_nopush on;\n    types_hash_max_size 2048;\n"
                    "    ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3;\n"
                    "    ssl_prefer_server_ciphers on;\n    gzip on;\n"
                    % self.root)
        with open(self.conf, "w") as f:
            f.write("%spid %s/nginx.pid;\nerror_log %s/error.log warn;\n"
                    "user www-data;\nhttp {\n%s%s"
                    "    default_type application/octet-stream;\n"
                    "    keepalive_timeout 65;\n"
                    "    keepalive_requests %d;\n    server {\n%s%s"
                    "        root %s/htdocs;\n    }\n}\n"
                    % (head, self.root, self.root, types, http,
                       self.plan["keepalive"], listens, tls, self.root))

    def start(self):
        self.ports = [free_port() for _ in range(self.nports)]
        self.write_conf()
        command = self.wrapper + ["nginx", "-c", self.conf, "-p", self.root,
                                  "-g", "daemon off;"]
        self.proc = subprocess.Popen(command, start_new_session=True,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        return wait_connectable(self, 10, "nginx")

    def wait_ready(self, count, timeout=60):
        """Waits for nginx's workers (one per server CPU)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(self.children()) >= self.workers:
                return self.children()
            time.sleep(0.05)
        return self.children()

    def wait_access_log(self, count, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline and self.tuned is False and \
                len(self.access_log_lines()) < count:
            time.sleep(0.05)

    def unexpected_log_lines(self):
        """nginx's error log: warn and above (see error_log above)."""
        try:
            with open(os.path.join(self.root, "error.log")) as f:
                return [l for l in f.read().splitlines() if l.strip()]
        except OSError:
            return []

    def children(self):
        return [p for p in group_pids(self.proc.pid) if p != self.proc.pid]

    def graceful(self):
        os.kill(self.proc.pid, signal.SIGHUP)

    def access_log_lines(self):
        try:
            with open(os.path.join(self.root, "access.log")) as f:
                return f.read().splitlines()
        except OSError:
            return []

    def url(self, path="/", port_index=0):
        return "http://127.0.0.1:%d%s" % (self.ports[port_index], path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        stop_group(self.proc)
        self.log_problems = self.unexpected_log_lines()
        shutil.rmtree(self.root, ignore_errors=True)
        return False


class AnchorServer:
    """One of test/load/anchors/ (built by make): the physical limit."""

    def __init__(self, cfg, plan, args, wrapper):
        self.cfg = cfg
        self.plan = plan
        self.args = args
        self.wrapper = wrapper
        self.proc = None
        self.ports = []
        self.probe_connections = 0
        self.root = None
        self.conf = None
        epoll = cfg["binary"] == "anchor_epoll"
        # anchor_epoll: a loop per server CPU, each pinned; anchor_blocking:
        # as many processes as the prefork servers start with.
        self.workers = len(server_cpus(args)) if epoll else plan["start"]
        self.binary = os.path.join(ANCHOR_DIR, cfg["binary"])
        self.extra_arg = "pin" if epoll else \
            ("linger" if cfg.get("linger") else "none")

    def command(self):
        return [self.binary, str(self.ports[0]), str(self.workers),
                str(self.plan["keepalive"]), self.extra_arg]

    def start(self):
        if not os.path.exists(self.binary):
            raise RuntimeError("missing %s: run make first" % self.binary)
        self.ports = [free_port()]
        self.proc = subprocess.Popen(self.wrapper + self.command(),
                                     start_new_session=True,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        return wait_connectable(self, 10, self.cfg["binary"])

    def wait_ready(self, count, timeout=60):
        """Waits for every worker, and for anchor_epoll's every reuseport
        socket (a connection made before the last one is bound would only
        reach the first ones)."""
        want_sockets = self.workers if self.extra_arg == "pin" else 1
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(self.children()) >= self.workers and \
                    len(listen_sockets(self.ports[0])) >= want_sockets:
                break
            time.sleep(0.05)
        return self.children()

    def children(self):
        return [p for p in group_pids(self.proc.pid) if p != self.proc.pid]

    def wait_access_log(self, count, timeout=30):
        return None

    def access_log_lines(self):
        return []

    def url(self, path="/", port_index=0):
        return "http://127.0.0.1:%d%s" % (self.ports[port_index], path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        stop_group(self.proc)
        self.log_problems = []
        return False


def wait_connectable(srv, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", srv.ports[0]), 1):
                srv.probe_connections += 1
                return 0
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s did not come up" % what)


def stop_group(proc):
    """SIGTERM, then SIGKILL, to a server started in its own session."""
    if not proc:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=10)
            break
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


def make_server(cfg, args, plan, cgroup=None):
    """The server of one run, started under its cgroup (its CPU time is
    read from there) and --server-cpus."""
    wrapper = cgroup.wrapper() if cgroup else []
    if args.server_cpus:
        wrapper = wrapper + ["taskset", "-c", args.server_cpus]
    if cfg["kind"] == "nginx":
        return NginxServer(cfg, plan, args, wrapper)
    if cfg["kind"] == "anchor":
        return AnchorServer(cfg, plan, args, wrapper)
    return apache_server(cfg, args, plan, wrapper)


def start_server(srv, cfg, plan):
    """Starts a server and waits for its starting pool (StartServers): short
    runs measure the steady state, not children still starting."""
    srv.start()
    if cfg["kind"] in ("nginx", "anchor"):
        srv.wait_ready(plan["start"])
    elif srv.mpm == STOCK_EVENT:
        # One scoreboard row per process is read: event's children.
        srv.wait_ready(event_children(cfg, plan["start"]))
    else:
        srv.wait_ready(plan["start"], idle=True)


def server_cpus(args):
    """The CPUs the servers run on: --server-cpus, or all usable here."""
    if args.server_cpus:
        return netns.cpu_list(args.server_cpus)
    return sorted(os.sched_getaffinity(0))


# Warnings a scenario provokes by design, by configuration kind: the pool
# is sized to the load, so MaxRequestWorkers is reached (ours: PFB00010,
# stock prefork: AH00161, event: AH00484 and its early AH10159), and
# faults kill children.
# PFB00091: a ListenBuckets N configuration run with a spare pool smaller
# than N (Debian's, in php and default) starves buckets by design: that is
# what those runs measure.
EXPECTED_LOG = ("PFB00010", "AH00161", "AH00484", "AH10159", "PFB00035",
                "PFB00091")


# ---------------------------------------------------------------------------
# Measuring processes

def group_pids(pgid):
    return live_pids(STAT_PGRP, pgid)


def server_usage(pgid):
    """CPU seconds, context switches (voluntary: the task slept, waiting;
    involuntary: it was preempted, which on a shared machine is the
    neighbours' doing) and minor page faults of a server's process group:
    live processes, plus what reaped children left in the parent's
    counters (CPU and faults)."""
    ticks = os.sysconf("SC_CLK_TCK")
    usage = {"cpu": 0.0, "voluntary": 0, "nonvoluntary": 0, "minflt": 0}
    for pid in group_pids(pgid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            usage["cpu"] += (int(fields[11]) + int(fields[12])) / \
                float(ticks)
            usage["minflt"] += int(fields[7])
            if pid == pgid:
                usage["cpu"] += (int(fields[13]) + int(fields[14])) / \
                    float(ticks)
                usage["minflt"] += int(fields[8])
            # Every thread's switches: the event MPM and nginx are not
            # single-threaded like prefork.
            for task in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/status" % (pid, task)) as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches"):
                            usage["voluntary"] += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches"):
                            usage["nonvoluntary"] += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return usage


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------------------
# Load generators

def client_cpus(args):
    """The CPUs the load generators run on: --client-cpus, or all usable
    here."""
    if args.client_cpus:
        return netns.cpu_list(args.client_cpus)
    return sorted(os.sched_getaffinity(0))


def client_prefix(args, where=None):
    """The load generator's command prefix: into the rps scenarios'
    namespace (`where`, a netns.VethPair), then onto --client-cpus."""
    prefix = where.prefix() if where else []
    if args.client_cpus:
        prefix += ["taskset", "-c", args.client_cpus]
    return prefix


def run_wrk(args, url, connections, seconds, close=True, exp_ms=None,
            log=None, where=None):
    """One wrk run; the result carries wrk's summary and, under "hist",
    every request's latency (a histogram at 1 us, latency.py)."""
    env = dict(os.environ)
    # wrk_report.lua: Connection: close on every request (WRK_CLOSE=1);
    # WRK_EXP_MS asks the test handler for exponential service times.
    env["WRK_CLOSE"] = "1" if close else "0"
    if exp_ms:
        env["WRK_EXP_MS"] = str(exp_ms)
    fd, hist_path = tempfile.mkstemp(prefix="pfb-wrk-hist-")
    os.close(fd)
    env["WRK_HIST"] = hist_path
    command = client_prefix(args, where) + [
        # threads: --wrk-threads or the profile's, else CPUs, at most 4
        "wrk", "-t", str(min(connections, args.wrk_threads or
                             max(1, min(4, len(client_cpus(args)))))),
        "-c", str(connections),         # connections held open at once
        "-d", "%ds" % seconds,          # how long
        "--latency",                    # the latency distribution
        "-s", WRK_SCRIPT,               # WRK_JSON summary line, close
        url]
    try:
        out = subprocess.run(["timeout", str(seconds + 60)] + command,
                             env=env, capture_output=True, text=True).stdout
        hist = read_text_hist(hist_path)
    finally:
        os.unlink(hist_path)
    if log:
        log.write("$ %s%s%s\n%s\n" % (
            "WRK_CLOSE=%s " % env["WRK_CLOSE"],
            "WRK_EXP_MS=%s " % exp_ms if exp_ms else "",
            " ".join(command), out))
    m = re.search(r"^WRK_JSON (.*)$", out, re.M)
    if not m:
        return {"requests": 0, "rps": 0.0, "errors": {"no_output": 1}}
    result = json.loads(m.group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        result["errors"]["non2xx"] = int(non2xx.group(1))
    result["hist"] = hist
    result["generator"] = "wrk"
    return result


def read_text_hist(path):
    hist = {}
    try:
        with open(path) as f:
            for line in f:
                fields = line.split()
                if len(fields) == 2:
                    hist[int(float(fields[0]))] = hist.get(
                        int(float(fields[0])), 0) + int(float(fields[1]))
    except (OSError, ValueError):
        return {}
    return hist


def merge_wrk(results):
    merged = {"requests": sum(r["requests"] for r in results),
              "rps": sum(r["rps"] for r in results), "errors": {},
              "generator": "wrk"}
    for r in results:
        for k, v in r["errors"].items():
            merged["errors"][k] = merged["errors"].get(k, 0) + v
    for p in ("p50", "p75", "p90", "p99", "p99.9", "p99.99", "max"):
        merged[p] = max(r.get(p, float("nan")) for r in results)
    merged["cdf"] = results[0].get("cdf", [])
    merged["hist"] = latency.merge(r.get("hist", {}) for r in results)
    return merged


def run_openloop(args, url, schedule, log=None):
    """openloop.py at a fixed schedule; rates above OPENLOOP_RATE_PER_PROC
    are split over several processes, each with its share of every
    phase's rate, whose latencies are merged."""
    phases = openloop.parse_schedule(schedule)
    peak = max(rate for _, rate in phases)
    procs = max(1, int(math.ceil(peak / OPENLOOP_RATE_PER_PROC)))
    share = ",".join("%g:%g" % (sec, rate / procs) for sec, rate in phases)
    total = sum(sec for sec, _ in phases)
    tmp = tempfile.mkdtemp(prefix="pfb-openloop-")
    running = []
    try:
        for i in range(procs):
            command = client_prefix(args) + [
                sys.executable, OPENLOOP, "--url", url,
                "--schedule", share,    # SECONDS:RATE phases, this share
                "--latencies", os.path.join(tmp, "lat%d" % i)]
            running.append((command, subprocess.Popen(
                ["timeout", str(total + 60)] + command,
                stdout=subprocess.PIPE, text=True)))
        outs = [(command, p.communicate()[0]) for command, p in running]
        return merge_openloop(outs, tmp, procs, log)
    finally:
        for _, p in running:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def merge_openloop(outs, tmp, procs, log):
    """One result from several openloop.py processes: rates and errors
    added, percentiles over all their latencies, the worst send lag."""
    latencies, errors, sent, elapsed, lag99, lagmax = [], {}, 0, 0.0, 0, 0
    for i, (command, out) in enumerate(outs):
        if log:
            log.write("$ %s\n%s\n" % (" ".join(command), out[:2000]))
        try:
            one = json.loads(out)
        except ValueError:
            errors["no_output"] = errors.get("no_output", 0) + 1
            continue
        lat = array.array("d")
        try:
            with open(os.path.join(tmp, "lat%d" % i), "rb") as f:
                lat.frombytes(f.read())
        except (OSError, ValueError):
            errors["no_output"] = errors.get("no_output", 0) + 1
            continue
        latencies.extend(lat)
        for k, v in one["errors"].items():
            errors[k] = errors.get(k, 0) + v
        sent += one["sent"]
        elapsed = max(elapsed, one["ok"] / one["rate"] if one["rate"] else 0)
        lag99 = max(lag99, one.get("send_lag_p99", 0))
        lagmax = max(lagmax, one.get("send_lag_max", 0))
    if not latencies:
        return {"requests": 0, "rps": 0.0, "errors": errors or
                {"no_output": 1}}
    result = openloop.summarize(latencies, errors, sent, elapsed)
    result.update(requests=result["ok"], rps=result["rate"],
                  send_lag_p99=lag99, send_lag_max=lagmax,
                  generators=procs, generator="openloop",
                  hist=latency.from_latencies(latencies))
    return result


class SlowClients:
    """Slowloris-style clients, bounded: each opens a connection and sends
    one header line a second, never finishing the request, until stopped."""

    def __init__(self, port, count):
        self.port = port
        self.count = count
        self.stop_event = threading.Event()
        self.threads = []
        self.held = 0
        self.lock = threading.Lock()

    def _client(self):
        try:
            s = socket.create_connection(("127.0.0.1", self.port), 5)
            s.sendall(b"GET /index.html HTTP/1.1\r\nHost: x\r\n")
            with self.lock:
                self.held += 1
            while not self.stop_event.wait(1.0):
                s.sendall(b"X-Slow: 1\r\n")
            s.close()
        except OSError:
            return

    def __enter__(self):
        for _ in range(self.count):
            t = threading.Thread(target=self._client, daemon=True)
            t.start()
            self.threads.append(t)
        # Every slow client holds its connection before the load starts.
        deadline = time.time() + 30
        while self.held < self.count and time.time() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for t in self.threads:
            t.join(5)
        return False


# ---------------------------------------------------------------------------
# Scenarios: each returns the load result of one run on a started server.

def with_faults(srv, seconds, action, period=1.0):
    """Calls action(srv) every period seconds for `seconds`, in a thread."""
    stop = threading.Event()
    count = [0]

    def loop():
        while not stop.wait(period):
            try:
                action(srv)
                count[0] += 1
            except (OSError, IndexError):
                pass
    t = threading.Thread(target=loop, daemon=True)
    t.start()

    def finish():
        stop.set()
        t.join(5)
        return count[0]
    return finish


def kill_random_child(srv):
    kids = srv.children()
    os.kill(random.choice(kids), signal.SIGKILL)


def target(srv, cfg, scene, port_index=0, path=None):
    """The URL a scenario loads: the configuration's path (the floor's
    handler, else the static file), over TLS in the tls scenarios."""
    url = srv.url(path or cfg.get("path", STATIC_PATH), port_index)
    return url.replace("http://", "https://", 1) if scene.get("tls") else url


def scenario_run(name, srv, cfg, args, prof, scene, log, secs=None):
    """The load of one run (or of its warm-up, with secs)."""
    conns = prof["connections"]
    secs = secs or prof["seconds"]
    url = target(srv, cfg, scene)
    if re.fullmatch(r"open\d+", name):
        return run_openloop(args, url, "%d:%d" % (secs, scene["rate"]),
                            log=log)
    if name == "rate":
        return run_openloop(args, url, "%d:%d" % (secs, prof["open_rate"]),
                            log=log)
    if name == "php":
        return run_php(srv, args, prof, log, secs)
    if name.startswith("rps"):
        return run_wrk(args, url, conns, secs, log=log, where=scene["veth"])
    if name in ("static-close", "tls-close") or name.startswith("pool"):
        return run_wrk(args, url, conns, secs, log=log)
    if name in ("static-keepalive", "keepalive100", "tls-keepalive"):
        return run_wrk(args, url, conns, secs, close=False, log=log)
    if name == "fourports":
        results = [None] * 4

        def one(i):
            results[i] = run_wrk(args, target(srv, cfg, scene, i),
                                 max(1, conns // 4), secs, log=log)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(secs + 90)
        return merge_wrk([r for r in results if r])
    if name == "hetero":
        clients = prof.get("hetero_clients") or \
            int((prof.get("hetero_workers") or prof["workers"]) * 1.5)
        return run_wrk(args, target(srv, cfg, scene, path="/pfb-test"),
                       clients, secs, exp_ms=10, log=log)
    if name == "openloop":
        return run_openloop(args, url, "%d:%d" % (secs, prof["open_rate"]),
                            log=log)
    if name == "bursts":
        on = "1:%d" % (prof["open_rate"] * 2)
        return run_openloop(args, url,
                            ",".join([on, "1:0"] * max(1, secs - 1)),
                            log=log)
    if name == "slowloris":
        with SlowClients(srv.ports[0], prof["slow_clients"]):
            return run_wrk(args, url, conns, secs, log=log)
    if name in ("graceful", "kills"):
        fault = (lambda s: s.graceful()) if name == "graceful" \
            else kill_random_child
        fault_secs = min(secs, prof["fault_seconds"])
        finish = with_faults(srv, fault_secs, fault,
                             2.0 if name == "graceful" else 1.0)
        result = run_wrk(args, url, conns, fault_secs, log=log)
        result["faults"] = finish()
        return result
    raise ValueError(name)


def run_php(srv, args, prof, log, secs=None):
    """mixed.php over Connection: close (after warm_up)."""
    return run_wrk(args, srv.url("/mixed.php"), php_clients(prof, args),
                   secs or prof["seconds"], log=log)


# What the anchors serve: the static file's bytes, plain HTTP, one Listen.
ANCHOR_SCENARIOS = ("static-close", "static-keepalive", "keepalive100",
                    "rate", "openloop", "bursts", "slowloris")


def scenario_skips(name, cfg, args=None):
    """Why a configuration cannot run a scenario, or None."""
    if cfg.get("extra") == "ListenBuckets 0\n":
        return "ListenBuckets 0 is the default's arrangement"
    if cfg.get("extra") == "ListenBuckets 1\n" and name != "fourports":
        return "with one Listen, ListenBuckets 1 is the default's arrangement"
    if cfg["kind"] == "anchor" and name not in ANCHOR_SCENARIOS \
            and not re.fullmatch(r"open\d+", name):
        return "the anchors answer the static file over plain HTTP only"
    if cfg["kind"] == "apache" and not cfg.get("mpm"):
        return "no --mpm-before given"
    if name.startswith("pool") and (cfg["kind"] != "apache"
                                    or cfg.get("mpm") == STOCK_EVENT):
        return "the pool scenarios compare prefork pools"
    if cfg["kind"] == "nginx" and name == "hetero":
        return "nginx has no test handler for service times"
    if name == "php" and (cfg["kind"] == "nginx"
                          or cfg.get("mpm") == STOCK_EVENT
                          or cfg.get("path")):
        return "Debian's mod_php needs a prefork MPM"
    if name.startswith("rps") and cfg["kind"] == "nginx":
        return "the rps scenarios compare the MPM's steering modes"
    return None


# ---------------------------------------------------------------------------
# Distribution of connections

def jain(values):
    values = [v for v in values]
    if not values or sum(values) == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def distribution(srv, cfg, scene=None):
    """Per-bucket and per-child (status module) and per-child (access log
    pid) counts."""
    result = {}
    scene = scene or {}
    if cfg["kind"] == "apache":
        try:
            import urllib.request
            ctx = None
            if scene.get("tls"):
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            with urllib.request.urlopen(
                    target(srv, cfg, scene, path="/bucket-status?json"),
                    timeout=10, context=ctx) as r:
                doc = json.load(r)
            if doc.get("available"):
                result["buckets"] = [b["accepted"] for b in doc["buckets"]]
                result["bucket_jain"] = doc["balance"]["buckets"]["jain"]
                result["bucket_children"] = [b["children"]["total"]
                                             for b in doc["buckets"]]
                result["status_children"] = len(doc["children"])
                result["status_child_jain"] = \
                    doc["balance"]["children"]["jain"]
        except (OSError, ValueError, KeyError):
            pass
    per_child = collections.Counter()
    for line in srv.access_log_lines():
        fields = line.split()
        # The harness's and the suite's log formats have the pid second.
        if len(fields) > 2 and fields[1].isdigit():
            per_child[fields[1]] += 1
    if per_child:
        result["children"] = sorted(per_child.values(), reverse=True)
        result["child_jain"] = jain(list(per_child.values()))
        result.update(reuse_distance(srv.access_log_lines()))
    return result


def reuse_distance(lines):
    """How long ago, in requests, each request's child last served one
    (access log order): with a process per connection, a child that
    served a moment ago is warm, one that waited through many others'
    requests is cold.  The median, and the share of requests whose child
    had waited through more than 64 (cold_share)."""
    last, dist = {}, []
    for i, line in enumerate(lines):
        fields = line.split()
        if len(fields) > 2 and fields[1].isdigit():
            if fields[1] in last:
                dist.append(i - last[fields[1]])
            last[fields[1]] = i
    if not dist:
        return {}
    dist.sort()
    return {"reuse_median": dist[len(dist) // 2],
            "cold_share": round(sum(1 for d in dist if d > COLD_REUSE)
                                / float(len(dist)), 4)}


def children_memory(pids):
    """Total RSS and PSS (kB) of these processes.  PSS divides each shared
    page among the processes that map it, so forked children that share
    the parent's pages are not counted many times over."""
    rss = pss = 0
    for pid in pids:
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return {"rss_kb": rss, "pss_kb": pss}


def rps_locality(result, args, scene):
    """Share of connections in the buckets of the CPUs that RPS sends
    packets to.  With one bucket per server CPU (bucket j on the j-th
    server CPU, as cpu steering maps them), a connection whose SYN was
    processed on CPU c and that landed on c's bucket counts here; when
    RPS covers only some CPUs, cpu steering should put every connection
    there, and hash or idle about the covered CPUs' share."""
    buckets = result.get("distribution", {}).get("buckets")
    cpus = server_cpus(args)
    if not buckets or len(buckets) != len(cpus) or not sum(buckets):
        return None
    covered = set(scene["veth"].rps_cpus)
    if covered >= set(cpus):
        return None             # every bucket's CPU: nothing to tell
    local = sum(n for cpu, n in zip(cpus, buckets) if cpu in covered)
    return round(local / float(sum(buckets)), 4)


# ---------------------------------------------------------------------------
# Host

def host_info():
    def cmd(command):
        try:
            out = subprocess.run(command, capture_output=True, text=True,
                                 timeout=10)
            return (out.stdout + out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "n/a"

    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return "n/a"
    sockets = "n/a"
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"^Socket\(s\):\s+(\d+)", lscpu, re.M)
    if m:
        sockets = int(m.group(1))
    model = re.search(r"^Model name:\s+(.*)$", lscpu, re.M)
    nodes = len([d for d in os.listdir("/sys/devices/system/node")
                 if re.fullmatch(r"node\d+", d)]) \
        if os.path.isdir("/sys/devices/system/node") else "n/a"
    reuseport = "no"
    try:
        a, b = socket.socket(), socket.socket()
        for s in (a, b):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", a.getsockname()[1]))
        reuseport = "yes"
        a.close()
        b.close()
    except OSError:
        pass
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "cpus_online": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": model.group(1) if model else "n/a",
        "sockets": sockets, "numa_nodes": nodes,
        "kernel": os.uname().release,
        "so_reuseport": reuseport,
        "tcp_migrate_req": read("/proc/sys/net/ipv4/tcp_migrate_req"),
        "somaxconn": read("/proc/sys/net/core/somaxconn"),
        "apache2": cmd([HTTPD, "-v"]),
        "nginx": cmd(["nginx", "-v"]),
        "wrk": cmd(["wrk", "-v"]),
        "ab": cmd(["ab", "-V"]),
        "gcc": cmd(["gcc", "--version"]),
        "python": sys.version.split()[0],
    }


# ---------------------------------------------------------------------------
# Syscalls per request (sampled strace -c -f run)

def syscalls_per_request(cfg, args, prof, out_dir, log):
    """strace -c -f of every server process over 1000 requests (ab -c 4,
    HTTP/1.0, a connection each): system calls per request, the most
    frequent ones, and poll()s per accept, which shows a lingering close
    that sleeps."""
    requests = 1000
    plan = server_plan("static-close", prof, args, {})
    trace = os.path.join(out_dir, "strace-%s.txt" % cfg["key"])
    with make_server(cfg, args, plan) as srv:
        start_server(srv, cfg, plan)
        pids = [srv.proc.pid] + srv.children()
        tracer = subprocess.Popen(
            ["strace", "-c", "-f", "-o", trace]
            + sum((["-p", str(p)] for p in pids), []),
            stderr=subprocess.DEVNULL)
        wait_traced(pids)
        command = client_prefix(args) + [
            "ab", "-q", "-n", str(requests), "-c", "4",
            target(srv, cfg, {})]
        subprocess.run(["timeout", "120"] + command, capture_output=True)
        log.write("$ strace -c -f -o %s -p <each server process> ; %s\n"
                  % (trace, " ".join(command)))
        tracer.send_signal(signal.SIGINT)
        try:
            tracer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            tracer.kill()
    calls = {}
    try:
        with open(trace) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 5 and fields[-1].isidentifier() and \
                        fields[3].isdigit() and fields[-1] != "total":
                    calls[fields[-1]] = int(fields[3])
    except OSError:
        return {}
    total = sum(calls.values())
    top = sorted(calls.items(), key=lambda kv: -kv[1])[:10]
    accepts = calls.get("accept4", 0) + calls.get("accept", 0)
    polls = sum(calls.get(k, 0) for k in ("poll", "ppoll"))
    return {"per_request": round(total / float(requests), 1),
            "requests": requests, "calls": calls,
            "poll_per_accept": round(polls / float(accepts), 3)
            if accepts else None,
            "top": {k: round(v / float(requests), 2) for k, v in top}}


# ---------------------------------------------------------------------------

def wait_traced(pids, timeout=30):
    """Waits until strace is attached to every pid (TracerPid set)."""
    def traced(pid):
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("TracerPid:"):
                        return int(line.split()[1]) != 0
        except OSError:
            return True         # gone: nothing left to wait for
        return False
    deadline = time.time() + timeout
    while time.time() < deadline and not all(traced(p) for p in pids):
        time.sleep(0.05)


def one_run(name, key, cfg, args, prof, log, scene=None, out_dir=None,
            pair=0):
    """One measured run on a freshly started, warmed-up server."""
    scene = scene or {}
    plan = server_plan(name, prof, args, scene)
    with cgroupcpu.ServerCgroup("%s-%s-%d" % (key, name, pair)) as cgroup:
        with make_server(cfg, args, plan, cgroup) as srv:
            start_server(srv, cfg, plan)
            if cfg.get("away"):
                pin_children_away(srv, args, log)
            warmed = warm_up(name, srv, cfg, args, prof, scene, log)
            if out_dir and pair <= 1:
                save_config(srv, key, name, out_dir)
            use0 = server_usage(srv.proc.pid)
            cg0 = cgroup.usage()
            gen0 = children_cpu()
            kernel = hoststate.Counters(server_cpus(args),
                                        client_cpus(args)).start()
            started = time.time()
            result = scenario_run(name, srv, cfg, args, prof, scene, log)
            elapsed = time.time() - started
            result["kernel"] = kernel.stop()
            result["warmup"] = warmed
            cg1 = cgroup.usage()
            use1 = server_usage(srv.proc.pid)
            # The pool as the load left it, before idle children are reaped.
            kids = srv.children()
            result["children_end"] = len(kids)
            result["memory"] = children_memory(kids)
            result["server_cpu_cgroup"] = cgroupcpu.delta(cg0, cg1)
            result["server_cpu_proc_s"] = round(use1["cpu"] - use0["cpu"], 2)
            # The cgroup's count where there is one: it includes children
            # that exited during the run and every thread.
            result["server_cpu_s"] = result["server_cpu_cgroup"]["total"] \
                if result["server_cpu_cgroup"] else result["server_cpu_proc_s"]
            result["loadgen_cpu_s"] = round(children_cpu() - gen0, 2)
            result["ctx_voluntary"] = use1["voluntary"] - use0["voluntary"]
            result["ctx_switches"] = result["ctx_voluntary"] + \
                use1["nonvoluntary"] - use0["nonvoluntary"]
            result["minor_faults"] = use1["minflt"] - use0["minflt"]
            result["elapsed_s"] = round(elapsed, 2)
            # The server logs a request after its response is out.
            if not cfg.get("path"):
                srv.wait_access_log(result.get("requests", 0), timeout=30)
            result["distribution"] = distribution(srv, cfg, scene)
            if name.startswith("rps"):
                result["rps_cpus"] = scene["veth"].rps_cpus
                result["rps_local_share"] = rps_locality(result, args, scene)
    # Read at the stop, so that what stopping logs is counted too.
    result["log_problems"] = srv.log_problems[:20]
    keep_latencies(result, name, key, pair, out_dir)
    result["invalid"] = judge_run(name, result, args)
    return result


def cpu_nodes():
    """{cpu: NUMA node} from sysfs ({} without NUMA information)."""
    nodes = {}
    base = "/sys/devices/system/node"
    if not os.path.isdir(base):
        return nodes
    for name in os.listdir(base):
        m = re.fullmatch(r"node(\d+)", name)
        if not m:
            continue
        try:
            with open(os.path.join(base, name, "cpulist")) as f:
                for cpu in netns.cpu_list(f.read().strip()):
                    nodes[cpu] = int(m.group(1))
        except (OSError, ValueError):
            continue
    return nodes


def away_cpu(cpu, cpus, nodes):
    """Where pfb-N-cpu-away runs the children of `cpu`'s bucket: with the
    server's CPUs on several nodes, the CPU of the same rank on the next
    node (whatever the numbering: interleaved too); on one node, the CPU
    half the list away."""
    by_node = collections.defaultdict(list)
    for c in cpus:
        by_node[nodes.get(c, 0)].append(c)
    order = sorted(by_node)
    if len(order) > 1:
        here = nodes.get(cpu, 0)
        there = by_node[order[(order.index(here) + 1) % len(order)]]
        return there[by_node[here].index(cpu) % len(there)]
    return cpus[(cpus.index(cpu) + len(cpus) // 2) % len(cpus)]


def pin_children_away(srv, args, log):
    """Moves each child of bucket b (pinned to the server CPU of rank b by
    BucketCPUAffinity) away (away_cpu()): the connections that cpu
    steering gives it are then served away from the CPU, or the node,
    that received them.  The pool is fixed in these runs, so no child
    starts later."""
    cpus = server_cpus(args)
    nodes = cpu_nodes()
    moved = 0
    for slot in srv.scoreboard().serving():
        if not 0 <= slot["bucket"] < len(cpus):
            continue
        target = away_cpu(cpus[slot["bucket"]], cpus, nodes)
        try:
            os.sched_setaffinity(slot["pid"], {target})
            moved += 1
        except OSError:
            continue
    log.write("# moved %d children away from their bucket's CPU\n" % moved)


def keep_latencies(result, name, key, pair, out_dir):
    """Writes the run's latency histogram (latency/*.gz) and takes the
    percentiles from it."""
    hist = result.pop("hist", None) or {}
    if not hist:
        return
    result.update(latency.summary(hist))
    if out_dir and pair:
        rel = os.path.join("latency", "%s-%s-p%d.hist.gz" % (name, key, pair))
        latency.write(os.path.join(out_dir, rel), hist)
        result["latency_file"] = rel


def judge_run(name, result, args):
    """Why a run cannot be used (validity.py), with --max-lag-ms."""
    return validity.judge_run(name, result, args.max_lag_ms)


def save_config(srv, key, name, out_dir):
    """The generated configuration of a configuration's first run."""
    folder = os.path.join(out_dir, "configs")
    os.makedirs(folder, exist_ok=True)
    dest = os.path.join(folder, "%s-%s.conf" % (key, name))
    if getattr(srv, "conf", None) and os.path.exists(srv.conf):
        shutil.copyfile(srv.conf, dest)
    elif isinstance(srv, AnchorServer):
        with open(dest, "w") as f:
            f.write("# command line\n%s\n" % " ".join(srv.command()))


def warm_up(name, srv, cfg, args, prof, scene, log):
    """The same load before the measured run, on the same server, not
    counted: the pool has grown and caches are warm (php: PHP's opcache
    too).  Fault scenarios start cold: their faults are the load.
    Returns what the warm-up did, for the run's record."""
    warmup = php_settings(prof)["php_warmup"] if name == "php" \
        else prof.get("warmup", 0)
    if not warmup or name in FAULT_SCENARIOS + ("graceful", "kills"):
        return {}
    pool = re.fullmatch(r"pool(\d+)", name)
    if pool:
        return warm_pool(int(pool.group(1)), name, srv, cfg, args, prof,
                         scene, log, warmup)
    log.write("# warm-up, %s s, not counted\n" % warmup)
    scenario_run(name, srv, cfg, args, prof, scene, log, secs=warmup)
    return {"seconds": warmup}


def warm_pool(size, name, srv, cfg, args, prof, scene, log, warmup):
    """A child's first requests pay for its copy-on-write faults and its
    pools' first allocations (several ms each on the development VM): a
    pool is warm once nearly every child has served (the access log's
    pids), which a fixed time cannot promise at every machine's rate.
    Loads in rounds of `warmup` seconds until 90 % of the children have
    served, for at most POOL_WARMUP_PER_CHILD seconds per child."""
    started = time.time()
    cap = max(warmup, size * POOL_WARMUP_PER_CHILD)
    served = 0
    while True:
        scenario_run(name, srv, cfg, args, prof, scene, log, secs=warmup)
        served = len({l.split()[1] for l in srv.access_log_lines()
                      if len(l.split()) > 2 and l.split()[1].isdigit()})
        if served >= 0.9 * size or time.time() - started >= cap:
            break
    took = round(time.time() - started, 1)
    log.write("# warm-up: %d of %d children served in %s s, not counted\n"
              % (served, size, took))
    return {"seconds": took, "children_served": served}


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", dest="profile",
                      const="quick")
    size.add_argument("--full", action="store_const", dest="profile",
                      const="full")
    size.add_argument("--profile", choices=sorted(PROFILES))
    parser.add_argument("--configs", help="comma-separated subset of %s"
                        % ",".join(CONFIG_ORDER))
    parser.add_argument("--scenarios", help="comma-separated subset")
    parser.add_argument("--pairs", type=int, help="override the profile")
    parser.add_argument("--seconds", type=int, help="override the profile")
    parser.add_argument("--buckets", type=int,
                        help="N for the ListenBuckets N configurations "
                        "(default 4; one per server CPU in the 16cpu, php "
                        "and rps profiles)")
    parser.add_argument("--server-cpus", help="taskset CPU list for servers")
    parser.add_argument("--client-cpus",
                        help="taskset CPU list for load generators")
    parser.add_argument("--workers", type=int,
                        help="MaxRequestWorkers (= StartServers unless the "
                        "profile sets them apart); hetero runs 1.5 clients "
                        "per worker")
    parser.add_argument("--connections", type=int,
                        help="wrk connections for the static scenarios")
    parser.add_argument("--wrk-threads", type=int,
                        help="wrk threads (default: the profile's, else "
                        "CPUs, at most 4); with cpu steering on loopback, "
                        "connections come in on the CPUs the generator "
                        "runs on")
    parser.add_argument("--scale", type=float,
                        help="multiply a scaled profile's sizes (16cpu) by "
                        "this; default: server CPUs / the profile's CPUs, "
                        "where that is below 1")
    parser.add_argument("--rps-cpus",
                        help="rps: CPU list RPS spreads flows over (default "
                        "the server's CPUs; rps-half: their lower half)")
    parser.add_argument("--no-strace", action="store_true",
                        help="skip the sampled strace -c -f runs")
    parser.add_argument("--rate", type=int,
                        help="the open-loop rate of rate, openloop and "
                        "bursts (req/s; default: the profile's, scaled)")
    parser.add_argument("--warmup", type=float,
                        help="seconds of the same load before each measured "
                        "run, on the same server (default: the profile's)")
    parser.add_argument("--seed", default=None,
                        help="seed of the run order within each pair "
                        "(default: the time; recorded in results.json)")
    parser.add_argument("--max-lag-ms", type=float, default=5.0,
                        help="open-loop runs whose generator sent late by "
                        "more than this at p99 are invalid (default 5)")
    parser.add_argument("--mpm-before", metavar="SO",
                        help="the MPM built from an earlier commit, as "
                        "configuration pfb-1-before")
    parser.add_argument("--conf-base", choices=("debian", "bare"),
                        default="debian",
                        help="every httpd configuration with Debian's "
                        "apache2.conf defaults (default), or without")
    parser.add_argument("--make-cert", metavar="DIR",
                        help="only make the TLS scenarios' test certificate "
                        "in DIR (for a kit without openssl) and exit")
    parser.add_argument("--out")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = str(int(time.time()))
    return args


def profile_settings(args):
    """The profile, scaled to the server's CPUs and with the command
    line's overrides; resolves --buckets and --wrk-threads."""
    prof = dict(DEFAULTS, **PROFILES[args.profile or "quick"])
    ncpus = len(server_cpus(args))
    scale = 1.0
    if "cpus" in prof:
        scale = args.scale or min(1.0, ncpus / float(prof["cpus"]))
        for k in SCALED:
            if k in prof:
                prof[k] = max(1, int(round(prof[k] * scale)))
    prof["scale"] = scale
    if args.pairs:
        prof["pairs"] = prof["fault_pairs"] = args.pairs
    if args.seconds:
        prof["seconds"] = args.seconds
    if args.workers:
        prof["workers"] = args.workers
        if prof.get("start", 0) > args.workers:
            prof["start"] = args.workers
    if prof.get("connections_per_cpu"):
        prof["connections"] = prof["connections_per_cpu"] * ncpus
    if args.connections:
        prof["connections"] = args.connections
    if args.warmup is not None:
        prof["warmup"] = args.warmup
    if args.rate:
        prof["open_rate"] = args.rate
    if args.buckets is None:
        args.buckets = ncpus if prof.get("buckets") == "cpus" else 4
    prof["buckets"] = args.buckets
    if args.wrk_threads is None and prof.get("wrk_threads"):
        args.wrk_threads = min(prof["wrk_threads"], prof["connections"])
    return prof


@contextlib.contextmanager
def scenario_scene(name, doc, keys, all_configs, args, prof, log, out_dir):
    """What a scenario needs around all its runs: openNN the rate (from
    stock event's static-close req/s in this run, measured now if the run
    has none), php the module, rps the namespace with RPS set, tls the
    test certificate.  Yields None, with a reason in doc, when the scenario
    cannot run here."""
    scene = {}
    if name.startswith("tls-"):
        why = tls_unavailable()
        if why:
            doc["unavailable"][name] = why
            yield None
            return
        scene["tls"] = make_cert(os.environ.get("PFB_BENCH_CERT_DIR")
                                 or os.path.join(out_dir, "tls"))
        doc["tls"] = {"certificate": "self-signed ECDSA P-256 (openssl req "
                      "-x509 -newkey ec -pkeyopt ec_paramgen_curve:"
                      "prime256v1)", "client": "wrk (OpenSSL), a full "
                      "handshake on every new connection"}
    m = re.fullmatch(r"open(\d+)", name)
    if m:
        capacity = event_capacity(doc, all_configs, args, prof, log)
        scene["rate"] = max(1, int(capacity * int(m.group(1)) / 100.0))
        doc.setdefault("open_rates", {})[name] = scene["rate"]
        print("%s: %d req/s (%s %% of stock event's %.0f)"
              % (name, scene["rate"], m.group(1), capacity))
    if name == "php":
        scene["php_so"] = php_module()
        if not scene["php_so"]:
            doc["unavailable"][name] = ("no libphp*.so in %s: apt-get "
                                        "install libapache2-mod-php" % MODULES)
            yield None
            return
    if name.startswith("rps"):
        why = rps_unavailable()
        if why:
            doc["unavailable"][name] = why
            yield None
            return
        with netns.VethPair(log) as veth:
            veth.set_rps(rps_cpu_set(name, args))
            scene["veth"] = veth
            print("%s: server on %s, generator in netns %s, RPS CPUs %s"
                  % (name, veth.server_addr, veth.ns, veth.rps_cpus))
            yield scene
        return
    yield scene


def event_capacity(doc, all_configs, args, prof, log):
    """Stock event's closed-loop static-close req/s in this run (median),
    measured once now when the run has none."""
    runs = [r for r in doc["runs"] if r["scenario"] == "static-close"
            and r["config"] == "event" and "skipped" not in r
            and not r.get("invalid")]
    if not runs:
        cfg = dict(all_configs["event"], key="event")
        log.write("\n### capacity: stock event, static-close\n")
        result = one_run("static-close", "event", cfg, args, prof, log)
        result.update({"scenario": "capacity", "config": "event",
                       "pair": 1})
        if result["invalid"]:
            print("capacity run invalid (%s); its rate is used anyway"
                  % "; ".join(result["invalid"]))
        doc["runs"].append(result)
        runs = [result]
    return statistics.median(r["rps"] for r in runs)


def php_module():
    names = sorted(f for f in os.listdir(MODULES)
                   if re.fullmatch(r"libphp[\d.]*\.so", f)) \
        if os.path.isdir(MODULES) else []
    return os.path.join(MODULES, names[-1]) if names else None


def tls_unavailable():
    if not os.path.exists(os.path.join(MODULES, "mod_ssl.so")):
        return "no mod_ssl.so in %s" % MODULES
    if not os.environ.get("PFB_BENCH_CERT_DIR") and \
            not shutil.which("openssl"):
        return "needs openssl (for the test certificate) or " \
               "PFB_BENCH_CERT_DIR"
    return None


def rps_unavailable():
    if os.geteuid() != 0:
        return "needs root (ip netns, veth, rps_cpus)"
    if not shutil.which("ip"):
        return "needs ip (iproute2)"
    return None


def rps_cpu_set(name, args):
    cpus = netns.cpu_list(args.rps_cpus) if args.rps_cpus \
        else server_cpus(args)
    if name == "rps-half" and not args.rps_cpus:
        cpus = cpus[:max(1, len(cpus) // 2)]
    return cpus


def run_scenario(name, doc, keys, all_configs, args, prof, log, out_dir):
    """Every pair: each configuration once, in an order shuffled anew for
    the pair (seeded by --seed, the scenario and the pair), so that no
    configuration always follows the same one."""
    pairs = prof.get("fault_pairs", prof["pairs"]) \
        if name in ("graceful", "kills") else prof["pairs"]
    with scenario_scene(name, doc, keys, all_configs, args, prof, log,
                        out_dir) as scene:
        if scene is None:
            print("%s: skipped, %s" % (name, doc["unavailable"][name]))
            return
        runnable = []
        for key in keys:
            why = scenario_skips(name, all_configs[key], args)
            if why:
                doc["runs"].append({"scenario": name, "config": key,
                                    "pair": 0, "skipped": why})
            else:
                runnable.append(key)
        for pair in range(pairs):
            order = list(runnable)
            random.Random("%s/%s/%d" % (args.seed, name, pair)).shuffle(order)
            for position, key in enumerate(order):
                cfg = all_configs[key]
                log.write("\n### %s pair %d %s\n" % (name, pair + 1, key))
                result = one_run(name, key, cfg, args, prof, log, scene,
                                 out_dir, pair + 1)
                result.update({"scenario": name, "config": key,
                               "pair": pair + 1, "position": position})
                doc["runs"].append(result)
                save_progress(doc, out_dir)
                print("%-16s pair %d  %-40s rps %8.1f  p99 %7.1f ms  "
                      "errors %s%s" % (name, pair + 1, cfg["label"][:40],
                                       result.get("rps", 0.0),
                                       result.get("p99", float("nan")),
                                       sum(result["errors"].values()),
                                       "  INVALID: " + "; ".join(
                                           result["invalid"])
                                       if result["invalid"] else ""))
                sys.stdout.flush()


def save_progress(doc, out_dir):
    """results.json after every run, so that a run cut short (a crash, a
    lease that ends) keeps what it measured; report.py reads it."""
    path = os.path.join(out_dir, "results.json")
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)


def stop_on_sigterm():
    """SIGTERM (timeout, kill) unwinds like Ctrl-C, through every `with`
    that stops a server or deletes the namespace."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def main():
    args = parse_args()
    exit_on_sigterm()
    if args.make_cert:
        print("certificate: %s, key: %s" % make_cert(args.make_cert))
        return 0
    prof = profile_settings(args)
    all_configs = configs(args)
    if args.list:
        for key in CONFIG_ORDER:
            print("%-23s %s" % (key, all_configs[key]["label"]))
        print("scenarios: %s" % ", ".join(SCENARIOS))
        print("profiles: %s" % ", ".join(sorted(PROFILES)))
        return 0
    keys = args.configs.split(",") if args.configs \
        else prof.get("configs", DEFAULT_CONFIGS)
    scenarios = args.scenarios.split(",") if args.scenarios \
        else prof["scenarios"]
    for key in keys:
        if key not in all_configs:
            print("unknown configuration %s (--list)" % key)
            return 2
        all_configs[key]["key"] = key
    out_dir = args.out or os.path.join(
        TOP, "bench-results", "suite-%s" % time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    for so in (MPM_SO, STATUS_SO, TEST_HANDLER_SO):
        if not os.path.exists(so):
            print("missing %s: run make first" % so)
            return 2
    stop_on_sigterm()
    started = time.time()
    doc = {"host": host_info(), "host_state": hoststate.host_state(),
           "profile": args.profile or "quick",
           "settings": prof, "configs": {k: all_configs[k]["label"]
                                         for k in keys},
           "baseline": BASELINE, "runs": [], "syscalls": {},
           "buckets": args.buckets, "unavailable": {},
           "php": dict(php_settings(prof), clients=php_clients(prof, args)),
           "server_cpus": server_cpus(args),
           "client_cpus": client_cpus(args),
           "seed": args.seed, "conf_base": args.conf_base,
           "max_lag_ms": args.max_lag_ms,
           "command": " ".join([os.path.basename(sys.argv[0])]
                               + sys.argv[1:])}
    print("host: %s" % json.dumps(doc["host"]))
    print("commit %s, seed %s" % (doc["host_state"]["commit"], args.seed))
    if prof["scale"] != 1.0:
        print("profile %s scaled by %g to %d server CPUs: %s"
              % (doc["profile"], prof["scale"], len(doc["server_cpus"]),
                 ", ".join("%s %s" % (k, prof[k]) for k in SCALED
                           if k in prof)))
    with open(os.path.join(out_dir, "raw.log"), "w") as log:
        log.write("$ %s\n" % " ".join([sys.executable] + sys.argv))
        # One discarded run first: the first server after a while pays for
        # a cold page cache and a fork storm, which is not a configuration's
        # doing.
        first = next((k for k in keys if not scenario_skips(
            "static-close", all_configs[k], args)), None)
        if first:
            one_run("static-close", first, all_configs[first], args,
                    dict(prof, seconds=1, warmup=0), log)
        for name in scenarios:
            run_scenario(name, doc, keys, all_configs, args, prof, log,
                         out_dir)
        want_strace = not args.no_strace and (
            prof.get("strace") or args.profile in ("full", "bigbox"))
        for key in keys if want_strace else []:
            if scenario_skips("static-close", all_configs[key], args):
                continue
            doc["syscalls"][key] = syscalls_per_request(
                all_configs[key], args, prof, out_dir, log)
            print("syscalls/request %-13s %s %s" % (
                key, doc["syscalls"][key].get("per_request"),
                doc["syscalls"][key].get("top")))
    doc["elapsed_s"] = round(time.time() - started, 1)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    write_csv(doc, os.path.join(out_dir, "results.csv"))
    report.write_report(doc, out_dir)
    if "hetero" in scenarios:
        write_sim_report(doc, prof, keys, out_dir)
    print("\nreport: %s (%.0f s)" % (os.path.join(out_dir, "report.md"),
                                      doc["elapsed_s"]))
    return 0


def write_sim_report(doc, prof, keys, out_dir):
    """The scale model, checked against this run's hetero medians."""
    measured = {}
    for case, key in (("single", "pfb-1"), ("hash", "pfb-ratio1"),
                      ("idle", "pfb-N-idle")):
        runs = [r for r in doc["runs"] if r["scenario"] == "hetero"
                and r["config"] == key and "skipped" not in r]
        if runs and key in keys:
            measured[case] = {m: statistics.median(r[m] for r in runs)
                              for m in ("rps", "p50", "p90", "p99")}
    measured["buckets"] = doc["host"]["cpus_usable"]
    if "idle" in measured:
        measured["idle_buckets"] = doc.get("buckets", 4)
    workers = prof.get("hetero_workers") or prof["workers"]
    path = bucketsim.write_report(measured, workers, int(workers * 1.5),
                                  doc["host"]["cpus_usable"],
                                  os.path.join(out_dir, "sim-report.md"))
    print("model: %s" % path)


def write_csv(doc, path):
    fields = ["scenario", "config", "pair", "position", "invalid", "rps",
              "p50", "p90", "p99", "p99.9", "max", "errors", "server_cpu_s",
              "loadgen_cpu_s", "ctx_switches", "bucket_jain", "child_jain",
              "faults", "cpu_us_per_request", "children_end",
              "status_children", "status_child_jain", "rss_kb", "pss_kb",
              "rps_local_share", "listen_overflows", "listen_drops",
              "server_softirq_s", "server_idle_s", "send_lag_p99",
              "latency_file"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(fields)
        for r in doc["runs"]:
            if "skipped" in r:
                continue
            d = r.get("distribution", {})
            k = r.get("kernel", {})
            w.writerow([r["scenario"], r["config"], r["pair"],
                        r.get("position"), "; ".join(r.get("invalid", [])),
                        round(r.get("rps", 0.0), 1), r.get("p50"),
                        r.get("p90"), r.get("p99"), r.get("p99.9"),
                        r.get("max"), json.dumps(r["errors"]),
                        r.get("server_cpu_s"), r.get("loadgen_cpu_s"),
                        r.get("ctx_switches"), d.get("bucket_jain"),
                        d.get("child_jain"), r.get("faults"),
                        report.cpu_us_per_request(r),
                        r.get("children_end"), d.get("status_children"),
                        d.get("status_child_jain"),
                        r.get("memory", {}).get("rss_kb"),
                        r.get("memory", {}).get("pss_kb"),
                        r.get("rps_local_share"),
                        k.get("nstat", {}).get("TcpExtListenOverflows"),
                        k.get("nstat", {}).get("TcpExtListenDrops"),
                        k.get("cpu_server", {}).get("softirq"),
                        k.get("cpu_server", {}).get("idle"),
                        r.get("send_lag_p99"), r.get("latency_file")])


if __name__ == "__main__":
    sys.exit(main())
