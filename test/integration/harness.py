# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Runs the real /usr/sbin/apache2 with the built MPM for integration tests.

Every server gets its own ServerRoot, runtime dir, pid file and logs in a
temporary directory and a port the kernel picked on 127.0.0.1.  It runs in
the foreground as our child, in its own session, and is stopped on every
path (SIGTERM, then SIGKILL to its process group).
"""

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

HTTPD = os.environ.get("HTTPD", "/usr/sbin/apache2")
MPM_SO = os.environ.get("MPM_SO", os.path.abspath("build/mod_mpm_prefork.so"))
MODULES = "/usr/lib/apache2/modules"
STOCK_PREFORK = os.path.join(MODULES, "mod_mpm_prefork.so")
STOCK_EVENT = os.path.join(MODULES, "mod_mpm_event.so")
RUN_USER = "www-data"

BASE_CONF = """\
ServerRoot "{root}"
LoadModule {mpm_module} {mpm}
LoadModule authz_core_module {modules}/mod_authz_core.so
LoadModule mime_module {modules}/mod_mime.so
LoadModule dir_module {modules}/mod_dir.so
LoadModule status_module {modules}/mod_status.so
{extra_modules}
ServerName localhost
User {user}
Group {user}
{listen}
PidFile "{root}/run/httpd.pid"
DefaultRuntimeDir "{root}/run"
ScoreBoardFile "{root}/run/scoreboard"
Mutex file:{root}/run default
ErrorLog "{root}/logs/error_log"
LogLevel {loglevel}
LogFormat "%h %P %>s %D \\"%r\\"" pidlog
CustomLog "{root}/logs/access_log" pidlog
TypesConfig /etc/mime.types
DocumentRoot "{root}/htdocs"
DirectoryIndex index.html
KeepAlive On
KeepAliveTimeout 30
Timeout 30
<Location /server-status>
    SetHandler server-status
</Location>
{extra}
"""

# Start-up lines every server writes; anything else at warn or worse
# fails a test unless the test expects its tag.
ROUTINE_TAGS = {"AH00558"}


class StartupError(Exception):
    """apache2 refused to start or did not come up in time."""


def free_port():
    """A port the kernel considers free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_user_ids():
    import pwd
    entry = pwd.getpwnam(RUN_USER)
    return entry.pw_uid, entry.pw_gid


class Server:
    """One apache2 instance; use as a context manager."""

    def __init__(self, extra="", ports=1, mpm=None, extra_modules="",
                 env=None, listen_host="127.0.0.1"):
        self.extra = extra
        self.nports = ports
        self.mpm = mpm or MPM_SO
        self.extra_modules = extra_modules
        self.env = dict(os.environ)
        # make check-asan: the instrumented module needs the ASan runtime
        # first in the (uninstrumented) apache2's library list.
        if os.environ.get("PFB_ASAN_PRELOAD"):
            self.env["LD_PRELOAD"] = os.environ["PFB_ASAN_PRELOAD"]
            self.env.setdefault("ASAN_OPTIONS",
                                "abort_on_error=1:detect_leaks=0")
            self.env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        if env:
            if "LD_PRELOAD" in env and "LD_PRELOAD" in self.env:
                env = dict(env)
                env["LD_PRELOAD"] = self.env["LD_PRELOAD"] + ":" + \
                    env["LD_PRELOAD"]
            self.env.update(env)
        self.listen_host = listen_host
        self.root = tempfile.mkdtemp(prefix="pfb-it-")
        os.chmod(self.root, 0o755)
        for sub in ("logs", "run", "htdocs"):
            os.mkdir(os.path.join(self.root, sub))
            os.chmod(os.path.join(self.root, sub), 0o755)
        with open(os.path.join(self.root, "htdocs", "index.html"), "w") as f:
            f.write("hello from prefork buckets\n")
        self.proc = None
        self.wrapper = []           # e.g. valgrind and its options
        self.probe_connections = 0
        self.ports = []
        self.conf = os.path.join(self.root, "httpd.conf")
        self.startup_output = ""

    # -- configuration and life cycle ------------------------------------
    def loglevel(self):
        """Our MPM's debug lines name each child's bucket; other MPMs
        have no module called mpm_prefork to set a level for."""
        if self.mpm_module() == "mpm_prefork_module":
            return "info mpm_prefork:debug"
        return "info"

    def mpm_module(self):
        """mod_mpm_event.so holds mpm_event_module; ours and Debian's
        prefork hold mpm_prefork_module."""
        return "mpm_event_module" if "event" in os.path.basename(self.mpm) \
            else "mpm_prefork_module"

    def write_conf(self, extra=None):
        if extra is not None:
            self.extra = extra
        host = self.listen_host
        if ":" in host:
            host = "[%s]" % host
        listen = "\n".join("Listen %s:%d" % (host, p) for p in self.ports)
        with open(self.conf, "w") as f:
            f.write(BASE_CONF.format(root=self.root, mpm=self.mpm,
                                     modules=MODULES, user=RUN_USER,
                                     listen=listen, extra=self.extra,
                                     mpm_module=self.mpm_module(),
                                     loglevel=self.loglevel(),
                                     extra_modules=self.extra_modules))

    def start(self, expect_failure=False, timeout=15):
        for attempt in range(5):
            self.ports = [free_port() for _ in range(self.nports)]
            self.probe_connections = 0
            self.write_conf()
            self.proc = subprocess.Popen(
                self.wrapper + [HTTPD, "-f", self.conf, "-DFOREGROUND"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True, env=self.env)
            if expect_failure:
                try:
                    out, _ = self.proc.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.kill()
                    raise StartupError("server started, failure expected")
                self.startup_output = out.decode(errors="replace")
                return self.proc.returncode
            if self._wait_up(timeout):
                return 0
            log = self.error_log()
            self.kill()
            if "AH00072" in log or "Address already in use" in log:
                continue            # lost a port race: pick new ports
            raise StartupError("apache2 did not come up:\n%s\n%s" %
                               (self.startup_output, log))
        raise StartupError("no free ports after 5 attempts")

    def _wait_up(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.startup_output = self.proc.stdout.read().decode(
                    errors="replace")
                return False
            if self.pid() and all(self._can_connect(p) for p in self.ports):
                if len(self.children()) > 0:
                    return True
            time.sleep(0.05)
        return False

    def _can_connect(self, port):
        try:
            with socket.create_connection((self.listen_host, port), 1):
                # Accepted by a child but never logged: tests that compare
                # accepted counts with the access log need the number.
                self.probe_connections += 1
                return True
        except OSError:
            return False

    def pid(self):
        try:
            with open(os.path.join(self.root, "run", "httpd.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def graceful(self):
        self.signal(signal.SIGUSR1)

    def kill(self):
        """Stops the server and everything in its process group."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        if self.proc.stdout:
            self.proc.stdout.close()

    def stop(self, timeout=15):
        """`apache2 -k stop`; returns the exit status of that command."""
        rc = subprocess.call([HTTPD, "-f", self.conf, "-k", "stop"],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=self.env)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=timeout)
        return rc

    def group_processes(self):
        """Pids still alive in the server's process group."""
        return live_pids(STAT_PGRP, self.proc.pid)

    def children(self):
        """Pids whose parent is the server's parent process."""
        if self.proc is None:
            return []
        return sorted(live_pids(STAT_PPID, self.proc.pid))

    def cleanup(self):
        self.kill()
        if os.environ.get("KEEP_TEST_ROOTS"):
            return
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        reports = self.sanitizer_reports()
        self.cleanup()
        if reports and exc_type is None:
            raise AssertionError("sanitizer reports in the error log:\n%s"
                                 % "\n".join(reports[:40]))
        return False

    def sanitizer_reports(self):
        """ASan/UBSan findings: children write them to stderr, which httpd
        points at the error log."""
        return [l for l in self.error_log().splitlines()
                if "AddressSanitizer" in l or "runtime error:" in l
                or "LeakSanitizer" in l]

    # -- logs ------------------------------------------------------------
    def error_log(self):
        try:
            with open(os.path.join(self.root, "logs", "error_log")) as f:
                return f.read()
        except OSError:
            return ""

    def access_log_lines(self):
        try:
            with open(os.path.join(self.root, "logs", "access_log")) as f:
                return [l for l in f.read().splitlines() if l]
        except OSError:
            return []

    def wait_access_log(self, count, timeout=5):
        """httpd logs a request after the client has the response: wait
        until the access log holds at least `count` lines."""
        return self.wait_for(lambda: len(self.access_log_lines()) >= count,
                             timeout)

    def unexpected_log_lines(self, expected_tags=()):
        """warn/error/crit/alert/emerg lines whose tag is not expected."""
        allowed = set(expected_tags) | ROUTINE_TAGS
        bad = []
        for line in self.error_log().splitlines():
            m = re.search(r"\[[a-z_0-9]+:(warn|error|crit|alert|emerg)\]",
                          line)
            if not m:
                continue
            tags = set(re.findall(r"\b(AH\d{5}|PFB\d{5})\b", line))
            if tags & allowed:
                continue
            bad.append(line)
        return bad

    def child_buckets(self):
        """pid -> bucket from the MPM's debug lines."""
        result = {}
        for m in re.finditer(r"PFB00009: child pid (\d+) slot (\d+) "
                             r"bucket (\d+) generation (\d+) started",
                             self.error_log()):
            result[int(m.group(1))] = int(m.group(3))
        return result

    def wait_for(self, predicate, timeout, interval=0.05):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(interval)
        return predicate()

    def url(self, path="/", port_index=0):
        return "http://%s:%d%s" % (self.listen_host, self.ports[port_index],
                                   path)


# Fields of /proc/PID/stat after the command name.
STAT_PPID = 1
STAT_PGRP = 2


def live_pids(field, value):
    """Pids of live (not zombie) processes whose /proc/PID/stat field
    (STAT_PPID, STAT_PGRP) equals value."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[field]) == value and fields[0] != "Z":
                pids.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def listen_sockets(port):
    """Listening TCP sockets on a port, from `ss -ltnH`."""
    out = subprocess.run(["ss", "-ltnH", "sport = :%d" % port],
                         capture_output=True, text=True, timeout=10).stdout
    return [l for l in out.splitlines() if l.strip()]


# ---------------------------------------------------------------------------
# A small load generator: closed loop, one thread per connection, counting
# every failure by kind.  Used where a test needs exact counts; the
# benchmarks use wrk and ab.

def http_get(host, port, path="/index.html", timeout=10, keepalive=False):
    """One HTTP/1.1 request on a new connection; returns (status, body)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        conn = "keep-alive" if keepalive else "close"
        s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\n"
                   "Connection: %s\r\n\r\n" % (path, conn)).encode())
        return read_response(s)


def read_response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before headers")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1])
    length = None
    for line in lines[1:]:
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    if length is not None:
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed in body")
            body += chunk
    return status, body


class Load:
    """Closed-loop load from `concurrency` threads until stop()."""

    def __init__(self, host, ports, concurrency=8, path="/index.html",
                 max_requests=None, timeout=10):
        self.host = host
        self.ports = ports if isinstance(ports, list) else [ports]
        self.concurrency = concurrency
        self.path = path
        self.timeout = timeout
        self.max_requests = max_requests
        self.lock = threading.Lock()
        self.ok = 0
        self.errors = {}
        self.latencies = []
        self.stopping = threading.Event()
        self.threads = []
        self.sent = 0

    def _note_error(self, kind):
        with self.lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def _worker(self, index):
        port_index = index
        while not self.stopping.is_set():
            with self.lock:
                if self.max_requests is not None and \
                        self.sent >= self.max_requests:
                    return
                self.sent += 1
            port = self.ports[port_index % len(self.ports)]
            port_index += 1
            started = time.monotonic()
            try:
                status, _ = http_get(self.host, port, self.path,
                                     timeout=self.timeout)
            except ConnectionResetError:
                self._note_error("reset")
                continue
            except socket.timeout:
                self._note_error("timeout")
                continue
            except ConnectionRefusedError:
                self._note_error("refused")
                continue
            except (ConnectionError, OSError) as e:
                self._note_error(type(e).__name__)
                continue
            elapsed = time.monotonic() - started
            if status != 200:
                self._note_error("status_%d" % status)
                continue
            with self.lock:
                self.ok += 1
                self.latencies.append(elapsed)

    def start(self):
        for i in range(self.concurrency):
            t = threading.Thread(target=self._worker, args=(i,), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def wait(self, timeout=120):
        deadline = time.time() + timeout
        for t in self.threads:
            t.join(max(0.1, deadline - time.time()))
        return self

    def stop(self):
        self.stopping.set()
        return self.wait(self.timeout + 5)

    def failures(self):
        return sum(self.errors.values())
