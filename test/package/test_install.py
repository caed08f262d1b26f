#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Install test: the built .debs on this machine's own apache2, as root.

  python3 test/package/test_install.py [DEB_DIR]     (default build/deb)

Steps, as an admin would take them:
  1. apt-get install ./libapache2-mod-mpm-prefork-buckets_*.deb
     ./libapache2-mod-bucket-status_*.deb: installed, nothing enabled, no
     service started or restarted, nor by a reinstall (an upgrade's
     postinst); the manual's pages link only files their package ships,
     every alert's runbook_url opens the installed runbook at its
     section, and systemd-analyze reads apache2.service with the drop-in;
  2. a2enmod mpm_prefork_buckets is refused while Debian's MPM is enabled;
     a2dismod mpm_event && a2enmod mpm_prefork_buckets bucket_status;
  3. apache2ctl configtest; a reinstall of each set of the packages now
     asks to restart apache2, once;
  4. apache2ctl start on a test port: serves, with one listening socket per
     bucket, and /bucket-status?json answers;
  5. apache2ctl graceful under load: no request fails, same parent;
  6. apache2ctl stop; no unexpected warning in the error log;
  7. mod_php: apt-get install libapache2-mod-php (installed now, or found
     installed) and a2enmod php8.2, which enables Debian's mpm_prefork
     beside this MPM (php8.2.load: "# Depends: mpm_prefork"): configtest
     stops with one line saying what to do; doing it (a2dismod
     mpm_prefork_buckets, apt-get install the -divert package) makes
     mpm_prefork this MPM: configtest, start, a PHP page served, bucket
     data available; each set of the three packages upgraded together
     asks for one restart; then switching back (apt-get purge of the
     -divert package) puts Debian's mod_mpm_prefork.so back, byte for
     byte;
  8. apt-get purge while this MPM is enabled: the MPM enabled before it
     (mpm_prefork, which step 7 switched from) is enabled in its place
     (configtest passes, apache2 is asked to restart); no file of the
     packages left, no a2enmod state;
  9. Debian's own MPM can be enabled again (a2enmod, configtest).

CI runs on the developer's own machine, so everything is put back on every
path: /etc/apache2 and /var/lib/apache2 (a2enmod's state) are copied first
and restored exactly afterwards (checked), the server is stopped, the
packages purged.  Meanwhile /etc/apache2/envvars points the server's logs,
pid file and runtime dirs into a private directory, ports.conf listens on a
port the kernel picked on 127.0.0.1, and a policy-rc.d refuses (and
records) every service start the maintainer scripts ask for (one that
someone else put there is left alone; it refuses too).  A run that
was killed half-way is repaired by the next one from the copy it left in
/var/tmp/pfb-package-test.  A lock keeps two checkouts from running this at
once, and dpkg's frontend lock, held from the copy to the restore, makes
other package operations on the machine wait, so none of their changes to
/etc/apache2 is undone.  Packages the test installed (mod_php, where it
was missing) are purged again.  Ends with 'package-install: N passed, N
failed'.
"""

import contextlib
import fcntl
import glob
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))        # test/, for pfbtest
from pfbtest import (TOP, Load, free_port, get_url,  # noqa: E402
                     listen_sockets, unexpected_lines, wait_for)
from pfbtest.tally import report  # noqa: E402

PACKAGES = ("libapache2-mod-mpm-prefork-buckets",
            "libapache2-mod-bucket-status")
# Opt-in: makes Debian's module name mpm_prefork this MPM.
DIVERT = "libapache2-mod-mpm-prefork-buckets-divert"
PREFORK_SO = "/usr/lib/apache2/modules/mod_mpm_prefork.so"
PHP_PACKAGE = "libapache2-mod-php"
MODULES = ("mpm_prefork_buckets", "bucket_status")
TREES = ("/etc/apache2", "/var/lib/apache2")
STATE = "/var/tmp/pfb-package-test"
LOCK = "/run/lock/pfb-package-test.lock"
POLICY = "/usr/sbin/policy-rc.d"
DPKG_FRONTEND_LOCK = "/var/lib/dpkg/lock-frontend"
# This test holds dpkg's frontend lock itself (see hold_dpkg_lock), so its
# own apt-get takes none and tells dpkg so (DPKG_FRONTEND_LOCKED).
APT = ["apt-get", "-o", "Debug::NoLocking=1", "-o", "Dpkg::Use-Pty=0",
       "-y", "-q"]
SERVER_DIR = os.path.join(STATE, "server")
PID_FILE = os.path.join(SERVER_DIR, "run", "apache2.pid")
ERROR_LOG = os.path.join(SERVER_DIR, "log", "error.log")
INVOKE_LOG = os.path.join(STATE, "invoke-rc.d.log")
# Packages this run installed that were not there before (mod_php), for
# the restore to purge, also after a killed run.
INSTALLED_BY_TEST = os.path.join(STATE, "installed-packages")
# Debian's apache2.conf names no ServerName: httpd says so (AH00558), at
# alert, on every start.
DEBIAN_ROUTINE_TAGS = ("AH00558",)
PHP_DIR = os.path.join(STATE, "php")
# The MPM package's systemd drop-in, its helpers.
LIBEXEC = "/usr/libexec/libapache2-mod-mpm-prefork-buckets"
DROPIN = ("/lib/systemd/system/apache2.service.d/"
          "libapache2-mod-mpm-prefork-buckets.conf")
STOP_HELPER = LIBEXEC + "/apache2-stop"
PREVIOUS_MPM = LIBEXEC + "/previous-mpm"
# What make install writes outside /etc/apache2 (test_lifecycle.py).
MAKE_INSTALLED = ("/usr/lib/apache2/modules/mod_mpm_prefork_buckets.so",
                  "/usr/lib/apache2/modules/mod_bucket_status.so")
PHP_CONF = "/etc/apache2/conf-enabled/pfb-package-test-php.conf"

results = {}


class Interrupted(Exception):
    """SIGTERM or SIGHUP: leave through the finally blocks."""


def on_signal(signum, _frame):
    raise Interrupted("signal %d" % signum)


def check(label, ok, detail=""):
    results[label] = bool(ok)
    print("%s %s%s" % ("ok  " if ok else "FAIL", label,
                       (": " + detail) if detail and not ok else ""),
          flush=True)
    return bool(ok)


def sh(argv, timeout=300, quiet=False):
    """Runs a command, printing it and (unless quiet) its output; returns
    (rc, stdout+stderr)."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive",
               LC_ALL="C", DPKG_FRONTEND_LOCKED="1")
    if not quiet:
        print("$ %s" % " ".join(argv), flush=True)
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        print(out + "\n(timed out after %d s)" % timeout)
        return 124, out
    if not quiet:
        sys.stdout.write("".join("    " + line + "\n"
                                 for line in proc.stdout.splitlines()))
    return proc.returncode, proc.stdout


# -- the machine's configuration: copy, restore, compare ---------------------

def snapshot(top):
    """path -> (type, mode, uid, gid, content hash or link target)."""
    entries = {}
    if not os.path.lexists(top):
        return entries
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames + [""]:
            path = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                data = os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    data = hashlib.sha256(f.read()).hexdigest()
            else:
                data = ""
            entries[os.path.relpath(path, top)] = (
                stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                st.st_uid, st.st_gid, data)
    return entries


def backup_name(top):
    return os.path.join(STATE, "backup" + top.replace("/", "_"))


def restore_tree(top):
    """Puts the copy back in one rename, so the tree is never missing."""
    backup = backup_name(top)
    fresh, old = top + ".pfb-restore", top + ".pfb-old"
    for leftover in (fresh, old):
        shutil.rmtree(leftover, ignore_errors=True)
    subprocess.run(["cp", "-a", backup, fresh], check=True, timeout=120)
    if os.path.lexists(top):
        os.rename(top, old)
    os.rename(fresh, top)
    shutil.rmtree(old, ignore_errors=True)


# The policy-rc.d there was before the test (its content's hash, or
# None), for check_restored().
policy_before = None


def save_machine():
    global policy_before
    policy_before = file_hash(POLICY)
    os.makedirs(STATE, mode=0o700)
    for top in TREES:
        # Copied under a temporary name first: a half-made copy is never
        # taken for a backup.
        subprocess.run(["cp", "-a", top, backup_name(top) + ".tmp"],
                       check=True, timeout=120)
        os.rename(backup_name(top) + ".tmp", backup_name(top))
    # Written last: a run killed from here on is repaired by the next one.
    with open(os.path.join(STATE, "saved"), "w") as f:
        f.write("%d\n" % os.getpid())


def restore_machine():
    """Stops our server, purges the packages, puts everything back."""
    stop_server_hard()
    # The -divert package first: its removal puts Debian's file back.
    installed = [p for p in (DIVERT,) + PACKAGES
                 if package_state(p) != "not-installed"]
    with contextlib.suppress(OSError):
        with open(INSTALLED_BY_TEST) as f:
            installed += [p for p in f.read().split()
                          if package_state(p) != "not-installed"]
    if installed:
        sh(APT + ["purge"] + installed, timeout=900)
    # What a make install of the tests left, where no package owns it.
    for path in MAKE_INSTALLED:
        if os.path.exists(path) and sh(["dpkg", "-S", path],
                                       quiet=True)[0] != 0:
            os.unlink(path)
    for top in TREES:
        if os.path.isdir(backup_name(top)):
            restore_tree(top)
    restore_policy()


def hold_dpkg_lock(timeout=600):
    """Takes dpkg's frontend lock (the fcntl lock apt and dpkg take) for the
    life of this process, waiting as apt's DPkg::Lock::Timeout does.  Other
    users of the machine install packages too, and a package that changes
    /etc/apache2 between our copy and our restore would lose its changes,
    conffiles included; holding the lock makes them wait until the machine
    is back as it was.  Returns the descriptor, or None on time-out."""
    fd = os.open(DPKG_FRONTEND_LOCK, os.O_RDWR | os.O_CREAT, 0o640)
    deadline = time.monotonic() + timeout
    told = False
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            if not told:
                print("  waiting for %s (another package operation)"
                      % DPKG_FRONTEND_LOCK, flush=True)
                told = True
            time.sleep(1)   # apt's own wait for this lock polls the same way


def is_our_policy():
    with contextlib.suppress(OSError):
        with open(POLICY) as f:
            return "pfb package test" in f.read()
    return False


def install_policy():
    """Maintainer scripts may ask for service starts; refuse and record
    them, so no system apache2 is ever started here.  A policy-rc.d that
    someone else put there (a container image's, or tools/run.sh's around
    its apt-get) is moved aside into the test's state and asked by ours,
    which records every request and then gives the other one's answer; the
    restore puts it back as it was (also after a killed run).  Returns
    whether requests are recorded."""
    foreign = os.path.join(STATE, "policy-rc.d.foreign")
    if os.path.lexists(POLICY) and not is_our_policy():
        os.rename(POLICY, foreign)
    verdict = ('exec "%s" "$@"\n' % foreign) if os.path.lexists(foreign) \
        else "exit 101\n"
    with open(POLICY + ".pfb-new", "w") as f:
        f.write("#!/bin/sh\n# pfb package test: record, and refuse\n"
                "echo \"$*\" >> %s\n%s" % (INVOKE_LOG, verdict))
    os.chmod(POLICY + ".pfb-new", 0o755)
    os.rename(POLICY + ".pfb-new", POLICY)
    return True


def restore_policy():
    """Ours goes; one that was there before comes back as it was."""
    foreign = os.path.join(STATE, "policy-rc.d.foreign")
    if os.path.lexists(foreign):
        os.rename(foreign, POLICY)
    elif is_our_policy():
        os.unlink(POLICY)


def invoke_rc_calls():
    with contextlib.suppress(OSError):
        with open(INVOKE_LOG) as f:
            return [line for line in f.read().splitlines() if line]
    return []


# -- the packages and the server ---------------------------------------------

def package_state(name):
    rc, out = sh(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", name],
                 quiet=True)
    if rc != 0 or not out.startswith("ii"):
        return "not-installed" if rc != 0 or out.startswith("un") \
            else out.strip()
    return "installed"


def server_pid():
    with contextlib.suppress(OSError, ValueError):
        with open(PID_FILE) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        return pid
    return None


def stop_server_hard():
    """apache2ctl stop, then signals to the pid in our pid file."""
    pid = server_pid()
    if pid is None:
        return
    sh(["apache2ctl", "stop"], timeout=60)
    if wait_for(lambda: server_pid() is None, 30):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if wait_for(lambda: server_pid() is None, 10):
            return


def get(port, path, timeout=10):
    return get_url("http://127.0.0.1:%d%s" % (port, path), timeout)


def port_refuses(port):
    try:
        with socket.create_connection(("127.0.0.1", port), 1):
            return False
    except OSError:
        return True


# -- the steps ---------------------------------------------------------------

def prepare_config(port):
    """A private log/run dir and a test port; undone by the restore."""
    for sub in ("run", "lock", "log"):
        os.makedirs(os.path.join(SERVER_DIR, sub), exist_ok=True)
    os.chmod(STATE, 0o755)
    os.chmod(SERVER_DIR, 0o755)
    with open("/etc/apache2/envvars", "a") as f:
        f.write("\n# pfb package test (restored afterwards)\n"
                "export APACHE_RUN_DIR=%(d)s/run\n"
                "export APACHE_PID_FILE=%(d)s/run/apache2.pid\n"
                "export APACHE_LOCK_DIR=%(d)s/lock\n"
                "export APACHE_LOG_DIR=%(d)s/log\n" % {"d": SERVER_DIR})
    with open("/etc/apache2/ports.conf", "w") as f:
        f.write("# pfb package test (restored afterwards)\n"
                "Listen 127.0.0.1:%d\n" % port)


def load_file_deps(name):
    """The modules a .load file's '# Depends:' line names."""
    deps = []
    with contextlib.suppress(OSError):
        with open("/etc/apache2/mods-available/%s.load" % name) as f:
            for line in f:
                m = re.match(r"#\s*Depends:\s*(.*)", line)
                if m:
                    deps += m.group(1).split()
    return deps


def dependents_of(mpms):
    """Enabled modules that depend on one of Debian's MPMs by name, as
    libapache2-mod-php's php8.2.load does ('# Depends: mpm_prefork')."""
    names = [os.path.basename(p)[:-5] for p in
             glob.glob("/etc/apache2/mods-enabled/*.load")]
    return sorted(n for n in names if n not in mpms
                  and set(load_file_deps(n)) & set(mpms))


def enabled_mpms():
    return sorted(os.path.basename(p)[:-5] for p in
                  glob.glob("/etc/apache2/mods-enabled/mpm_*.load"))


def readme_debian(package):
    """Its README.Debian, compressed by dh_compress when over 4 kB."""
    path = "/usr/share/doc/%s/README.Debian" % package
    return path + ".gz" if os.path.exists(path + ".gz") else path


def step_install(debs, before):
    rc, out = sh(APT + ["install", "--no-install-recommends"] + debs,
                 timeout=900)
    check("apt_install", rc == 0, "exit %d" % rc)
    for name in PACKAGES:
        check("installed %s" % name, package_state(name) == "installed")
    expected = ["/usr/lib/apache2/modules/mod_mpm_prefork_buckets.so",
                "/usr/lib/apache2/modules/mod_bucket_status.so"]
    for module in MODULES:
        expected += ["/etc/apache2/mods-available/%s.%s" % (module, ext)
                     for ext in ("load", "conf")]
    expected += [readme_debian(p) for p in PACKAGES]
    # The documents README.Debian points at, uncompressed where the
    # manual's pages link them: the log catalogue, the manual, the
    # monitoring reference and the alerts' runbook.
    for package, doc in (
            (PACKAGES[0], "log-messages.md"),
            (PACKAGES[0], "manual/mod/prefork_buckets.md"),
            (PACKAGES[0], "manual/mod/prefork_buckets_common.md"),
            (PACKAGES[1], "manual/mod/mod_bucket_status.md"),
            (PACKAGES[1], "monitoring.md"),
            (PACKAGES[1], "runbook.html")):
        expected.append("/usr/share/doc/%s/%s" % (package, doc))
    expected += ["/usr/share/doc/libapache2-mod-bucket-status/examples/%s"
                 % f for f in ("prefork-buckets.json", "bucket-alerts.yml")]
    expected += [DROPIN, PREVIOUS_MPM, STOP_HELPER]
    missing = [p for p in expected if not os.path.exists(p)]
    check("installs the modules, .load/.conf, README.Debian, the manual, "
          "the log catalogue, the runbook and the systemd drop-in",
          not missing, "missing %s" % missing)
    check_manual_links()
    check_runbook_links()
    check_dropin()
    after = snapshot("/etc/apache2")
    changed = sorted(k for k in set(before) | set(after)
                     if k.startswith(("mods-enabled", "conf-enabled",
                                      "sites-enabled"))
                     and before.get(k) != after.get(k))
    check("installing enables nothing", not changed, "changed %s" % changed)
    installing = invoke_rc_calls()
    calls = upgrade(debs)
    if recording():
        check("installing starts or restarts no service", not installing,
              "invoke-rc.d asked for %s" % installing)
        check("an upgrade with the modules not enabled restarts nothing",
              not calls, "invoke-rc.d asked for %s" % calls)


def package_files(package):
    _, out = sh(["dpkg-query", "-L", package], quiet=True)
    return {line for line in out.splitlines() if line.startswith("/")}


def check_manual_links():
    """Every relative link of an installed manual page opens a file of the
    package that ships the page (not a .gz, not another package's)."""
    for package in PACKAGES:
        files = package_files(package)
        for page in sorted(f for f in files
                           if "/manual/" in f and f.endswith(".md")):
            with open(page, encoding="utf-8") as f:
                text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
            broken = []
            for m in re.finditer(r"\]\(([^)\s]+)\)", text):
                target = m.group(1).partition("#")[0]
                if not target or re.match(r"[a-z]+:", target):
                    continue
                full = os.path.normpath(os.path.join(os.path.dirname(page),
                                                     target))
                if full not in files:
                    broken.append(target)
            check("%s links only what %s ships" % (page, package),
                  not broken, "no %s in the package" % broken)


def check_runbook_links():
    """Every alert's runbook_url, as the installed rules file has it,
    names the installed runbook and an anchor it has."""
    import yaml
    doc = "/usr/share/doc/libapache2-mod-bucket-status/"
    with open(doc + "examples/bucket-alerts.yml") as f:
        rules = yaml.safe_load(f)
    with open(doc + "runbook.html", encoding="utf-8") as f:
        ids = set(re.findall(r'id="([^"]+)"', f.read()))
    bad = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            url = rule.get("annotations", {}).get("runbook_url")
            if "alert" not in rule:
                continue
            m = re.fullmatch(r"file://(/[^#]+)#(.+)", url or "")
            if not m or not os.path.exists(m.group(1)) \
                    or m.group(2) not in ids:
                bad.append((rule["alert"], url))
    check("every alert's runbook_url opens the installed runbook at its "
          "section", not bad, str(bad))


def check_dropin():
    """systemd reads apache2.service with the drop-in: its one ExecStop is
    the helper, given the main pid.  systemd-analyze reads the units
    without a running systemd (this machine's PID 1 may be another)."""
    if shutil.which("systemd-analyze") is None:
        print("  systemd-analyze is missing: the drop-in's syntax not "
              "checked here")
        return
    run = subprocess.run(["systemd-analyze", "verify", "apache2.service"],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, SYSTEMD_LOG_LEVEL="debug"))
    out = run.stdout + run.stderr
    stops = re.findall(r"-> ExecStop:\s*\n\s*Command Line: (.*)", out)
    # /lib is /usr/lib on a merged-/usr system: either spelling.
    dropins = [os.path.realpath(p) for p in
               re.findall(r"DropIn Path: (\S+)", out)]
    check("systemd reads apache2.service with the drop-in",
          os.path.realpath(DROPIN) in dropins
          and stops == ['%s "\\$MAINPID"' % STOP_HELPER]
          and "not executable" not in out,
          "drop-ins %s; ExecStop %s; %s" % (dropins, stops, out[-800:]))


def recording():
    """Whether our policy-rc.d records service requests in this run."""
    if is_our_policy():
        return True
    print("  another policy-rc.d is in place: service requests are refused "
          "but not recorded, so those checks are skipped")
    return False


def upgrade(debs):
    """Reinstalls the packages (their postinst runs as for an upgrade)
    and returns the service actions the maintainer scripts asked for."""
    seen = len(invoke_rc_calls())
    rc, _ = sh(APT + ["install", "--reinstall", "--no-install-recommends"]
               + debs, timeout=900)
    check("apt_reinstall", rc == 0, "exit %d" % rc)
    return invoke_rc_calls()[seen:]


def one_restart_per_upgrade(debs):
    """Every non-empty set of @a debs upgraded together asks apache2 for
    one restart, not one per package."""
    if not recording():
        return
    for n in range(1, len(debs) + 1):
        for subset in itertools.combinations(debs, n):
            calls = upgrade(list(subset))
            names = " ".join(os.path.basename(d).split("_")[0]
                             for d in subset)
            check("an upgrade of %s asks apache2 for one restart" % names,
                  len(calls) == 1
                  and re.match(r"apache2\b.*\brestart\b", calls[0]),
                  "invoke-rc.d asked for %s" % calls)


def step_switch(debs, debian_mpms, dependents):
    rc, out = sh(["a2enmod", "mpm_prefork_buckets"])
    check("a2enmod refuses mpm_prefork_buckets beside %s"
          % ",".join(debian_mpms),
          rc != 0 and "conflict" in out.lower(), "exit %d" % rc)
    if dependents:
        rc, _ = sh(["a2dismod"] + dependents)
        check("a2dismod %s (they depend on %s by name)"
              % (" ".join(dependents), " ".join(debian_mpms)), rc == 0)
    rc, _ = sh(["a2dismod"] + debian_mpms)
    ok = rc == 0
    if ok:
        rc, _ = sh(["a2enmod"] + list(MODULES))
        ok = rc == 0
    check("a2dismod %s && a2enmod %s" % (" ".join(debian_mpms),
                                         " ".join(MODULES)), ok)
    # Modules that ask for mpm_prefork by name (mod_php) stay disabled
    # here: README's way for them is the divert package (step 7, and
    # test_readme_mod_php.py); the restore enables them again.
    rc, out = sh(["a2query", "-M"])
    check("a2query -M says prefork", rc == 0 and out.strip() == "prefork",
          out.strip())
    rc, out = sh(["apache2ctl", "configtest"], timeout=60)
    check("apache2ctl configtest", rc == 0 and "Syntax OK" in out,
          "exit %d" % rc)
    rc, out = sh(["apache2ctl", "-M"], timeout=60)
    check("one MPM loaded, and the status module",
          rc == 0 and out.count("mpm_") == 1
          and "mpm_prefork_module" in out and "bucket_status_module" in out)
    one_restart_per_upgrade(debs)


def step_serve(port):
    rc, _ = sh(["apache2ctl", "start"], timeout=60)
    up = rc == 0 and wait_for(
        lambda: server_pid() and not port_refuses(port), 30)
    if not check("apache2ctl start", up, "exit %d" % rc):
        return None
    status, body = get(port, "/bucket-status?json")
    check("/bucket-status?json answers", status == 200, "status %d" % status)
    info = json.loads(body) if status == 200 else {}
    print("  mode %s (%s), %s bucket(s), %s usable CPU(s), steering %s"
          % (info.get("mode"), info.get("mode_reason"),
             info.get("bucket_count"), info.get("cpus", {}).get("usable"),
             info.get("steering")))
    check("bucket data available", info.get("available") is True)
    sockets = listen_sockets(port)
    buckets = info.get("bucket_count", 0)
    # As shipped: no bucket directive, httpd's one bucket.
    check("serves as shipped: one bucket, one listening socket",
          info.get("mode") == "single" and len(sockets) == 1
          and buckets == 1,
          "mode %s, %d socket(s), %d bucket(s)"
          % (info.get("mode"), len(sockets), buckets))
    status, body = get(port, "/")
    check("GET / serves Debian's page", status == 200, "status %d" % status)
    status, auto = get(port, "/server-status?auto")
    check("mod_status ?auto carries the bucket lines",
          status == 200 and "BucketDataAvailable: 1" in auto)
    return info


def step_graceful(port, info):
    parent = server_pid()
    generation = info.get("generation", 0)

    def newer():
        status, body = get(port, "/bucket-status?json")
        return status == 200 and \
            json.loads(body).get("generation", -1) > generation

    # Closed-loop GETs from four threads, every failure counted by kind.
    load = Load("127.0.0.1", port, concurrency=4, path="/").start()
    try:
        load.wait_served(20, timeout=15)
        rc, _ = sh(["apache2ctl", "graceful"], timeout=60)
        restarted = wait_for(newer, 30, interval=0.2)
        load.wait_served(20, timeout=15)
    finally:
        load.stop()
    check("apache2ctl graceful", rc == 0 and bool(restarted),
          "exit %d, generation still %d" % (rc, generation))
    check("graceful keeps serving: no request failed",
          load.ok > 40 and not load.failures(),
          "%d ok, failures %s" % (load.ok, load.errors))
    check("graceful keeps the parent", server_pid() == parent)
    print("  %d requests across the graceful restart, %d failed"
          % (load.ok, load.failures()))


def step_stop(port):
    pid = server_pid()
    rc, _ = sh(["apache2ctl", "stop"], timeout=60)
    gone = wait_for(
        lambda: server_pid() is None and port_refuses(port), 30)
    check("apache2ctl stop", rc == 0 and gone, "exit %d, pid %s" % (rc, pid))
    with contextlib.suppress(OSError):
        with open(ERROR_LOG) as f:
            log = f.read()
            bad = unexpected_lines(log, DEBIAN_ROUTINE_TAGS)
            check("no unexpected warning in the error log", not bad,
                  "\n".join(bad))


def installed_packages():
    _, out = sh(["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n"],
                quiet=True)
    return {line.split()[0] for line in out.splitlines()
            if len(line.split()) > 1 and line.split()[1].startswith("ii")}


def file_hash(path):
    with contextlib.suppress(OSError):
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    return None


def diversion_of(path):
    _, out = sh(["dpkg-divert", "--list", path], quiet=True)
    return out.strip()


def php_module():
    """The module libapache2-mod-php installs (php8.2 on Debian 12)."""
    found = sorted(os.path.basename(p)[:-5] for p in
                   glob.glob("/etc/apache2/mods-available/php*.load"))
    return found[-1] if found else None


def install_php_page():
    """A PHP page under Alias /pfb-php/, from a private directory (its
    conf-enabled file goes with the restore)."""
    os.makedirs(PHP_DIR, exist_ok=True)
    os.chmod(PHP_DIR, 0o755)
    with open(os.path.join(PHP_DIR, "answer.php"), "w") as f:
        f.write("<?php echo 'php says ', 6 * 7, \"\\n\";\n")
    os.chmod(os.path.join(PHP_DIR, "answer.php"), 0o644)
    with open(PHP_CONF, "w") as f:
        f.write("# pfb package test (restored afterwards)\n"
                "Alias /pfb-php/ %s/\n<Directory %s/>\n"
                "    Require all granted\n</Directory>\n"
                % (PHP_DIR, PHP_DIR))


def serve_php(port):
    install_php_page()
    rc, _ = sh(["apache2ctl", "start"], timeout=60)
    up = rc == 0 and wait_for(
        lambda: server_pid() and not port_refuses(port), 30)
    if not check("apache2ctl start with mod_php", up, "exit %d" % rc):
        return
    status, body = get(port, "/pfb-php/answer.php")
    check("serves a PHP page", status == 200 and "php says 42" in body,
          "status %d: %r" % (status, body[:200]))
    status, body = get(port, "/bucket-status?json")
    info = json.loads(body) if status == 200 else {}
    check("the MPM serving it is this one (bucket data available)",
          info.get("available") is True, body[:200])
    rc, _ = sh(["apache2ctl", "stop"], timeout=60)
    check("apache2ctl stop", rc == 0 and wait_for(
        lambda: server_pid() is None and port_refuses(port), 30))


def step_php(debs, divert_deb, port):
    """mod_php once this MPM is enabled, as an admin would do it."""
    prefork_hash = file_hash(PREFORK_SO)
    before = installed_packages()
    had_php = PHP_PACKAGE in before
    rc, _ = sh(APT + ["install", "--no-install-recommends", PHP_PACKAGE],
               timeout=900)
    added = sorted(installed_packages() - before)
    with open(INSTALLED_BY_TEST, "w") as f:
        f.write("\n".join(added) + "\n")
    check("apt-get install %s (%s)" % (PHP_PACKAGE, "was installed"
                                       if had_php else "installed now"),
          rc == 0, "exit %d" % rc)
    php = php_module()
    if not check("mod_php's module is there", php, "no php*.load"):
        return
    rc, out = sh(["a2enmod", php])
    check("a2enmod %s" % php, rc == 0, "exit %d" % rc)
    rc, out = sh(["apache2ctl", "configtest"], timeout=60)
    told = [line for line in out.splitlines()
            if "mpm_prefork_buckets and mpm_prefork are both enabled" in line]
    check("configtest stops and says in one line what to do",
          rc != 0 and len(told) == 1
          and "a2dismod mpm_prefork_buckets" in told[0]
          and DIVERT in told[0], out[-600:])
    # What the line says.
    rc1, _ = sh(["a2dismod", "mpm_prefork_buckets"])
    rc2, _ = sh(APT + ["install", "--no-install-recommends", divert_deb],
                timeout=900)
    check("a2dismod mpm_prefork_buckets; apt-get install %s" % DIVERT,
          rc1 == 0 and rc2 == 0, "exit %d, %d" % (rc1, rc2))
    check("mod_mpm_prefork.so is diverted to .distrib",
          ".distrib" in diversion_of(PREFORK_SO) and
          os.path.realpath(PREFORK_SO).endswith("mod_mpm_prefork_buckets.so"),
          diversion_of(PREFORK_SO))
    rc, out = sh(["a2query", "-M"])
    check("a2query -M says prefork", rc == 0 and out.strip() == "prefork",
          out.strip())
    rc, out = sh(["apache2ctl", "configtest"], timeout=60)
    check("configtest with mpm_prefork as this MPM",
          rc == 0 and "Syntax OK" in out, out[-600:])
    rc, out = sh(["apache2ctl", "-M"], timeout=60)
    check("one MPM and mod_php loaded", rc == 0
          and out.count("mpm_") == 1 and "php_module" in out, out[-600:])
    serve_php(port)
    # Any set of the three upgraded together: one restart.
    one_restart_per_upgrade(debs + [divert_deb])
    # Switching back.
    rc, _ = sh(APT + ["purge", DIVERT], timeout=900)
    check("apt-get purge %s" % DIVERT, rc == 0, "exit %d" % rc)
    check("Debian's mod_mpm_prefork.so is back, byte for byte",
          not diversion_of(PREFORK_SO)
          and file_hash(PREFORK_SO) == prefork_hash,
          diversion_of(PREFORK_SO))
    rc, out = sh(["apache2ctl", "configtest"], timeout=60)
    check("configtest with Debian's prefork again",
          rc == 0 and "Syntax OK" in out, out[-600:])
    # Back to this MPM alone, for the purge that follows.
    for argv in (["a2dismod", php], ["a2dismod", "mpm_prefork"],
                 ["a2enmod", "mpm_prefork_buckets"]):
        sh(argv)


def step_purge(debian_mpms):
    """Purges the packages while this MPM is the enabled one: Debian's
    mpm_prefork takes its place, and apache2 is asked to restart."""
    check("this MPM is the enabled one before the purge",
          enabled_mpms() == ["mpm_prefork_buckets"], str(enabled_mpms()))
    seen = len(invoke_rc_calls())
    files = []
    for name in PACKAGES:
        _, out = sh(["dpkg-query", "-L", name], quiet=True)
        files += [line for line in out.splitlines() if line.startswith("/")]
    rc, _ = sh(APT + ["purge"] + list(PACKAGES), timeout=900)
    check("apt_purge", rc == 0, "exit %d" % rc)
    for name in PACKAGES:
        check("purged %s" % name, package_state(name) == "not-installed",
              package_state(name))
    # Directories shared with apache2 stay; anything of ours must go.
    left = [f for f in files if os.path.lexists(f) and
            (not os.path.isdir(f) or any(p in f for p in PACKAGES))]
    for module in MODULES:
        left += glob.glob("/etc/apache2/mods-*/%s.*" % module)
        left += glob.glob("/var/lib/apache2/module/*/%s" % module)
    check("purge leaves no file of the packages", not left,
          "left %s" % left)
    # Step 7 switched from Debian's mpm_prefork to this MPM (a2dismod
    # mpm_prefork, recorded by a2dismod), so that one comes back;
    # test_lifecycle.py takes the path from mpm_event.
    check("removing the enabled MPM enables the one enabled before it "
          "(mpm_prefork here)",
          enabled_mpms() == ["mpm_prefork"], str(enabled_mpms()))
    rc, out = sh(["apache2ctl", "configtest"], timeout=60)
    check("configtest with Debian's mpm_prefork after the purge",
          rc == 0 and "Syntax OK" in out, out[-600:])
    calls = invoke_rc_calls()[seen:]
    if recording():
        check("the purge asks apache2 to restart into Debian's prefork",
              any(re.match(r"apache2\b.*\brestart\b", c) for c in calls),
              "invoke-rc.d asked for %s" % calls)
    if debian_mpms != ["mpm_prefork"]:
        sh(["a2dismod", "-q", "mpm_prefork"])
    rc, _ = sh(["a2enmod"] + debian_mpms)
    ok = rc == 0
    if ok:
        rc, out = sh(["apache2ctl", "configtest"], timeout=60)
        ok = rc == 0 and "Syntax OK" in out
    check("Debian's own MPM can be enabled again", ok)


def run(debs, divert_deb):
    before = {top: snapshot(top) for top in TREES}
    debian_mpms = enabled_mpms()
    dependents = dependents_of(debian_mpms)
    save_machine()
    try:
        install_policy()
        port = free_port()
        prepare_config(port)
        print("  test port 127.0.0.1:%d; Debian's MPM enabled here: %s; "
              "modules that depend on it by name: %s"
              % (port, debian_mpms, dependents or "none"))
        step_install(debs, before["/etc/apache2"])
        if not check("a Debian MPM is enabled to switch from",
                     debian_mpms and "mpm_prefork_buckets" not in debian_mpms,
                     str(debian_mpms)):
            return
        step_switch(debs, debian_mpms, dependents)
        info = step_serve(port)
        if info is not None:
            step_graceful(port, info)
            step_stop(port)
        step_php(debs, divert_deb, port)
        step_purge(debian_mpms)
    finally:
        restore_machine()
        check_restored(before)


def check_restored(before):
    """After restore_machine(): the trees as @a before (snapshots), no
    server of ours running; the saved copy goes."""
    for top in TREES:
        after = snapshot(top)
        diff = sorted(k for k in set(before[top]) | set(after)
                      if before[top].get(k) != after.get(k))
        check("%s restored exactly" % top, not diff,
              "differs: %s" % diff[:20])
    check("no system apache2 left running", server_pid() is None)
    check("%s as it was" % POLICY, file_hash(POLICY) == policy_before)
    shutil.rmtree(STATE, ignore_errors=True)


@contextlib.contextmanager
def exclusive(report, hold_dpkg=True):
    """The machine for one package test: the tests' lock (and, with
    @a hold_dpkg, dpkg's frontend lock for the whole test), a killed run's
    changes undone, none of the packages installed.  Yields whether the
    test may go on; when not, it has printed why, and the report line.
    SIGTERM and SIGHUP raise Interrupted from here on."""
    def refuse(why):
        print(why)
        print("%s: 0 passed, 1 failed" % report)
        return False

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    os.makedirs(os.path.dirname(LOCK), exist_ok=True)
    with open(LOCK, "w") as lock:
        print("  waiting for %s" % LOCK, flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
        fd = hold_dpkg_lock()
        if fd is None:
            yield refuse("dpkg's frontend lock stayed busy for 600 s")
            return
        if os.path.exists(os.path.join(STATE, "saved")):
            print("a previous run did not finish: restoring what it saved")
            restore_machine()
            shutil.rmtree(STATE, ignore_errors=True)
        elif os.path.exists(STATE):
            shutil.rmtree(STATE)    # killed before it changed anything
        if not hold_dpkg:
            os.close(fd)
        if glob.glob("/etc/apache2.pfb-*") or \
                glob.glob("/var/lib/apache2.pfb-*"):
            yield refuse("leftover /etc/apache2.pfb-* from a killed restore: "
                         "look at them and remove them")
        elif any(package_state(p) != "not-installed"
                 for p in PACKAGES + (DIVERT,)):
            yield refuse("%s already installed here: the test would remove "
                         "it; purge it first"
                         % " or ".join(PACKAGES + (DIVERT,)))
        else:
            yield True


def main(argv):
    if os.geteuid() != 0:
        print("the install test installs packages and changes /etc/apache2: "
              "run it as root")
        print("package-install: 0 passed, 1 failed")
        return 1
    deb_dir = os.path.abspath(argv[0] if argv else
                              os.path.join(TOP, "build", "deb"))
    debs = []
    for name in PACKAGES:
        found = sorted(glob.glob(os.path.join(deb_dir, name + "_*.deb")))
        if not found:
            print("no %s_*.deb in %s: bash tools/build-deb.sh" % (name,
                                                                   deb_dir))
            print("package-install: 0 passed, 1 failed")
            return 1
        debs.append(found[-1])
    divert = sorted(glob.glob(os.path.join(deb_dir, DIVERT + "_*.deb")))
    if not divert:
        print("no %s_*.deb in %s: bash tools/build-deb.sh" % (DIVERT, deb_dir))
        print("package-install: 0 passed, 1 failed")
        return 1
    with exclusive("package-install") as ready:
        if not ready:
            return 1
        try:
            run(debs, divert[-1])
        except Interrupted as e:
            check("finished", False, str(e))
    return report("package-install", results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
