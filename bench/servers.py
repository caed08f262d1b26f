# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The servers the load suite runs: httpd with this MPM, Debian's stock
prefork or event (the harness's Server, with each configuration's
settings), nginx as shipped or tuned, and the anchors
(bench/anchors/); each started fresh for one run under its cgroup and
--server-cpus, and stopped on every path.  Also the server side's
process counters and the URL a scenario loads."""

import math
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import netns
from pfbtest import (Server, STOCK_EVENT, MODULES, STATUS_SO,  # noqa: E402
                     STATUS_LOCATION, TEST_HANDLER_SO, STAT_PGRP, free_port, live_pids,
                     listen_sockets, read_response, Scoreboard)

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, ".."))
ANCHOR_DIR = os.path.join(TOP, "build", "anchors")
# The static scenarios' file: 100 bytes, as in the first 16-CPU table.
STATIC_PATH = "/static100.html"
STATIC_BODY = ("static file of one hundred bytes for the load suite "
               + "x" * 47 + "\n")
assert len(STATIC_BODY) == 100


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


class GroupServer:
    """What the servers that are not httpd share: a process group started
    in a session of its own (proc), its ports on listen_host."""

    def children(self):
        return [p for p in group_pids(self.proc.pid) if p != self.proc.pid]

    def url(self, path="/", port_index=0):
        return "http://%s:%d%s" % (self.listen_host, self.ports[port_index],
                                   path)

    def __enter__(self):
        return self


class NginxServer(GroupServer):
    """Debian's nginx, as shipped (Debian's nginx.conf: a worker per CPU,
    one shared listener, the combined access log, sendfile, gzip) or
    tuned (a reuseport socket and a CPU per worker, no access log, an open
    file cache)."""

    def __init__(self, cfg, plan, args, wrapper):
        self.nports = plan["ports"]
        self.args = args
        self.plan = plan
        self.listen_host = plan["host"]
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
        listens = "".join("        listen %s:%d%s%s;\n"
                          % (self.listen_host, p,
                             " reuseport" if self.tuned else "", ssl_opts)
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
        self.ports = [free_port(self.listen_host)
                      for _ in range(self.nports)]
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

    def graceful(self):
        os.kill(self.proc.pid, signal.SIGHUP)

    def access_log_lines(self):
        try:
            with open(os.path.join(self.root, "access.log")) as f:
                return f.read().splitlines()
        except OSError:
            return []

    def __exit__(self, *exc):
        stop_group(self.proc)
        self.log_problems = self.unexpected_log_lines()
        shutil.rmtree(self.root, ignore_errors=True)
        return False


class AnchorServer(GroupServer):
    """One of bench/anchors/ (built by make): the physical limit."""

    def __init__(self, cfg, plan, args, wrapper):
        self.cfg = cfg
        self.plan = plan
        self.args = args
        self.listen_host = plan["host"]
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
        return [self.binary, "%s:%d" % (self.listen_host, self.ports[0]),
                str(self.workers),
                str(self.plan["keepalive"]), self.extra_arg]

    def start(self):
        if not os.path.exists(self.binary):
            raise RuntimeError("missing %s: run make first" % self.binary)
        self.ports = [free_port(self.listen_host)]
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

    def wait_access_log(self, count, timeout=30):
        return None

    def access_log_lines(self):
        return []

    def __exit__(self, *exc):
        stop_group(self.proc)
        self.log_problems = []
        return False


def wait_connectable(srv, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection((srv.listen_host, srv.ports[0]),
                                          1):
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


def group_pids(pgid):
    return live_pids(STAT_PGRP, pgid)


def server_usage(pgid):
    """CPU seconds, context switches (voluntary: the task slept, waiting;
    involuntary: it was preempted, which on a shared machine is the
    neighbours' doing) and minor page faults of a server's process group:
    live processes, plus what reaped children left in the parent's
    counters (CPU and faults).  Switches are kept per process
    ("switches": {pid: (voluntary, involuntary)}), since no counter keeps
    those of reaped children: usage_delta() counts the processes alive at
    the end only."""
    ticks = os.sysconf("SC_CLK_TCK")
    usage = {"cpu": 0.0, "minflt": 0, "switches": {}}
    for pid in group_pids(pgid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / float(ticks)
            minflt = int(fields[7])
            if pid == pgid:
                cpu += (int(fields[13]) + int(fields[14])) / float(ticks)
                minflt += int(fields[8])
            # Every thread's switches: the event MPM and nginx are not
            # single-threaded like prefork.
            switches = [0, 0]
            for task in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/status" % (pid, task)) as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches"):
                            switches[0] += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches"):
                            switches[1] += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
        usage["cpu"] += cpu
        usage["minflt"] += minflt
        usage["switches"][pid] = tuple(switches)
    return usage


def usage_delta(before, after):
    """What a server did between two server_usage() readings: CPU and
    faults from the totals; switches of the processes alive at the end
    (from 0 for those born since).  A child that exited in between is
    left out rather than subtracted: its switches are lost with it (the
    rig's kernel-event counter has them all)."""
    voluntary = involuntary = 0
    for pid, (vol, invol) in after["switches"].items():
        vol0, invol0 = before["switches"].get(pid, (0, 0))
        voluntary += vol - vol0
        involuntary += invol - invol0
    return {"cpu": after["cpu"] - before["cpu"],
            "minflt": after["minflt"] - before["minflt"],
            "voluntary": voluntary, "nonvoluntary": involuntary}


def target(srv, cfg, scene, port_index=0, path=None):
    """The URL a scenario loads: the configuration's path (the floor's
    handler, else the static file), over TLS in the tls scenarios."""
    url = srv.url(path or cfg.get("path", STATIC_PATH), port_index)
    return url.replace("http://", "https://", 1) if scene.get("tls") else url


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
