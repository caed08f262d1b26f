#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The packages' autopkgtest (debian/tests), run on this machine with
autopkgtest's null runner, as CI runs it:

  python3 test/package/test_autopkgtest.py [DEB_DIR]   (default build/deb)

runs `autopkgtest DEB_DIR/<the MPM and status .debs> DEB_DIR/src -- null`:
autopkgtest installs the two packages and their test dependencies into the
system and runs debian/tests/serve-and-switch-back, which enables this MPM
and the status module, serves, and switches back to the MPM that was
enabled.  The null runner installs on the host, so the machine is handled
as test_install.py handles it: /etc/apache2 and /var/lib/apache2 copied
first and restored exactly afterwards (checked), the packages purged, the
server kept on a port the kernel picked on 127.0.0.1 with its logs and pid
file in a private directory, and a policy-rc.d refusing the service starts
maintainer scripts ask for.  autopkgtest runs apt-get itself, so dpkg's
frontend lock is held only around the copy and around the restore.  Ends
with 'autopkgtest: N passed, N failed'.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))        # test/, for pfbtest
from pfbtest import TOP, free_port  # noqa: E402
from pfbtest.tally import report  # noqa: E402
import test_install as machine  # noqa: E402

SUMMARY = re.compile(r"^(\S+)\s+(PASS|FAIL|SKIP|FLAKY|NEUTRAL)\b(.*)$", re.M)


def run_autopkgtest(argv, timeout=1800):
    """Runs autopkgtest, its output shown as it comes; returns (rc,
    output).  Unlike test_install.sh(), apt-get takes dpkg's locks itself
    here."""
    print("$ %s" % " ".join(argv), flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
    env.pop("DPKG_FRONTEND_LOCKED", None)
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
    sys.stdout.write("".join("    " + line + "\n"
                             for line in proc.stdout.splitlines()))
    return proc.returncode, proc.stdout


def with_dpkg_lock(action):
    fd = machine.hold_dpkg_lock()
    if fd is None:
        machine.check("dpkg's frontend lock", False, "busy for 600 s")
        return False
    try:
        action()
    finally:
        os.close(fd)
    return True


def run(debs, src):
    before = {top: machine.snapshot(top) for top in machine.TREES}
    if not with_dpkg_lock(machine.save_machine):
        return
    try:
        machine.install_policy()
        port = free_port()
        machine.prepare_config(port)
        print("  test port 127.0.0.1:%d; MPM enabled here: %s"
              % (port, machine.enabled_mpms()), flush=True)
        rc, out = run_autopkgtest(["autopkgtest", "--no-built-binaries"]
                                  + debs + [src, "--", "null"])
        results = dict((m.group(1), m.group(2))
                       for m in SUMMARY.finditer(out))
        machine.check("autopkgtest ran serve-and-switch-back",
                      "serve-and-switch-back" in results,
                      "summary: %s" % results)
        machine.check("serve-and-switch-back passed",
                      results.get("serve-and-switch-back") == "PASS",
                      results.get("serve-and-switch-back", "not run"))
        machine.check("autopkgtest exit status 0", rc == 0, "exit %d" % rc)
        for name in machine.PACKAGES:
            machine.check("autopkgtest installed %s" % name,
                          machine.package_state(name) == "installed")
    finally:
        def restore():
            machine.restore_machine()
        with_dpkg_lock(restore)
        machine.check_restored(before)


def main(argv):
    if os.geteuid() != 0:
        print("autopkgtest's null runner installs packages and changes "
              "/etc/apache2: run it as root")
        print("autopkgtest: 0 passed, 1 failed")
        return 1
    if shutil.which("autopkgtest") is None:
        print("autopkgtest is missing: apt-get install autopkgtest")
        print("autopkgtest: 0 passed, 1 failed")
        return 1
    deb_dir = os.path.abspath(argv[0] if argv else
                              os.path.join(TOP, "build", "deb"))
    src = os.path.join(deb_dir, "src")
    debs = []
    for name in machine.PACKAGES:
        found = sorted(glob.glob(os.path.join(deb_dir, name + "_*.deb")))
        if not found:
            print("no %s_*.deb in %s: bash tools/build-deb.sh"
                  % (name, deb_dir))
            print("autopkgtest: 0 passed, 1 failed")
            return 1
        debs.append(found[-1])
    if not os.path.exists(os.path.join(src, "debian", "tests", "control")):
        print("no %s/debian/tests/control: bash tools/build-deb.sh" % src)
        print("autopkgtest: 0 passed, 1 failed")
        return 1
    with machine.exclusive("autopkgtest", hold_dpkg=False) as ready:
        if not ready:
            return 1
        try:
            run(debs, src)
        except machine.Interrupted as e:
            machine.check("finished", False, str(e))
    return report("autopkgtest", machine.results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
