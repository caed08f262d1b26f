# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The closing line of the test scripts that count their own checks
(test/package): 'NAME: N passed, N failed'."""


def report(name, results):
    """Prints the closing line for results (label -> passed) and returns
    the exit status: 0 when something passed and nothing failed."""
    failed = sum(1 for ok in results.values() if not ok)
    passed = len(results) - failed
    print("%s: %d passed, %d failed" % (name, passed, failed))
    return 0 if failed == 0 and passed > 0 else 1
