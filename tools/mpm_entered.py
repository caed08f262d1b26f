#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Which of the MPM's source files the parent enters in its maintenance
cycles and in a graceful restart, counted under gdb.

usage: mpm_entered.py [--mpm SO] [--window SECONDS] [--functions]

Starts apache2 (test/pfbtest's harness: a free loopback port, the
project's test configuration) with the MPM built with -g (make's default
CFLAGS), attaches gdb to the parent and puts a counting breakpoint, which
never stops, on every function of every file under server/mpm/prefork/
that the module's debug information names.  Then:

  cycles    the parent runs idle for --window seconds (one maintenance
            cycle a second): the files whose functions it entered;
  graceful  SIGUSR1, and the count runs until the new generation's
            children serve: the files entered by the restart (the module
            is unloaded and loaded again, and gdb sets the breakpoints
            again in the new copy).

With --functions, each file's entered functions follow it, with their
calls.

A function the compiler inlined into its caller counts as its caller's
file; a call from another file is never inlined (no LTO), so a file
counts as entered whenever another file called into it.  Needs root (to
attach) and gdb.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "test"))

# Runs inside gdb: a breakpoint per function of the MPM's files, each
# counting for its file and never stopping.
GDB_SCRIPT = r'''
import collections
import os
import re
import gdb

hits = collections.Counter()
# gdb's own output to a pipe is buffered: the markers go to a file.
out = open(os.environ["ENTERED_OUT"], "a", buffering=1)

class Counter(gdb.Breakpoint):
    def __init__(self, spec):
        super().__init__(spec, internal=True)
        self.spec = spec

    def stop(self):
        hits[self.spec] += 1
        return False

def setup():
    text = gdb.execute("info functions -n .", to_string=True)
    current, made = None, 0
    for line in text.splitlines():
        m = re.match(r"File (.*server/mpm/prefork/.*\.c):$", line)
        if m:
            current = m.group(1)
            continue
        if not line.strip():
            current = None
            continue
        f = re.match(r"\d+:\s.*?\b(\w+)\(", line)
        if current and f:
            Counter("%s:%s" % (current.split("server/mpm/prefork/")[1],
                               f.group(1)))
            made += 1
    out.write("ENTERED-SETUP %d\n" % made)

def report(phase):
    for spec in sorted(hits):
        out.write("ENTERED %s %s %d\n" % (phase, spec, hits[spec]))
    out.write("ENTERED-END %s\n" % phase)
    hits.clear()
'''

# gdb's commands, each given with -ex.  SIGURG (which the parent ignores)
# ends each count: gdb stops the parent on it ("stop print": "noprint"
# would mean "nostop") and keeps it from the parent.
GDB_COMMANDS = (
    "set pagination off",
    "set confirm off",
    "set breakpoint pending on",
    "handle SIGUSR1 nostop noprint pass",
    "handle SIGCHLD nostop noprint pass",
    "handle SIGHUP nostop noprint pass",
    "handle SIGTERM nostop noprint pass",
    "handle SIGPIPE nostop noprint pass",
    "handle SIGALRM nostop noprint pass",
    "handle SIGURG stop print nopass",
    "source {script}",
    "python setup()",
    "continue",
    'python report("cycles")',
    "continue",
    'python report("graceful")',
    "detach",
)


def wait_line(path, prefix, timeout, gdb):
    """Waits until the counting script's file has a line starting with
    @prefix; returns its lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path) as f:
            lines = f.read().splitlines()
        if any(line.startswith(prefix) for line in lines):
            return lines
        if gdb.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError("gdb wrote no %r within %d s (gdb %s)"
                       % (prefix, timeout, "exited" if gdb.poll() is not None
                          else "running"))


def entered(lines, phase):
    """{file: {function: calls}} of one phase's report."""
    out = {}
    for line in lines:
        m = re.match(r"ENTERED %s (\S+):(\w+) (\d+)$" % phase, line)
        if m:
            out.setdefault(m.group(1), {})[m.group(2)] = int(m.group(3))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mpm", help="the MPM module (default: build's)")
    ap.add_argument("--window", type=float, default=2.5,
                    help="seconds of idle cycles counted (default 2.5)")
    ap.add_argument("--functions", action="store_true",
                    help="list each file's entered functions")
    args = ap.parse_args()
    if args.mpm:
        os.environ["MPM_SO"] = os.path.abspath(args.mpm)
    os.environ.setdefault("MPM_SO", os.path.join(TOP, "build",
                                                 "mod_mpm_prefork.so"))
    from pfbtest import server as pfbserver

    # A SIGTERM (timeout(1), a Ctrl-C) stops the server on the way out.
    pfbserver.exit_on_sigterm()
    with pfbserver.Server() as srv, tempfile.TemporaryDirectory() as tmp:
        srv.start()
        script = os.path.join(tmp, "count.py")
        with open(script, "w") as f:
            f.write(GDB_SCRIPT)
        marks = os.path.join(tmp, "entered")
        open(marks, "w").close()
        gdb = subprocess.Popen(
            ["gdb", "-q", "-nx", "-batch"]
            + [arg for c in GDB_COMMANDS
               for arg in ("-ex", c.format(script=script))]
            + ["-p", str(srv.pid())], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=dict(os.environ,
                                                ENTERED_OUT=marks))
        try:
            wait_line(marks, "ENTERED-SETUP", 300, gdb)
            time.sleep(args.window)
            os.kill(srv.pid(), signal.SIGURG)
            wait_line(marks, "ENTERED-END cycles", 120, gdb)
            # gdb continues the parent after the report: the restart.
            generation = srv.restart_gracefully(timeout=300)
            os.kill(srv.pid(), signal.SIGURG)
            lines = wait_line(marks, "ENTERED-END graceful", 120, gdb)
            gdb.wait(timeout=120)
        finally:
            if gdb.poll() is None:
                gdb.kill()
        for phase, what in (("cycles", "%.1f s of idle maintenance cycles"
                             % args.window),
                            ("graceful", "a graceful restart (to generation "
                             "%d)" % generation)):
            files = entered(lines, phase)
            print("%s: %d file(s) entered" % (what, len(files)))
            for path, calls in sorted(files.items()):
                print("    %-40s %d call(s)" % (path, sum(calls.values())))
                for name, n in sorted(calls.items()) if args.functions \
                        else ():
                    print("        %-36s %d" % (name, n))
        made = [l for l in lines if l.startswith("ENTERED-SETUP")]
        print("(%s counting breakpoints)" % made[0].split()[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
