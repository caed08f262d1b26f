# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A private apache2 for the monitoring and dashboard tests.

Each server gets its own ServerRoot, pid file, logs and a port the kernel
picked on 127.0.0.1; it runs in the foreground as our child in its own
session and is stopped on every path (SIGTERM, then SIGKILL to the group).
Kept apart from test/integration/harness.py so these tests can run against
any MPM (Debian's stock prefork too) with only the standard library.
"""

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

HTTPD = os.environ.get("HTTPD", "/usr/sbin/apache2")
MODULES = os.environ.get("HTTPD_MODULES_DIR", "/usr/lib/apache2/modules")
TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MPM_SO = os.environ.get("MPM_SO",
                        os.path.join(TOP, "build", "mod_mpm_prefork.so"))
STATUS_SO = os.environ.get("STATUS_SO",
                           os.path.join(TOP, "build", "mod_bucket_status.so"))
TEST_HANDLER_SO = os.environ.get(
    "TEST_HANDLER_SO", os.path.join(TOP, "build", "mod_pfb_test_handler.so"))
STOCK_PREFORK = os.path.join(MODULES, "mod_mpm_prefork.so")

CONF = """\
ServerRoot "{root}"
LoadModule mpm_prefork_module {mpm}
LoadModule authz_core_module {modules}/mod_authz_core.so
LoadModule mime_module {modules}/mod_mime.so
LoadModule dir_module {modules}/mod_dir.so
LoadModule status_module {modules}/mod_status.so
{load}
ServerName localhost
User www-data
Group www-data
Listen 127.0.0.1:{port}
PidFile "{root}/run/httpd.pid"
DefaultRuntimeDir "{root}/run"
ScoreBoardFile "{root}/run/scoreboard"
Mutex file:{root}/run default
ErrorLog "{root}/logs/error_log"
LogLevel info
TypesConfig /etc/mime.types
DocumentRoot "{root}/htdocs"
DirectoryIndex index.html
ExtendedStatus On
<Location /server-status>
    SetHandler server-status
</Location>
{extra}
"""

BUCKET_STATUS = """\
<Location /bucket-status>
    SetHandler bucket-status
</Location>
"""

# Start-up lines any server here may write at warn or worse.
ROUTINE_TAGS = {"AH00558"}


class StartupError(Exception):
    """apache2 refused to start or did not come up in time."""


def free_port():
    """A port the kernel considers free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout, interval=0.05):
    """Polls predicate until it returns a true value or timeout passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def http_get(url, timeout=10):
    """(status, body as text) of one GET; HTTP errors are statuses."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


class Server:
    """One apache2 instance; use as a context manager.

    mpm: the MPM .so (ours by default, or STOCK_PREFORK); status: load
    mod_bucket_status too; extra: configuration appended at the end."""

    def __init__(self, mpm=None, status=True, extra="", handler=False):
        self.mpm = mpm or MPM_SO
        load = []
        tail = [extra]
        if status:
            load.append("LoadModule bucket_status_module %s" % STATUS_SO)
            tail.insert(0, BUCKET_STATUS)
        if handler:
            load.append("LoadModule pfb_test_handler_module %s"
                        % TEST_HANDLER_SO)
        self.load = "\n".join(load)
        self.extra = "\n".join(tail)
        self.root = tempfile.mkdtemp(prefix="pfb-pkg-")
        os.chmod(self.root, 0o755)
        for sub in ("logs", "run", "htdocs"):
            os.mkdir(os.path.join(self.root, sub))
            os.chmod(os.path.join(self.root, sub), 0o755)
        with open(os.path.join(self.root, "htdocs", "index.html"), "w") as f:
            f.write("hello from prefork buckets\n")
        self.conf = os.path.join(self.root, "httpd.conf")
        self.proc = None
        self.port = None

    def start(self, timeout=30):
        for _ in range(5):
            self.port = free_port()
            with open(self.conf, "w") as f:
                f.write(CONF.format(root=self.root, mpm=self.mpm,
                                    modules=MODULES, load=self.load,
                                    port=self.port, extra=self.extra))
            self.proc = subprocess.Popen(
                [HTTPD, "-f", self.conf, "-DFOREGROUND"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True)
            if wait_for(self._up, timeout) and self.proc.poll() is None:
                return self
            output = ""
            if self.proc.poll() is not None:
                output = self.proc.stdout.read().decode(errors="replace")
            log = self.error_log()
            self.kill()
            if "AH00072" in log or "Address already in use" in log:
                continue            # lost a port race: pick another
            raise StartupError("apache2 did not come up:\n%s\n%s"
                               % (output, log))
        raise StartupError("no free port after 5 attempts")

    def _up(self):
        if self.proc.poll() is not None:
            return True             # exited: start() reports it
        if not os.path.exists(os.path.join(self.root, "run", "httpd.pid")):
            return False
        try:
            status, _ = http_get(self.url("/server-status?auto"), timeout=2)
        except OSError:
            return False
        return status == 200

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def get(self, path, timeout=10):
        return http_get(self.url(path), timeout)

    def kill(self):
        """Stops the server and everything in its process group."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def error_log(self):
        try:
            with open(os.path.join(self.root, "logs", "error_log")) as f:
                return f.read()
        except OSError:
            return ""

    def unexpected_log_lines(self, expected_tags=()):
        """warn/error/crit/alert/emerg lines whose tag is not expected."""
        return unexpected_lines(self.error_log(), expected_tags)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        if not os.environ.get("KEEP_TEST_ROOTS"):
            shutil.rmtree(self.root, ignore_errors=True)
        return False


def unexpected_lines(log, expected_tags=()):
    """Lines of an error log at warn or worse whose tag is not expected."""
    allowed = set(expected_tags) | ROUTINE_TAGS
    bad = []
    for line in log.splitlines():
        if not re.search(r"\[[a-z_0-9]+:(warn|error|crit|alert|emerg)\]",
                         line):
            continue
        if set(re.findall(r"\b(AH\d{5}|PFB\d{5})\b", line)) & allowed:
            continue
        bad.append(line)
    return bad


def exported_metric_names(exposition):
    """Metric names in a Prometheus text exposition: every sample's name
    and every # TYPE / # HELP line's."""
    names = set()
    for line in exposition.splitlines():
        m = re.match(r"#\s+(?:TYPE|HELP)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)", line)
        if m:
            names.add(m.group(1))
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{|\s)", line)
        if m:
            names.add(m.group(1))
    return names


def metric_families(exposition):
    """name -> type from the # TYPE lines of a text exposition."""
    families = {}
    for line in exposition.splitlines():
        m = re.match(r"#\s+TYPE\s+(\S+)\s+(\S+)", line)
        if m:
            families[m.group(1)] = m.group(2)
    return families


def report(name, results):
    """Prints the closing line and returns the exit status."""
    failed = sum(1 for ok in results.values() if not ok)
    passed = len(results) - failed
    print("%s: %d passed, %d failed" % (name, passed, failed))
    return 0 if failed == 0 and passed > 0 else 1
