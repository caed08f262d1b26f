# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Which runs cannot be used: those whose load generator failed.  A run is
invalid when the generator gave no output or nothing was served, when it
ran out of ports or descriptors (EADDRNOTAVAIL, EMFILE, ENFILE, its own
outstanding-request limit), when wrk saw socket errors outside the fault
scenarios (where errors are the server's result), or when the open-loop
generator sent late beyond a bound at p99 (then the generator, not the
server, set the latencies).  The suite marks each run as it ends; report.py
marks published runs that predate the marking the same way, so an old
folder's broken baseline is left out too."""

import json

# Scenarios whose errors are the server's result, not a failed generator.
FAULT_SCENARIOS = ("graceful", "kills", "slowloris", "bursts")
# The open-loop generator's send lag bound, ms at p99 (suite --max-lag-ms).
MAX_LAG_MS = 5.0


def judge_run(name, result, max_lag_ms=MAX_LAG_MS):
    """Why a run cannot be used, or []."""
    reasons = []
    errors = result.get("errors", {})
    if errors.get("no_output"):
        reasons.append("no output from the generator")
    if result.get("requests", 0) <= 0:
        reasons.append("nothing served")
    for kind in ("EADDRNOTAVAIL", "EMFILE", "ENFILE", "generator_limit"):
        if errors.get(kind):
            reasons.append("generator %s x%d" % (kind, errors[kind]))
    open_loop = result.get("generator") == "openloop" or \
        "send_lag_p99" in result
    if open_loop and result.get("send_lag_p99", 0) > max_lag_ms:
        reasons.append("generator send lag p99 %.1f ms > %g ms"
                       % (result["send_lag_p99"], max_lag_ms))
    if not open_loop and name not in FAULT_SCENARIOS:
        failed = {k: errors.get(k, 0) for k in ("connect", "read", "write",
                                                  "timeout") if errors.get(k)}
        if failed:
            reasons.append("wrk socket errors %s" % json.dumps(failed))
    return reasons
