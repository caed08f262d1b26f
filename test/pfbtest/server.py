# Licensed under the Apache License, Version 2.0; see LICENSE.
"""One httpd under test, as a context manager.

It runs this project's MPM by default, or any other MPM module (Debian's
stock prefork and event: config.STOCK_PREFORK, STOCK_EVENT), with the
test handler where it is built and whatever modules a test adds (the
status module: config.STATUS_LOAD and STATUS_LOCATION).  Every server gets its own ServerRoot, runtime dir, pid file and logs in a
temporary directory and ports the kernel picked on 127.0.0.1 (or ::1).  By
default it runs in the foreground as our child, in its own session; with
daemon=True it is started as admins start it, `httpd -k start` (or, with
daemon="apachectl", Debian's apachectl with its own APACHE_CONFDIR and
envvars), and detaches.  Either way it is stopped on every path (SIGTERM,
then SIGKILL to whatever is left of it).  On the way out it reads the
error log and fails the test on any line at level warn or above, any crash
and any sanitizer report, unless the test declared the line's tag in
expect_log.
"""

import contextlib
import datetime
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from . import config
from .config import APACHECTL, HTTPD, MODULES, RUN_USER
from .load import get_url, read_response
from .logs import unexpected_lines
from .procs import (STAT_PGRP, STAT_PPID, free_port, live_pids,
                    processes_with_argument, start_time)
from .waits import DEADLINE, wait_for

# Modules every server loads, where HTTPD_MODULES_DIR has them; a module
# compiled into HTTPD (Debian's mod_log_config and mod_unixd, say) is
# skipped by the <IfModule> guard around its LoadModule.
BASE_MODULES = (("authz_core_module", "mod_authz_core.so"),
                ("mime_module", "mod_mime.so"),
                ("dir_module", "mod_dir.so"),
                ("status_module", "mod_status.so"),
                ("log_config_module", "mod_log_config.so"),
                ("unixd_module", "mod_unixd.so"))

BASE_CONF = """\
ServerRoot "{root}"
{mpm_line}
{base_modules}
{extra_modules}
{test_handler}
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
CustomLog "{root}/logs/access_log" pidlog env=!pfb_probe
TypesConfig /etc/mime.types
DocumentRoot "{root}/htdocs"
DirectoryIndex index.html
KeepAlive On
KeepAliveTimeout 30
Timeout 30
<Location /server-status>
    SetHandler server-status
</Location>
<Location /pfb-scoreboard>
    SetHandler pfb-scoreboard
</Location>
{extra}
"""

# Start-up lines every server may write; anything else at warn or worse
# fails a test unless the test expects its tag.
ROUTINE_TAGS = frozenset()

# The MPM's notice that a start or restart is complete: logged after the
# parent has published the generation for the status module.
RESUMED = "PFB00017"

# Mode letters of the pfb-scoreboard handler (mod_status's): starting,
# and the states of a child that finished starting and serves.
STARTING = "S"
SERVING = frozenset("_RWKLDC")


def exit_on_sigterm():
    """Makes SIGTERM (and SIGINT, which a background job ignores) raise
    KeyboardInterrupt in the main thread, so that `with Server(...)` blocks
    stop their servers on the way out instead of leaving them to init
    (unittest ends the run on KeyboardInterrupt; SystemExit would only
    fail the test at hand)."""
    def leave(sig, frame):
        raise KeyboardInterrupt("signal %d" % sig)
    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGINT, leave)


class StartupError(Exception):
    """httpd refused to start or did not come up in time."""


class Daemon:
    """The parent of a server started with -k start.  It forked and
    detached (setsid), so it is not our child: it is watched through
    /proc, by the pid from its pid file and the start time that pid had,
    so that a pid the kernel gives to another process later is never
    taken for it.  Its exit status cannot be read; poll() and returncode
    say EXITED once it is gone."""

    EXITED = "exited (a daemon: its status is its reaper's)"

    def __init__(self, pid):
        self.pid = pid
        self.started = start_time(pid)
        self.returncode = None
        self.stdout = None

    def poll(self):
        if self.returncode is None:
            now = start_time(self.pid)
            if now is None or now != self.started:
                self.returncode = self.EXITED
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.time() + timeout
        while self.poll() is None:
            if deadline is not None and time.time() >= deadline:
                raise subprocess.TimeoutExpired("httpd daemon %d" % self.pid,
                                                timeout)
            time.sleep(0.05)
        return self.returncode


class Scoreboard:
    """One reading of the scoreboard (see mod_pfb_test_handler.c)."""

    def __init__(self, text):
        self.served_by = None
        self.limits = {}
        self.slots = []
        for line in text.splitlines():
            fields = line.split()
            if fields[:1] == ["served-by"]:
                self.served_by = int(fields[1])
            elif fields[:1] == ["limits"]:
                # The MPM's ap_mpm_query() answers: the values in force.
                self.limits = {k: int(v) for k, v in
                               zip(fields[1::2], fields[2::2])}
            elif fields[:1] == ["slot"]:
                entry = dict(zip(fields[0::2], fields[1::2]))
                self.slots.append({
                    "slot": int(entry["slot"]), "pid": int(entry["pid"]),
                    "generation": int(entry["generation"]),
                    "status": entry["status"],
                    "quiescing": int(entry["quiescing"]),
                    "bucket": int(entry["bucket"])})

    def serving(self, generation=None):
        """Slots of children that finished starting and are not leaving."""
        return [s for s in self.slots
                if s["pid"] > 0 and s["status"] in SERVING
                and not s["quiescing"]
                and (generation is None or s["generation"] >= generation)]

    def idle(self):
        """Slots waiting for a connection; the child writing this answer
        counts as idle, since it is about to be."""
        return [s for s in self.serving()
                if s["status"] == "_" or s["pid"] == self.served_by]

    def newest_generation(self):
        return max((s["generation"] for s in self.slots if s["pid"] > 0),
                   default=0)


class Server:
    """One httpd instance; use as a context manager.

    extra          configuration text appended to the base configuration
    ports          how many Listen ports (kernel-chosen, free)
    mpm            MPM module path (default MPM_SO; "static": built in)
    extra_modules  LoadModule lines placed before the configuration
    env            environment for httpd (LD_PRELOAD is appended to the
                   ASan runtime's, not replacing it)
    listen_host    127.0.0.1, or ::1 for IPv6
    expect_log     tags (PFB00035, AH00161 ...) of lines at warn or above,
                   or crash lines, that this test provokes; any other such
                   line fails the test when the server is left
    check_log      False: leave the verdict to the caller, who reads
                   unexpected_log_lines() (the load suite records them)
    daemon         False: httpd -DFOREGROUND as our child; True: httpd -k
                   start, as apachectl and systemd start it (it detaches);
                   "apachectl": Debian's apachectl start, with APACHE_CONFDIR
                   and an envvars file of this server's own
    """

    def __init__(self, extra="", ports=1, mpm=None, extra_modules="",
                 env=None, listen_host="127.0.0.1", expect_log=(),
                 check_log=True, daemon=False):
        self.daemon = daemon
        self.extra = extra
        self.nports = ports
        self.mpm = mpm or config.MPM_SO
        self.extra_modules = extra_modules
        self.expect_log = tuple(expect_log)
        self.check_log = check_log
        self.env = dict(os.environ)
        # make check-asan: the instrumented module needs the ASan runtime
        # first in the (uninstrumented) httpd's library list.
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
        self.resumed_before = 0     # RESUMED lines before the last start
        self.ports = []
        self.conf = os.path.join(self.root, "httpd.conf")
        self.startup_output = ""
        self.log_problems = []

    # -- configuration and life cycle ------------------------------------
    def expect(self, *tags):
        """Declares more expected log tags (see expect_log)."""
        self.expect_log += tags

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

    def _module_lines(self):
        lines = []
        for name, filename in BASE_MODULES:
            path = os.path.join(MODULES, filename)
            if os.path.exists(path):
                lines.append("<IfModule !%s>\n    LoadModule %s %s\n"
                             "</IfModule>" % (name, name, path))
        return "\n".join(lines)

    def write_conf(self, extra=None):
        if extra is not None:
            self.extra = extra
        host = self.listen_host
        if ":" in host:
            host = "[%s]" % host
        listen = "\n".join("Listen %s:%d" % (host, p) for p in self.ports)
        mpm_line = "" if self.mpm == "static" else \
            "LoadModule %s %s" % (self.mpm_module(), self.mpm)
        test_handler = ""
        if os.path.exists(config.TEST_HANDLER_SO):
            # After extra_modules, so a test that loads it itself wins.
            test_handler = ("<IfModule !pfb_test_handler_module>\n"
                            "    LoadModule pfb_test_handler_module %s\n"
                            "</IfModule>" % config.TEST_HANDLER_SO)
        with open(self.conf, "w") as f:
            f.write(BASE_CONF.format(root=self.root, mpm_line=mpm_line,
                                     base_modules=self._module_lines(),
                                     user=RUN_USER, listen=listen,
                                     extra=self.extra,
                                     loglevel=self.loglevel(),
                                     extra_modules=self.extra_modules,
                                     test_handler=test_handler))

    def start(self, expect_failure=False, timeout=DEADLINE):
        """Starts httpd and waits until it accepts on every port and has
        a child; with expect_failure, waits for it to exit and returns its
        status (its output is in startup_output)."""
        for attempt in range(5):
            self.ports = [free_port(self.listen_host)
                          for _ in range(self.nports)]
            self.probe_connections = 0
            self.resumed_before = self.log_count(RESUMED)
            self.write_conf()
            if self.daemon:
                rc = self._start_daemon(expect_failure, timeout)
                if expect_failure:
                    return rc
                up = rc == 0 and self._wait_up(timeout)
            else:
                self.proc = subprocess.Popen(
                    self.wrapper + [HTTPD, "-f", self.conf, "-DFOREGROUND"],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    start_new_session=True, env=self.env)
                if expect_failure:
                    return self._wait_failure(timeout)
                up = self._wait_up(timeout)
            if up:
                return 0
            log = self.error_log()
            self.kill()
            if "AH00072" in log or "Address already in use" in log or \
                    "AH00072" in self.startup_output:
                # Lost a port race: pick new ports, with a fresh log.
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.root, "logs", "error_log"))
                continue
            raise StartupError("httpd did not come up:\n%s\n%s" %
                               (self.startup_output, log))
        raise StartupError("no free ports after 5 attempts")

    def _wait_failure(self, timeout):
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise StartupError("server started, failure expected")
        self.startup_output = out.decode(errors="replace")
        return self.proc.returncode

    def launcher(self, action):
        """The command an admin types for `action` (start, stop, graceful
        ...), and its environment."""
        if self.daemon == "apachectl":
            # Debian's apachectl reads APACHE_CONFDIR/envvars and runs
            # APACHE_HTTPD -d APACHE_CONFDIR $APACHE_ARGUMENTS -k action.
            # APACHE_STARTED_BY_SYSTEMD keeps it from handing `start` to
            # systemctl, which would start the system's own apache2.
            env = dict(self.env, APACHE_CONFDIR=self.root,
                       APACHE_HTTPD=HTTPD, APACHE_STARTED_BY_SYSTEMD="1")
            env.pop("APACHE_ENVVARS", None)
            env.pop("APACHE_ARGUMENTS", None)
            return [APACHECTL, action], env
        return [HTTPD, "-f", self.conf, "-k", action], self.env

    def write_envvars(self):
        """The envvars file apachectl reads from APACHE_CONFDIR, as
        Debian's /etc/apache2/envvars is: the run user, and this server's
        own run, lock and log directories, so that apachectl touches
        nothing outside the ServerRoot."""
        lines = ["export APACHE_RUN_USER=%s" % RUN_USER,
                 "export APACHE_RUN_GROUP=%s" % RUN_USER,
                 "export APACHE_RUN_DIR=%s/run" % self.root,
                 "export APACHE_PID_FILE=%s/run/httpd.pid" % self.root,
                 "export APACHE_LOCK_DIR=%s/lock" % self.root,
                 "export APACHE_LOG_DIR=%s/logs" % self.root,
                 "export APACHE_ARGUMENTS='-f %s'" % self.conf,
                 "export LANG=C"]
        with open(os.path.join(self.root, "envvars"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def control(self, action, timeout=DEADLINE):
        """Runs the admin's command for `action` (httpd -k action, or
        apachectl action); returns (exit status, output)."""
        command, env = self.launcher(action)
        if self.daemon == "apachectl":
            self.write_envvars()
        # Its own session: whatever it leaves behind is found by the
        # configuration file it names (_leftover_pids), not by our group.
        result = subprocess.run(command, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, timeout=timeout)
        return result.returncode, result.stdout.decode(errors="replace")

    def _start_daemon(self, expect_failure, timeout):
        """httpd -k start: returns its exit status once it detached (or
        failed); the daemon is then watched through self.proc."""
        self.proc = None
        # A pid file left by a killed attempt would name another process.
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.root, "run", "httpd.pid"))
        try:
            rc, self.startup_output = self.control("start", timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise StartupError("`%s` did not return within %d s"
                               % (" ".join(self.launcher("start")[0]),
                                  timeout))
        if rc == 0:
            pid = self.wait_for(self.pid, timeout)
            if pid:
                self.proc = Daemon(pid)
        if expect_failure:
            if rc == 0:
                # It detached: a failure after that ends the daemon.
                if not self.wait_for(lambda: not self._leftover_pids(),
                                     timeout):
                    self.kill()
                    raise StartupError("server started, failure expected")
            return rc
        return rc if self.proc else 1
    def start_again(self, timeout=DEADLINE):
        """A stopped daemon started again with the same configuration and
        ports, as an admin's `apachectl start` after `apachectl stop`;
        returns the launcher's status, 0 once the server serves again."""
        rc = self._start_daemon(False, timeout)
        if rc == 0 and not self._wait_up(timeout):
            return 1
        return rc

    def _wait_up(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                if self.proc.stdout:
                    self.startup_output = self.proc.stdout.read().decode(
                        errors="replace")
                return False
            if self.pid() and all(self._can_connect(p) for p in self.ports):
                if len(self.children()) > 0 and self._resumed():
                    return True
            time.sleep(0.05)
        return False

    def announces_resuming(self):
        """Whether the MPM is this project's, which logs RESUMED once it
        has published what the status module reports; Debian's MPMs do
        not say it."""
        return self.mpm not in (config.STOCK_PREFORK, config.STOCK_EVENT)

    def _resumed(self):
        """A child can answer before the parent has published the
        generation it started: a start is complete once it is."""
        return not self.announces_resuming() or \
            self.log_count(RESUMED) > self.resumed_before

    def _can_connect(self, port):
        try:
            with socket.create_connection((self.listen_host, port), 5):
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
        """Sends the graceful-restart signal; see restart_gracefully()."""
        self.signal(signal.SIGUSR1)

    def restart_gracefully(self, timeout=DEADLINE):
        """A graceful restart that returns once a child of the new
        generation finished starting; returns that generation."""
        before = self.scoreboard().newest_generation()
        self.resumed_before = self.log_count(RESUMED)
        self.graceful()
        board = self.wait_for(
            lambda: self._resumed() and self._board_if(
                lambda b: b.serving(generation=before + 1)), timeout)
        if not board:
            # What the lead needs to tell a lost signal from a dead parent.
            state = "running" if self.proc.poll() is None else \
                "exited with %s" % self.proc.returncode
            raise AssertionError(
                "no child of generation %d within %d s (parent %s; %d "
                "restart line(s) logged); error log ends:\n%s"
                % (before + 1, timeout, state, self.log_count("PFB00019"),
                   "\n".join(self.error_log().splitlines()[-15:])))
        return before + 1

    def kill(self):
        """Stops the server as an admin would (SIGTERM to the parent, which
        stops its children), then SIGKILLs whatever is left of it: its
        process group, and for a daemon every process started from its
        configuration file (a daemon's children may outlive its group's
        leader)."""
        if self.proc is not None and self.proc.poll() is None:
            self._let_children_start()
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            # httpd gives children up to 10 s before SIGKILL, and logs
            # each step at warn.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=DEADLINE)
        if self.daemon:
            self._kill_leftovers()
            return
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        if self.proc.stdout:
            self.proc.stdout.close()

    def _leftover_pids(self):
        """Live processes of this server: httpd started with this
        server's own configuration file (children keep the parent's
        command line), found whether or not a pid file was written."""
        return processes_with_argument(self.conf)

    def _kill_leftovers(self):
        deadline = time.time() + 10
        while True:
            pids = self._leftover_pids()
            if not pids or time.time() >= deadline:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)

    def _let_children_start(self, timeout=10):
        """Waits (bounded) until the pool is settled: no child starting,
        and none started within the last maintenance interval, so that
        the parent is unlikely to be forking when the SIGTERM comes.  The
        MPM loses a SIGTERM that reaches a child between fork() and the
        child's own signal handlers (the parent's handler runs in the
        child and only sets a flag), so httpd SIGTERMs that child again
        3 s later and logs AH00045 at warn.  That race is the MPM's to fix
        (block the signals across fork); tests whose subject it is not
        should not trip over it on the way out."""
        def settled():
            board = self.scoreboard(timeout=5)
            if any(s["status"] == STARTING for s in board.slots):
                return False
            last = self._last_child_start()
            return last is None or \
                (datetime.datetime.now() - last).total_seconds() > 1.2
        with contextlib.suppress(OSError, AssertionError, ValueError):
            self.wait_for(settled, timeout)

    def _last_child_start(self):
        """When the parent last logged a child's start (PFB00009)."""
        last = None
        for line in self.error_log().splitlines():
            if "PFB00009" in line and line.startswith("["):
                with contextlib.suppress(ValueError):
                    last = datetime.datetime.strptime(
                        line[1:line.index("]")], "%a %b %d %H:%M:%S.%f %Y")
        return last

    def stop(self, timeout=DEADLINE):
        """`httpd -k stop` (apachectl stop for an apachectl server);
        returns the exit status of that command."""
        rc, _ = self.control("stop", timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=timeout)
        return rc

    def group_processes(self):
        """Pids still alive in the server's process group (for a daemon,
        every process started from its configuration file)."""
        if self.daemon:
            return self._leftover_pids()
        return live_pids(STAT_PGRP, self.proc.pid)

    def children(self):
        """Pids whose parent is the server's parent process, whether or
        not they finished starting (see ready_children)."""
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
        self.kill()
        problems = self.unexpected_log_lines()
        self.log_problems = problems        # for check_log=False callers
        self.cleanup()
        if problems and self.check_log:
            text = "\n".join(problems[:40])
            if exc_type is None:
                raise AssertionError(
                    "error log lines this test did not expect (declare "
                    "their tags with expect_log=...):\n%s" % text)
            # The test failed already: keep its error, show the log too.
            sys.stderr.write("\nerror log of the failed test:\n%s\n" % text)
        return False

    def kill_child(self, pid, sig=None, timeout=DEADLINE):
        """Kills a child and waits until it is gone.  Until it is, the
        kernel may still hand it a connection from the queue (a task woken
        by SIGKILL in accept() takes a queued connection before it sees
        the signal), which its death then resets: a test that connects
        right after a kill would see that race, not the MPM."""
        sig = signal.SIGKILL if sig is None else sig
        os.kill(pid, sig)
        if not self.wait_for(lambda: pid not in self.children(), timeout):
            raise AssertionError("child %d still alive %d s after signal %d"
                                 % (pid, timeout, sig))

    # -- children that finished starting ---------------------------------
    def scoreboard(self, timeout=30):
        """Reads the scoreboard through the test handler (one connection,
        counted in probe_connections, left out of the access log)."""
        with socket.create_connection((self.listen_host, self.ports[0]),
                                      timeout=timeout) as s:
            self.probe_connections += 1
            s.settimeout(timeout)
            s.sendall(b"GET /pfb-scoreboard HTTP/1.1\r\nHost: localhost\r\n"
                      b"Connection: close\r\n\r\n")
            status, body = read_response(s)
        if status != 200:
            raise AssertionError("GET /pfb-scoreboard: %d (is %s loaded?)"
                                 % (status, config.TEST_HANDLER_SO))
        return Scoreboard(body.decode())

    def _board_if(self, predicate):
        board = self.scoreboard()
        return board if predicate(board) else None

    def ready_children(self, generation=None):
        """Pids of live children that finished starting (SERVER_READY or
        busy since) and are not on their way out; with generation, only
        those of that generation or newer."""
        board = self.scoreboard()
        kids = set(self.children())
        return sorted(s["pid"] for s in board.serving(generation)
                      if s["pid"] in kids)

    def wait_ready(self, count, timeout=DEADLINE, generation=None,
                   idle=False):
        """Waits until at least `count` children finished starting (and,
        with idle, wait for a connection); returns their pids, or [] when
        the deadline passed."""
        def enough():
            board = self.scoreboard()
            kids = set(self.children())
            slots = board.idle() if idle else board.serving(generation)
            pids = sorted(s["pid"] for s in slots if s["pid"] in kids)
            return pids if len(pids) >= count else None
        return self.wait_for(enough, timeout) or []

    def wait_settled(self, timeout=DEADLINE):
        """Waits until no child is starting and every live child is in
        the scoreboard as finished starting; returns their pids."""
        def settled():
            board = self.scoreboard()
            kids = set(self.children())
            serving = {s["pid"] for s in board.serving()}
            starting = [s for s in board.slots if s["status"] == STARTING]
            return sorted(kids) if kids and kids <= serving and \
                not starting else None
        return self.wait_for(settled, timeout) or []

    def wait_exit(self, timeout=DEADLINE):
        """Waits for the parent to exit; returns whether it did."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=timeout)
        return self.proc.poll() is not None

    # -- logs ------------------------------------------------------------
    def error_log(self):
        try:
            with open(os.path.join(self.root, "logs", "error_log")) as f:
                return f.read()
        except OSError:
            return ""

    def log_count(self, needle):
        return self.error_log().count(needle)

    def wait_log(self, needle, count=1, timeout=DEADLINE):
        """Waits until the error log holds `needle` at least `count`
        times; returns whether it did."""
        return bool(self.wait_for(lambda: self.log_count(needle) >= count,
                                  timeout))

    def access_log_lines(self):
        try:
            with open(os.path.join(self.root, "logs", "access_log")) as f:
                return [l for l in f.read().splitlines() if l]
        except OSError:
            return []

    def wait_access_log(self, count, timeout=DEADLINE):
        """httpd logs a request after the client has the response: wait
        until the access log holds at least `count` lines."""
        return self.wait_for(lambda: len(self.access_log_lines()) >= count,
                             timeout)

    def unexpected_log_lines(self, expected_tags=()):
        """Error-log lines at warn or above, crash lines (AH00052 ...) and
        lines not in the error log's format (a sanitizer or libc writing
        to stderr), unless they carry an expected tag."""
        return unexpected_lines(
            self.error_log(),
            set(expected_tags) | set(self.expect_log) | ROUTINE_TAGS)

    def sanitizer_reports(self):
        """ASan/UBSan findings: children write them to stderr, which httpd
        points at the error log."""
        return [l for l in self.error_log().splitlines()
                if "AddressSanitizer" in l or "runtime error:" in l
                or "LeakSanitizer" in l]

    def child_buckets(self):
        """pid -> bucket from the MPM's debug lines (written by the parent
        at fork: the child may not have finished starting)."""
        result = {}
        for m in re.finditer(r"PFB00009: child pid (\d+) slot (\d+) "
                             r"bucket (\d+) generation (\d+) started",
                             self.error_log()):
            result[int(m.group(1))] = int(m.group(3))
        return result

    def live_buckets(self):
        """bucket -> live child pids (started or starting)."""
        kids = set(self.children())
        result = {}
        for pid, b in self.child_buckets().items():
            if pid in kids:
                result.setdefault(b, []).append(pid)
        return result

    wait_for = staticmethod(wait_for)

    def url(self, path="/", port_index=0):
        host = self.listen_host
        if ":" in host:
            host = "[%s]" % host
        return "http://%s:%d%s" % (host, self.ports[port_index], path)

    def get(self, path="/", port_index=0, timeout=10):
        """(status, body as text) of one GET as a client makes it (through
        urllib: counted in the access log, unlike the harness's probes)."""
        return get_url(self.url(path, port_index), timeout)
