# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The load suite's profiles (which configurations, scenarios, sizes and
durations each one runs), its scenarios and its configurations (what each
server runs: this MPM's settings, Debian's stock MPMs, nginx, the
anchors)."""

import os

from pfbtest import STOCK_PREFORK, STOCK_EVENT, MPM_SO

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, ".."))
# contrib/upstream/check-patch.sh modules builds these.
UPSTREAM_SO = os.path.join(TOP, "build", "upstream", "httpd-2.4.62%s",
                           "mod_mpm_prefork.so")


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
    # The first 16-CPU table, as measured on a 16-CPU host: wrk -t16 -c256,
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
                "idle_policies": ["default", "poll"],
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
    # (16 connections per server CPU) with 64 to 4096 children.  The pool
    # curve at fixed rates, one server per build and pool serving both
    # rates and both idle policies, is poolcurve.py's.
    "pool": {"pairs": 6, "seconds": 8, "warmup": 2, "workers": 64,
             "connections_per_cpu": 16, "buckets": "cpus",
             "idle_policies": ["default", "poll"],
             "configs": ["stock", "stock-ratio1", "pfb-1", "pfb-N"],
             "scenarios": ["pool64", "pool256", "pool1024", "pool4096"]},
    # The 16-CPU headline, sized to fit a lease of 8 minutes on 16 CPUs:
    # static close with 256 children (a fixed pool) and as many
    # connections, Debian's prefork with and without
    # ListenCoresBucketsRatio 1, httpd 2.4.62's prefork with the upstream
    # patch, this MPM as shipped (no bucket directive) and with ratio 1 +
    # idle steering, tuned nginx; 6 pairs in shuffled order after a
    # warm-up.  run_16cpu.sh gives the generator CPUs of its own.
    "headline": {"cpus": 16, "pairs": 6, "seconds": 5, "warmup": 2,
                 "workers": 256, "start": 256, "connections": 256,
                 "buckets": "cpus", "idle_policies": ["default"],
                 "configs": ["stock", "stock-ratio1",
                             "stock-src-onelistener", "pfb-1",
                             "pfb-ratio1-idle", "nginx-tuned"],
                 "scenarios": ["static-close"]},
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
               "idle_policies": ["default", "poll"],
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
    # hetero with 48 clients, as the first default table measured it.
    "default": {"pairs": 6, "seconds": 8, "workers": 150, "start": 5,
                "idle_policies": ["default", "poll"],
                "min_spare": 5, "max_spare": 10, "connections": 32,
                "hetero_clients": 48,
                "configs": ["pfb-shipped", "pfb-1", "stock"],
                "scenarios": ["static-close", "hetero", "fourports", "php"]},
    # The rig (rig.py): the server and its receive softirq on CPU 0 in a
    # network namespace of its own, the generators on CPU 1; every
    # configuration an admin would compare; the closed-loop peak, then
    # fixed rates at 50 % and 80 % of the slowest configuration's peak;
    # then kernel events per connection (kevents.py) with 64 and 512
    # children.  Runs during which other processes took over 5 % of a CPU
    # are invalid; each run waits (up to quiet_wait s) for a quiet host,
    # and pairs go on (up to max_pairs) until 6 have every run valid.
    "rig": {"rig": True, "pairs": 6, "max_pairs": 12, "seconds": 5,
            "warmup": 1,
            "workers": 64, "connections": 32, "wrk_threads": 1,
            "buckets": 2, "quiet_wait": 120, "kevent_seconds": 2,
            "kevent_pools": [64, 512], "kevent_rate": 1000,
            "kevent_rounds": 2, "idle_policies": ["default", "poll"],
            "capacity_seconds": 2,
            "configs": ["stock", "stock-ratio1", "stock-src",
                        "stock-src-onelistener", "pfb-1", "pfb-N-idle",
                        "pfb-N-local", "event", "event-tuned", "nginx",
                        "nginx-tuned", "anchor-epoll", "anchor-blocking"],
            "scenarios": ["rate1000", "rate2500", "capacity"]},
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
# at NN % of stock event's static-close req/s, fixedNN at NN % of the
# slowest configuration's in the same run, rateN at N req/s (any N: the
# same absolute rate in every run), capacity steps the rate
# (capacity.py).
SCENARIOS = ["static-close", "static-keepalive", "keepalive100",
             "fourports", "hetero", "openloop", "rate", "bursts",
             "slowloris", "graceful", "kills", "open50", "open80", "php",
             "rps", "rps-half", "tls-keepalive", "tls-close", "pool64",
             "pool256", "pool1024", "pool4096", "fixed50", "fixed80",
             "rate1000", "rate2500", "capacity"]


# The floor configuration answers the static file's 100 bytes from a
# handler here.
FLOOR_PATH = "/floor"


# The package's configuration file, as a2enmod mpm_prefork_buckets puts
# it in place.
SHIPPED_CONF = os.path.join(TOP, "server", "mpm", "prefork",
                            "mpm_prefork_buckets.conf")


CONFIG_ORDER = ["pfb-shipped", "pfb-1", "pfb-1-nodefer", "pfb-single", "pfb-per-listen",
                "pfb-ratio1", "pfb-ratio1-idle", "pfb-N", "pfb-N-cpu",
                "pfb-N-cpu-away",
                "pfb-N-idle", "pfb-N-local", "pfb-floor", "pfb-1-before",
                "pfb-N-idle-before", "stock", "stock-ratio1", "stock-src",
                "stock-src-onelistener", "event", "event-tuned", "nginx",
                "nginx-tuned",
                "anchor-epoll", "anchor-blocking", "anchor-blocking-linger"]


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
        # The stall's control (stall.py): the same without httpd's
        # TCP_DEFER_ACCEPT on the listener.
        "pfb-1-nodefer": {"label": "this MPM, one bucket, AcceptFilter "
                          "http none (no TCP_DEFER_ACCEPT)", "kind": "apache",
                          "mpm": MPM_SO, "extra": "AcceptFilter http none\n"},
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
        "pfb-ratio1-idle": {"label": "this MPM, ListenCoresBucketsRatio 1, "
                            "steering idle", "kind": "apache",
                            "mpm": MPM_SO,
                            "extra": "ListenCoresBucketsRatio 1\n"
                                     "ListenBucketSteering idle\n"},
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
        "pfb-N-idle-before": {"label": "this MPM before the change "
                              "(--mpm-before), ListenBuckets %d, steering "
                              "idle" % n, "kind": "apache",
                              "mpm": args.mpm_before,
                              "extra": "ListenBuckets %d\nListenBucketSteering "
                                       "idle\n" % n},
        "stock": {"label": "stock prefork", "kind": "apache",
                  "mpm": STOCK_PREFORK, "extra": ""},
        "stock-ratio1": {"label": "stock prefork, ListenCoresBucketsRatio 1",
                         "kind": "apache", "mpm": STOCK_PREFORK,
                         "extra": "ListenCoresBucketsRatio 1\n"},
        # httpd 2.4.62's own prefork.c, built with apxs for this apache2,
        # as it is and with contrib/upstream's patch (make
        # upstream-modules): the fix for stock prefork, measured against
        # the same source without it.
        "stock-src": {"label": "httpd 2.4.62's prefork, built here",
                      "kind": "apache", "mpm": UPSTREAM_SO % "", "extra": "",
                      "needs": "make upstream-modules"},
        "stock-src-onelistener": {
            "label": "httpd 2.4.62's prefork with the one-listener patch",
            "kind": "apache", "mpm": UPSTREAM_SO % "-onelistener",
            "extra": "", "needs": "make upstream-modules"},
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
