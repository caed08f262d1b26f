#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Runs a command while a CPU hog keeps every usable CPU busy: the tests'
proof that they wait for states rather than for time (make check-stress).

  python3 test/cpu_hog.py [--runs N] [--hogs N] -- COMMAND ...

One busy-looping process per usable CPU (or --hogs), at the tests' own
priority, for as long as the command runs.  With --runs N the command runs
N times in a row and the first failure stops it.  Prints each run's
verdict and duration and exits non-zero on a failure.  The hogs die with
this script on every path (and with PR_SET_PDEATHSIG if it is killed).
"""

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1


def start_hog():
    pid = os.fork()
    if pid == 0:
        try:
            libc = ctypes.CDLL(None)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            while True:
                pass
        finally:
            os._exit(0)
    return pid


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--hogs", type=int,
                        default=len(os.sched_getaffinity(0)))
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    print("cpu_hog: %d busy process(es) on %d CPU(s), kernel %s; running "
          "%d time(s): %s" % (args.hogs, len(os.sched_getaffinity(0)),
                              os.uname().release, args.runs,
                              " ".join(command)))
    sys.stdout.flush()
    hogs = [start_hog() for _ in range(args.hogs)]
    verdicts = []
    try:
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            rc = subprocess.call(command)
            minutes = (time.monotonic() - started) / 60
            verdicts.append((run, rc, minutes))
            print("cpu_hog: run %d of %d: %s in %.1f min"
                  % (run, args.runs, "pass" if rc == 0 else "FAIL (%d)" % rc,
                     minutes))
            sys.stdout.flush()
            if rc != 0:
                break
    finally:
        for pid in hogs:
            os.kill(pid, signal.SIGKILL)
        for pid in hogs:
            os.waitpid(pid, 0)
    passed = sum(1 for _, rc, _ in verdicts if rc == 0)
    print("check-stress: %d passed, %d failed"
          % (passed, len(verdicts) - passed))
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
