# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Capacity by stepping a fixed rate: the highest rate a server completes
at 97 % or more within its schedule with p99 at most 10 ms, open loop
(build/openloop), instead of a closed-loop peak.  A closed loop measures
how fast the generator and the server hand each other work; on a
virtual machine that hand-off can leave both CPUs idle (the rig's stall),
so its peak is a property of the pair.  A fixed rate asks the server
alone whether it keeps up.

The rates climb a ladder (LADDER, about 25 % apart) on one warmed server,
each step for a few seconds; the first step that fails ends the climb,
and the capacity is the last step that passed.  A step whose generator
sent late (beyond the lag bound at p99) says nothing about the server:
the climb stops there and the run is invalid (validity.py), since the
capacity would be the generator's.

  step_verdict(result, max_lag_ms)  -> "pass", "fail" or "generator"
  climb(run_at, ladder, ...)        -> the run's result
"""

# Rates offered, req/s: about 25 % apart, from well below any server's
# capacity here to well above a one-CPU server's.
LADDER = (500, 630, 800, 1000, 1250, 1600, 2000, 2500, 3150, 4000, 5000,
          6300, 8000, 10000, 12500, 16000, 20000, 25000, 31500, 40000)
# What a step must keep to pass.
MIN_ACHIEVED = 0.97
MAX_P99_MS = 10.0


def step_verdict(result, max_lag_ms):
    """'generator' when the generator failed (no output, ran out of ports
    or descriptors, sent late), 'fail' when the server completed under
    97 % of the offered rate or p99 exceeded 10 ms, else 'pass'."""
    errors = result.get("errors", {})
    if errors.get("no_output") or any(
            errors.get(k) for k in ("EADDRNOTAVAIL", "EMFILE", "ENFILE",
                                    "generator_limit")):
        return "generator"
    if result.get("send_lag_p99", 0.0) > max_lag_ms:
        return "generator"
    offered = result.get("offered_rate") or 0.0
    if offered <= 0 or result.get("rps", 0.0) < MIN_ACHIEVED * offered:
        return "fail"
    if result.get("p99", float("inf")) > MAX_P99_MS:
        return "fail"
    return "pass"


def ladder_from(start, ladder=LADDER):
    """The ladder's rates from the first one at or above start."""
    return [r for r in ladder if r >= start] or [ladder[-1]]


def climb(run_at, ladder, max_lag_ms):
    """Runs run_at(rate) up the ladder until a step does not pass; the
    result: the capacity (0 when the first step failed), every step's
    offered and achieved rate, p99 and verdict, and the totals of
    requests over the steps (for CPU per request over the climb)."""
    steps = []
    capacity = 0
    requests = 0
    for rate in ladder:
        result = run_at(rate)
        verdict = step_verdict(result, max_lag_ms)
        requests += result.get("requests", 0)
        steps.append({"rate": rate, "achieved": result.get("rps", 0.0),
                      "p99": result.get("p99"),
                      "p99.9": result.get("p99.9"),
                      "send_lag_p99": result.get("send_lag_p99"),
                      "errors": result.get("errors", {}),
                      "verdict": verdict})
        if verdict != "pass":
            break
        capacity = rate
    last_pass = [s for s in steps if s["verdict"] == "pass"]
    return {"generator": "capacity", "capacity": capacity,
            "rps": float(capacity), "requests": requests,
            "steps": steps, "errors": {},
            "p99": last_pass[-1]["p99"] if last_pass else None,
            "p99.9": last_pass[-1]["p99.9"] if last_pass else None,
            "ended_by": steps[-1]["verdict"] if steps else None}
