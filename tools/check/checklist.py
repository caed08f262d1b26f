# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The line each documentation check prints per item, and the record of
what passed, shared by tools/check/check_*.py."""


def recorder(results):
    """Returns check(label, ok, detail=""): records bool(ok) under label in
    results and prints "ok   label" or "FAIL label: detail" at once (a
    check that hangs still shows what came before it)."""
    def check(label, ok, detail=""):
        results[label] = bool(ok)
        print("%s %s%s" % ("ok  " if ok else "FAIL", label,
                           (": " + str(detail)) if detail and not ok else ""),
              flush=True)
    return check
