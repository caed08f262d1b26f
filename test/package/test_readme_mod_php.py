#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A new admin follows README alone, on a machine where mod_php runs under
Debian's prefork:

  python3 test/package/test_readme_mod_php.py [DEB_DIR]  (default build/deb)

1. the machine as mod_php's installation leaves it: libapache2-mod-php
   installed (installed now where it is missing), mpm_prefork and php8.2
   enabled, no other MPM; Debian's prefork serves a PHP page;
2. README's "With mod_php" commands, as README writes them (read from
   README.md, so they cannot drift): this MPM serves the PHP page, with
   bucket data, a2query -M says prefork, php8.2 is still enabled;
3. README's recommended lines (its "Recommended settings" block) where
   README puts them on such a host, Debian's mpm_prefork.conf: configtest,
   the restart README asks for, the PHP page served with the buckets and
   steering the lines ask for (where the host allows them);
4. README's "Switching back" commands for mod_php, with those lines still
   in mpm_prefork.conf: the packages are gone, Debian's mod_mpm_prefork.so
   is back byte for byte, and Debian's prefork starts and serves the PHP
   page again.

The commands run with bash in the repository's top directory, where the
packages are (DEB_DIR must be build/deb, as README says).  What differs from
a real machine is only around them: `systemctl restart apache2` is
apache2ctl stop and start (a shim first on PATH; there is no systemd
here); apt-get answers its own questions yes (APT::Get::Assume-Yes, what
the admin types) and, as this test holds dpkg's frontend lock, takes none;
the server listens on a port the kernel picked on 127.0.0.1, with its logs
and pid file in a private directory; a policy-rc.d refuses the service
starts that maintainer scripts ask for.  /etc/apache2 and /var/lib/apache2
are copied first and restored exactly afterwards (checked), as
test_install.py does.  Ends with 'readme-mod-php: N passed, N failed'.
"""

import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))        # test/, for pfbtest
from pfbtest import TOP, free_port, wait_for  # noqa: E402
from pfbtest.tally import report  # noqa: E402
import test_install as machine  # noqa: E402

README = os.path.join(TOP, "README.md")
PREFORK_CONF = "/etc/apache2/mods-available/mpm_prefork.conf"
SHIM_DIR = os.path.join(machine.STATE, "bin")
APT_CONF = os.path.join(machine.STATE, "apt.conf")


def readme_blocks():
    """(install, switch back): README's sh blocks for mod_php."""
    text = open(README).read()
    section = re.search(r"^### With mod_php\n(.*?)^#", text, re.M | re.S)
    install = re.search(r"```sh\n(.*?)```", section.group(1), re.S)
    back = re.search(r"^## Switching back\n.*?With mod_php[^\n]*:\n+"
                     r"```sh\n(.*?)```", text, re.M | re.S)
    return (install.group(1) if install else None,
            back.group(1) if back else None)


def commands(block):
    """A block's commands: continuations joined, comments left out."""
    joined = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in joined.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def readme_recommended():
    text = open(README).read()
    section = re.search(r"^## Recommended settings\n(.*?)^## ", text,
                        re.M | re.S)
    block = re.search(r"```apache\n(.*?)```", section.group(1), re.S) \
        if section else None
    return block.group(1) if block else None


def place_recommended(port):
    """README's recommended lines at the end of Debian's mpm_prefork.conf,
    and the restart README's commands end with."""
    block = readme_recommended()
    if not machine.check("README has the recommended lines", block):
        return False
    with open(PREFORK_CONF, "a") as f:
        f.write("\n# README's recommended lines, as README says\n" + block)
    if not run_readme("apache2ctl configtest && systemctl restart apache2",
                      "README's lines in mpm_prefork.conf"):
        return False
    php_served(port, "this MPM with README's lines")
    several = len(os.sched_getaffinity(0)) > 1

    def info():
        status, body = machine.get(port, "/bucket-status?json")
        return json.loads(body) if status == 200 else {}

    # The programs are attached once the first children are up.
    wait_for(lambda: not several or info().get("steering") == "idle", 30,
             0.2)
    now = info()
    machine.check("README's lines in force: "
                  + ("buckets under idle steering" if several
                     else "idle steering asked for, one bucket (one CPU)"),
                  now.get("steering_wanted") == "idle"
                  and ((now.get("mode") == "reuseport"
                        and now.get("steering") == "idle") if several
                       else now.get("mode") == "single"), str(now)[:300])
    return True


def write_shims():
    os.makedirs(SHIM_DIR, exist_ok=True)
    shim = os.path.join(SHIM_DIR, "systemctl")
    with open(shim, "w") as f:
        f.write("#!/bin/sh\n"
                "# systemd's apache2.service, as apache2ctl does it\n"
                "[ \"$*\" = \"restart apache2\" ] || "
                "{ echo \"systemctl shim: $* not handled\" >&2; exit 1; }\n"
                "apache2ctl stop >/dev/null 2>&1\n"
                ". /etc/apache2/envvars\n"
                "i=0; while [ -s \"$APACHE_PID_FILE\" ] && "
                "kill -0 \"$(cat \"$APACHE_PID_FILE\")\" 2>/dev/null; do\n"
                "  i=$((i + 1)); [ $i -gt 150 ] && exit 1; sleep 0.2\n"
                "done\nexec apache2ctl start\n")
    os.chmod(shim, 0o755)
    with open(APT_CONF, "w") as f:
        f.write('APT::Get::Assume-Yes "true";\nDebug::NoLocking "true";\n'
                'Dpkg::Use-Pty "0";\n')


def run_readme(block, what):
    env = dict(os.environ, PATH=SHIM_DIR + ":" + os.environ["PATH"],
               APT_CONFIG=APT_CONF, DPKG_FRONTEND_LOCKED="1",
               DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
    for command in commands(block):
        print("$ %s" % command, flush=True)
        proc = subprocess.run(["bash", "-c", command], cwd=TOP,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              timeout=900, env=env)
        sys.stdout.write("".join("    " + line + "\n"
                                 for line in proc.stdout.splitlines()))
        if not machine.check("%s: %s" % (what, command),
                             proc.returncode == 0,
                             "exit %d" % proc.returncode):
            return False
    return True


def php_served(port, label):
    up = wait_for(lambda: machine.server_pid()
                  and not machine.port_refuses(port), 30)
    if not machine.check("%s: apache2 running" % label, up):
        return
    status, body = machine.get(port, "/pfb-php/answer.php")
    machine.check("%s: serves PHP" % label,
                  status == 200 and "php says 42" in body,
                  "status %d: %r" % (status, body[:200]))


def bucket_data(port):
    status, body = machine.get(port, "/bucket-status?json")
    if status != 200:
        return None
    return json.loads(body).get("available")


def prepare_mod_php(port):
    """The machine as installing libapache2-mod-php leaves it."""
    before = machine.installed_packages()
    if machine.PHP_PACKAGE not in before:
        rc, _ = machine.sh(machine.APT + ["install", "--no-install-recommends",
                                          machine.PHP_PACKAGE], timeout=900)
        machine.check("apt-get install %s" % machine.PHP_PACKAGE, rc == 0)
    added = sorted(machine.installed_packages() - before)
    with open(machine.INSTALLED_BY_TEST, "w") as f:
        f.write("\n".join(added) + "\n")
    php = machine.php_module()
    if not machine.check("mod_php's module is there", php):
        return None
    for mpm in machine.enabled_mpms():
        if mpm != "mpm_prefork":
            machine.sh(["a2dismod", "-q", "-f", mpm])
    machine.sh(["a2enmod", "-q", "mpm_prefork", php])
    machine.install_php_page()
    machine.check("mpm_prefork and %s enabled, no other MPM" % php,
                  machine.enabled_mpms() == ["mpm_prefork"]
                  and os.path.exists("/etc/apache2/mods-enabled/%s.load"
                                     % php), str(machine.enabled_mpms()))
    rc, _ = machine.sh(["apache2ctl", "start"], timeout=60)
    php_served(port, "Debian's prefork before")
    machine.check("no bucket data before", bucket_data(port) is None)
    machine.stop_server_hard()
    return php


def run(install, back):
    before = {top: machine.snapshot(top) for top in machine.TREES}
    machine.save_machine()
    try:
        machine.install_policy()
        port = free_port()
        machine.prepare_config(port)
        write_shims()
        print("  test port 127.0.0.1:%d" % port, flush=True)
        prefork_hash = machine.file_hash(machine.PREFORK_SO)
        php = prepare_mod_php(port)
        if php is None:
            return
        if not run_readme(install, "README, with mod_php"):
            return
        php_served(port, "this MPM")
        machine.check("this MPM serves it (bucket data available)",
                      bucket_data(port) is True)
        rc, out = machine.sh(["a2query", "-M"])
        machine.check("a2query -M says prefork", out.strip() == "prefork",
                      out.strip())
        machine.check("%s still enabled" % php, os.path.exists(
            "/etc/apache2/mods-enabled/%s.load" % php))
        machine.check("mod_mpm_prefork.so is this MPM",
                      os.path.realpath(machine.PREFORK_SO).endswith(
                          "mod_mpm_prefork_buckets.so"))
        if not place_recommended(port):
            return
        if not run_readme(back, "README, switching back with mod_php"):
            return
        with open(PREFORK_CONF) as f:
            machine.check("README's lines are still in mpm_prefork.conf",
                          "ListenBucketSteering" in f.read())
        for name in machine.PACKAGES + (machine.DIVERT,):
            machine.check("%s removed" % name,
                          machine.package_state(name) != "installed",
                          machine.package_state(name))
        machine.check("Debian's mod_mpm_prefork.so is back, byte for byte",
                      not machine.diversion_of(machine.PREFORK_SO)
                      and machine.file_hash(machine.PREFORK_SO)
                      == prefork_hash)
        php_served(port, "Debian's prefork after")
        machine.check("no bucket status after", bucket_data(port) is None)
    finally:
        machine.restore_machine()
        machine.check_restored(before)


def main(argv):
    if os.geteuid() != 0:
        print("this test installs packages and changes /etc/apache2: run it "
              "as root")
        print("readme-mod-php: 0 passed, 1 failed")
        return 1
    deb_dir = os.path.abspath(argv[0] if argv else
                              os.path.join(TOP, "build", "deb"))
    if deb_dir != os.path.join(TOP, "build", "deb"):
        print("README's commands install ./build/deb/*.deb: build them there")
        print("readme-mod-php: 0 passed, 1 failed")
        return 1
    missing = [n for n in machine.PACKAGES + (machine.DIVERT,)
               if not glob.glob(os.path.join(deb_dir, n + "_*.deb"))]
    install, back = readme_blocks()
    machine.check("README has the mod_php commands", install and back)
    if missing or not (install and back):
        print("missing: %s" % (missing or "README's blocks"))
        print("readme-mod-php: 0 passed, 1 failed")
        return 1
    with machine.exclusive("readme-mod-php") as ready:
        if not ready:
            return 1
        try:
            run(install, back)
        except machine.Interrupted as e:
            machine.check("finished", False, str(e))
    return report("readme-mod-php", machine.results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
