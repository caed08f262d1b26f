#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""valgrind memcheck on the parent over start, graceful restart and stop,
with 4 buckets: fails on any "definitely lost" block allocated by this
project's code (a stack through mod_mpm_prefork.so).  Children are forked
copies and are not checked (--child-silent-after-fork)."""

import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "integration"))

from harness import Server  # noqa: E402


def main():
    with Server(extra="ListenBuckets 4\nStartServers 4\n") as srv:
        log = os.path.join(srv.root, "valgrind.log")
        srv.wrapper = ["valgrind", "--tool=memcheck", "--leak-check=full",
                       "--errors-for-leak-kinds=definite",
                       "--child-silent-after-fork=yes",
                       "--log-file=" + log]
        srv.start(timeout=120)
        time.sleep(2)
        srv.graceful()
        time.sleep(4)
        srv.signal(signal.SIGTERM)
        try:
            srv.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            print("valgrind: the server did not stop")
            return 1
        text = open(log).read()
        blocks = re.split(r"\n==\d+== \n", text)
        ours = [b for b in blocks if "definitely lost" in b
                and ("mod_mpm_prefork" in b or "prefork.c" in b
                     or "prefork_os.c" in b or "prefork_policy.c" in b)]
        summary = re.search(r"definitely lost: ([\d,]+) bytes in ([\d,]+) "
                            r"blocks", text)
        errors = re.search(r"ERROR SUMMARY: (\d+) errors", text)
        print("valgrind (parent): %s; definite leaks from this project: %d"
              % (summary.group(0) if summary else "no leak summary",
                 len(ours)))
        for b in ours:
            print(b)
        if not summary or not errors:
            print("valgrind: no summary in %s" % log)
            return 1
        return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
