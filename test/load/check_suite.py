#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""CI smoke test of the load suite (not a performance gate): runs
`suite.py --quick` and checks that every configuration served every
scenario it can run, and that the report, the model report, the CSV and the
charts were written, and that no server with this project's MPM logged a
warning its scenario does not provoke by design (suite.py's
EXPECTED_LOG)."""

import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    out = os.path.join(HERE, "..", "..", "bench-results", "ci-quick")
    subprocess.run(["rm", "-rf", out], check=True)
    suite = subprocess.Popen([sys.executable, os.path.join(HERE, "suite.py"),
                              "--quick", "--out", out])
    try:
        rc = suite.wait(timeout=900)
    except subprocess.TimeoutExpired:
        # SIGTERM, which suite.py turns into SystemExit, so that it
        # leaves its `with Server` blocks and stops its servers; a SIGKILL
        # would orphan them.
        suite.send_signal(signal.SIGTERM)
        try:
            rc = suite.wait(timeout=120)
        except subprocess.TimeoutExpired:
            suite.kill()
            rc = suite.wait()
        print("bench smoke test: suite.py ran past 900 s")
    problems = []
    if rc != 0:
        problems.append("suite.py exited %d" % rc)
    try:
        with open(os.path.join(out, "results.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        doc = {"runs": []}
        problems.append("no results.json: %s" % e)
    ran = [r for r in doc["runs"] if "skipped" not in r]
    if len(ran) < 15:
        problems.append("only %d runs" % len(ran))
    for r in ran:
        if r.get("requests", 0) <= 0:
            problems.append("%s/%s served nothing" % (r["scenario"],
                                                      r["config"]))
        for line in r.get("log_problems", []):
            # Only this project's MPM is under test; what Debian's MPMs or
            # nginx log under the same faults is theirs (stock event logs
            # AH03092 on some graceful restarts), so it is shown, not
            # counted.
            if r["config"].startswith("pfb-"):
                problems.append("%s/%s logged: %s"
                                % (r["scenario"], r["config"], line))
            else:
                print("bench smoke test: (not ours) %s/%s logged: %s"
                      % (r["scenario"], r["config"], line))
    for name in ("report.md", "sim-report.md", "results.csv",
                 "throughput-static-close.png",
                 "latency-cdf-static-close.png"):
        if not os.path.exists(os.path.join(out, name)):
            problems.append("missing %s" % name)
    for p in problems:
        print("bench smoke test: %s" % p)
    print("bench smoke: %d passed, %d failed" % (len(ran),
                                                 len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
