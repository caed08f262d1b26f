#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""An admin's day with the packages, from Debian's event MPM and back:

  python3 test/package/test_lifecycle.py [DEB_DIR]   (default build/deb)

1. README's path without mod_php: apt-get install of the MPM and status
   packages, "a2dismod mpm_event; a2enmod mpm_prefork_buckets
   bucket_status" (whichever MPM is enabled here);
2. README's recommended lines (read from README.md), where README puts
   them: mpm_prefork_buckets.conf.  configtest, start: buckets and idle
   steering where the host allows them;
3. stopping as systemd's apache2.service stops with the package's
   drop-in: its ExecStop (the installed apache2-stop, given the parent's
   pid, in systemd's empty environment) returns once the parent has left,
   and every client queued behind MaxRequestWorkers is served; the control,
   Debian's unit without the drop-in (apachectl graceful-stop, then SIGTERM
   at once, as KillMode=mixed sends it), resets some of them;
4. apt-get purge of both packages with this MPM enabled: the MPM enabled
   before it (recorded by step 1's a2dismod) is enabled in its place, with
   one restart asked for, and it serves (mod_status says which MPM); the
   drop-in's helper is gone with the package;
5. make install, from this checkout, as README's "From source" says: the
   modules and the .load/.conf files; an edited .conf is kept (the new one
   beside it as .conf.dist); switched to this MPM, make uninstall leaves
   the edited .conf, disables bucket_status, enables the MPM enabled
   before, and configtest passes.

The machine is handled as test_install.py handles it (copies of
/etc/apache2 and /var/lib/apache2 restored exactly and checked, a private
log and pid directory, a port the kernel picked, a policy-rc.d that
records service requests; the files make install wrote removed).  There
is no systemd here to run the unit itself (see docs/differences.md): the
helper is what the drop-in runs, and test_install.py checks with
systemd-analyze that the unit reads it so.  Ends with 'lifecycle: N
passed, N failed'.
"""

import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))        # test/, for pfbtest
from pfbtest import (TOP, TEST_HANDLER_SO, free_port,  # noqa: E402
                     read_response, unexpected_lines, wait_for)
from pfbtest.tally import report  # noqa: E402
import test_install as machine  # noqa: E402

README = os.path.join(TOP, "README.md")
CONF = "/etc/apache2/mods-available/mpm_prefork_buckets.conf"
DRAIN_CONF = "/etc/apache2/conf-enabled/pfb-lifecycle-test.conf"
# Clients queued behind MaxRequestWorkers for the stop, and how long each
# request takes.
CLIENTS = 12
WORKERS = 4
SLEEP_MS = 2000
check = machine.check


def readme_recommended():
    text = open(README, encoding="utf-8").read()
    section = re.search(r"^## Recommended settings\n(.*?)^## ", text,
                        re.M | re.S)
    block = re.search(r"```apache\n(.*?)```", section.group(1), re.S) \
        if section else None
    return block.group(1) if block else None


def configtest(label):
    rc, out = machine.sh(["apache2ctl", "configtest"], timeout=60)
    return check("configtest: %s" % label, rc == 0 and "Syntax OK" in out,
                 out[-600:])


def start(port, label):
    rc, _ = machine.sh(["apache2ctl", "start"], timeout=60)
    return check("apache2ctl start: %s" % label, rc == 0 and wait_for(
        lambda: machine.server_pid()
        and not machine.port_refuses(port), 60), "exit %d" % rc)


def stopped(port):
    return machine.server_pid() is None and machine.port_refuses(port)


def status_json(port):
    status, body = machine.get(port, "/bucket-status?json")
    return json.loads(body) if status == 200 else {}


def step_readme_path(debs, debian_mpms, dependents):
    rc, _ = machine.sh(machine.APT + ["install", "--no-install-recommends"]
                       + debs, timeout=900)
    check("apt-get install of the MPM and status packages", rc == 0)
    if dependents:
        machine.sh(["a2dismod", "-q"] + dependents)
    rc1, _ = machine.sh(["a2dismod"] + debian_mpms)
    rc2, _ = machine.sh(["a2enmod", "mpm_prefork_buckets", "bucket_status"])
    check("README: a2dismod %s; a2enmod mpm_prefork_buckets bucket_status"
          % " ".join(debian_mpms), rc1 == 0 and rc2 == 0)


def step_recommended(port):
    block = readme_recommended()
    if not check("README has the recommended lines", block):
        return False
    with open(CONF, "a") as f:
        f.write("\n# README's recommended lines, as README says\n" + block)
    # The stop's clients wait behind MaxRequestWorkers for a child.
    with open(DRAIN_CONF, "w") as f:
        f.write("# pfb lifecycle test (restored afterwards)\n"
                "LoadModule pfb_test_handler_module %s\n"
                "<Location /pfb-sleep>\n    SetHandler pfb-test\n"
                "</Location>\n<IfModule mpm_prefork_module>\n"
                "    StartServers 2\n    MinSpareServers 2\n"
                "    MaxSpareServers 4\n    MaxRequestWorkers %d\n"
                "</IfModule>\n" % (TEST_HANDLER_SO, WORKERS))
    if not configtest("README's lines in mpm_prefork_buckets.conf"):
        return False
    if not start(port, "with README's lines"):
        return False
    several = len(os.sched_getaffinity(0)) > 1
    # The programs are attached once the first children are up: steering
    # reads hash until then.
    wait_for(lambda: not several
             or status_json(port).get("steering") == "idle", 30, 0.2)
    info = status_json(port)
    print("  mode %s (%s), %s bucket(s), steering %s (asked %s)"
          % (info.get("mode"), info.get("mode_reason"),
             info.get("bucket_count"), info.get("steering"),
             info.get("steering_wanted")))
    check("README's lines give buckets under idle steering"
          if several else "README's lines on one CPU give one bucket",
          info.get("steering_wanted") == "idle" and (
              (info.get("mode") == "reuseport"
               and info.get("steering") == "idle") if several
              else info.get("mode") == "single"), str(info)[:300])
    return True


class Queued:
    """CLIENTS connections, each asking for a SLEEP_MS request: WORKERS
    are served, the rest wait in the accept queues.  connected() counts
    the handshakes the kernel completed: a connection in a queue."""

    def __init__(self, port):
        self.port = port
        self.outcomes = []
        self.connections = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.one, daemon=True)
                        for _ in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def one(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port),
                                          timeout=60) as s:
                with self.lock:
                    self.connections += 1
                s.settimeout(120)
                s.sendall(("GET /pfb-sleep?sleep=%d HTTP/1.1\r\n"
                           "Host: localhost\r\nConnection: close\r\n\r\n"
                           % SLEEP_MS).encode())
                status, body = read_response(s)
            outcome = "ok" if status == 200 and b"served" in body \
                else "status %d" % status
        except (ConnectionError, socket.timeout, OSError) as e:
            outcome = type(e).__name__
        with self.lock:
            self.outcomes.append(outcome)

    def connected(self):
        with self.lock:
            return self.connections

    def join(self):
        for t in self.threads:
            t.join(180)
        return self.outcomes


def gone(pid):
    """The process has exited: no such pid, or a zombie its parent (the
    machine's PID 1, for a daemon) has not reaped yet."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def systemd_env():
    # systemd runs ExecStop with an environment of its own making.
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                    "/sbin:/bin", "LANG": "C"}


def step_stop_drains(port):
    """The drop-in's stop against Debian's unit's stop, under the same
    queue."""
    # The helper as the drop-in runs it.
    pid = machine.server_pid()
    clients = Queued(port)
    check("every client's connection is accepted by the kernel (most wait "
          "in a queue behind MaxRequestWorkers)",
          wait_for(lambda: clients.connected() == CLIENTS, 30, 0.05),
          "%d connected" % clients.connected())
    started = time.monotonic()
    run = subprocess.run([machine.STOP_HELPER, str(pid)], env=systemd_env(),
                         capture_output=True, text=True, timeout=300)
    took = time.monotonic() - started
    left = machine.server_pid()
    outcomes = clients.join()
    check("the drop-in's stop returns once the parent has left",
          run.returncode == 0 and left is None and gone(pid),
          "exit %d, parent %s: %s" % (run.returncode, left,
                                      (run.stdout + run.stderr)[-300:]))
    check("the drop-in's stop drains: every queued client served",
          outcomes.count("ok") == CLIENTS, str(outcomes))
    print("  drop-in stop: %.1f s, %s" % (took, outcomes))
    check("stopped", wait_for(lambda: stopped(port), 30))
    # The control: Debian's unit without the drop-in.
    if not start(port, "again, for the control"):
        return
    pid = machine.server_pid()
    clients = Queued(port)
    wait_for(lambda: clients.connected() == CLIENTS, 30, 0.05)
    subprocess.run(["apachectl", "graceful-stop"], env=systemd_env(),
                   capture_output=True, timeout=60)
    os.kill(pid, signal.SIGTERM)
    outcomes = clients.join()
    check("control: Debian's stop (SIGTERM after graceful-stop) fails "
          "some queued clients", outcomes.count("ok") < CLIENTS,
          str(outcomes))
    print("  Debian's stop: %s" % outcomes)
    check("stopped", wait_for(lambda: stopped(port), 30))


def step_purge(port, debian_mpms):
    seen = len(machine.invoke_rc_calls())
    rc, _ = machine.sh(machine.APT + ["purge"] + list(machine.PACKAGES),
                       timeout=900)
    check("apt-get purge of both packages with this MPM enabled", rc == 0)
    check("the MPM enabled before this one is enabled in its place (%s)"
          % " ".join(debian_mpms),
          machine.enabled_mpms() == debian_mpms, str(machine.enabled_mpms()))
    calls = machine.invoke_rc_calls()[seen:]
    if machine.recording():
        check("the purge asks apache2 for a restart into it",
              any(re.match(r"apache2\b.*\brestart\b", c) for c in calls),
              str(calls))
    check("the drop-in went with the package",
          not os.path.exists(machine.DROPIN)
          and not os.path.exists(machine.STOP_HELPER))
    # The test's own drain snippet loads a module of this checkout; the
    # bucket lines stay in no file (mpm_prefork_buckets.conf is purged).
    os.unlink(DRAIN_CONF)
    if not configtest("after the purge"):
        return
    if not start(port, "the MPM that came back"):
        return
    status, auto = machine.get(port, "/server-status?auto")
    mpm = re.search(r"^ServerMPM: (\S+)", auto, re.M)
    want = debian_mpms[0][len("mpm_"):]
    check("%s serves" % debian_mpms[0], status == 200 and mpm
          and mpm.group(1) == want, auto[:200])
    rc, _ = machine.sh(["apache2ctl", "stop"], timeout=60)
    check("stopped", rc == 0 and wait_for(lambda: stopped(port), 30))


def make(target):
    return machine.sh(["make", "-s", "-C", TOP, target], timeout=600)


def step_make_install(debian_mpms):
    rc, out = make("install")
    check("make install", rc == 0, out[-400:])
    for path in machine.MAKE_INSTALLED + (CONF,):
        check("make install wrote %s" % path, os.path.exists(path))
    with open(CONF, "a") as f:
        f.write("# edited by the admin\n")
    with open(CONF) as f:
        edited = f.read()
    rc, out = make("install")
    with open(CONF) as f:
        kept = f.read() == edited
    with open(os.path.join(TOP, "server", "mpm", "prefork",
                           "mpm_prefork_buckets.conf")) as f:
        shipped = f.read()
    dist = CONF + ".dist"
    check("make install again keeps the edited .conf, the new one beside "
          "it", rc == 0 and kept and os.path.exists(dist)
          and open(dist).read() == shipped and "kept your" in out, out)
    rc1, _ = machine.sh(["a2dismod"] + debian_mpms)
    rc2, _ = machine.sh(["a2enmod", "mpm_prefork_buckets", "bucket_status"])
    check("switched to this MPM from the source install",
          rc1 == 0 and rc2 == 0 and configtest("installed from source"))
    rc, out = make("uninstall")
    check("make uninstall", rc == 0, out[-400:])
    check("make uninstall enables the MPM enabled before (%s)"
          % " ".join(debian_mpms),
          machine.enabled_mpms() == debian_mpms, str(machine.enabled_mpms()))
    check("make uninstall disabled bucket_status",
          not glob.glob("/etc/apache2/mods-enabled/bucket_status.*"))
    check("make uninstall keeps the edited .conf and removes the rest",
          os.path.exists(CONF) and not os.path.exists(dist)
          and not any(os.path.exists(p) for p in machine.MAKE_INSTALLED)
          and not os.path.exists(
              "/etc/apache2/mods-available/mpm_prefork_buckets.load"),
          out)
    configtest("after make uninstall")


def run(debs):
    before = {top: machine.snapshot(top) for top in machine.TREES}
    debian_mpms = machine.enabled_mpms()
    dependents = machine.dependents_of(debian_mpms)
    machine.save_machine()
    try:
        machine.install_policy()
        port = free_port()
        machine.prepare_config(port)
        print("  test port 127.0.0.1:%d; MPM enabled here: %s"
              % (port, debian_mpms), flush=True)
        if not check("a Debian MPM is enabled to switch from",
                     debian_mpms and "mpm_prefork_buckets" not in
                     debian_mpms, str(debian_mpms)):
            return
        step_readme_path(debs, debian_mpms, dependents)
        if step_recommended(port):
            step_stop_drains(port)
        machine.stop_server_hard()
        with open(machine.ERROR_LOG) as f:
            # PFB00010: the stop's clients fill MaxRequestWorkers.
            bad = unexpected_lines(f.read(), machine.DEBIAN_ROUTINE_TAGS
                                   + ("PFB00010",))
        check("no unexpected warning in the error log", not bad,
              "\n".join(bad))
        step_purge(port, debian_mpms)
        step_make_install(debian_mpms)
    finally:
        if os.path.exists(DRAIN_CONF):
            os.unlink(DRAIN_CONF)
        machine.restore_machine()
        machine.check_restored(before)


def main(argv):
    if os.geteuid() != 0:
        print("this test installs packages and changes /etc/apache2: run it "
              "as root")
        print("lifecycle: 0 passed, 1 failed")
        return 1
    deb_dir = os.path.abspath(argv[0] if argv else
                              os.path.join(TOP, "build", "deb"))
    debs = []
    for name in machine.PACKAGES:
        found = sorted(glob.glob(os.path.join(deb_dir, name + "_*.deb")))
        if not found:
            print("no %s_*.deb in %s: bash tools/build-deb.sh"
                  % (name, deb_dir))
            print("lifecycle: 0 passed, 1 failed")
            return 1
        debs.append(found[-1])
    if not os.path.exists(TEST_HANDLER_SO):
        print("no %s: make test-modules" % TEST_HANDLER_SO)
        print("lifecycle: 0 passed, 1 failed")
        return 1
    with machine.exclusive("lifecycle") as ready:
        if not ready:
            return 1
        try:
            run(debs)
        except machine.Interrupted as e:
            check("finished", False, str(e))
    return report("lifecycle", machine.results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
