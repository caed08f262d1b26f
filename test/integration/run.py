#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Runs the integration tests (test_*.py here) against the real apache2.

  python3 test/integration/run.py               # every test
  python3 test/integration/run.py test_buckets  # one module
  python3 test/integration/run.py -k graceful   # names matching a pattern
  python3 test/integration/run.py --allow-skips  # a skip is not a failure

Ends with a line 'integration: N passed, N failed, N skipped' and exits
non-zero when anything failed, or when anything was skipped without
--allow-skips (a skipped test checked nothing; make check must run all).
The servers come from the environment: see test/pfbtest/config.py.
"""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
# test/, for pfbtest (the one bootstrap, see pfbtest/__init__.py); HERE is
# on the path already, as the script's own directory.
sys.path.insert(0, os.path.dirname(HERE))


def main(argv):
    from pfbtest import exit_on_sigterm
    exit_on_sigterm()
    if os.geteuid() != 0:
        print("integration tests start apache2 as root (it binds, then "
              "drops to www-data); run them as root")
        print("integration: 0 passed, 1 failed, 0 skipped")
        return 1
    loader = unittest.TestLoader()
    pattern = None
    modules = []
    allow_skips = False
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "-k" and args:
            pattern = args.pop(0)
        elif arg == "--allow-skips":
            allow_skips = True
        else:
            modules.append(arg)
    if pattern:
        loader.testNamePatterns = ["*%s*" % pattern]
    if modules:
        suite = unittest.TestSuite(loader.loadTestsFromName(m)
                                   for m in modules)
    else:
        suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    started = time.time()
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    # A test with failing subtests is one failed test.
    failed = len({getattr(t, "test_case", t).id()
                  for t, _ in result.failures + result.errors})
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print("integration run took %.0f s" % (time.time() - started))
    for test, reason in result.skipped:
        print("skipped: %s: %s" % (test.id(), reason))
    print("integration: %d passed, %d failed, %d skipped"
          % (passed, failed, skipped))
    if skipped and not allow_skips:
        print("integration: a skipped test checked nothing; fix the cause "
              "or run with --allow-skips")
        return 1
    return 0 if failed == 0 and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
