# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Which runs cannot be used.  A run is invalid when its load generator
failed: it gave no output or nothing was served, it ran out of ports or
descriptors (EADDRNOTAVAIL, EMFILE, ENFILE, its own outstanding-request
limit), wrk saw socket errors outside the fault scenarios (where errors
are the server's result), or the open-loop generator sent late beyond a
bound at p99 (then the generator, not the server, set the latencies).  It
is invalid too when the measurement cannot be trusted: a fixed-rate run
whose server completed less than 97 % of the offered rate within the
schedule (it saturated, so its latencies are a queue's growth, not the
server's at that rate), and, on the rig, a run during which other
processes took more than 5 % of a CPU, whose server's accept queue
overflowed (ListenOverflows in the server's own network namespace; on
loopback the counter is the host's and says nothing of one server), or,
in a closed-loop peak (static files, no service time), in which neither
the server's CPU nor the generator's was saturated (both idled more than
10 %: the run measured a stall, not a peak).  The
suite marks each run as it ends; report.py marks published runs that
predate the marking the same way, so an old folder's broken baseline is
left out too."""

import json

# Scenarios whose errors are the server's result, not a failed generator.
FAULT_SCENARIOS = ("graceful", "kills", "slowloris", "bursts")
# The open-loop generator's send lag bound, ms at p99 (suite --max-lag-ms).
MAX_LAG_MS = 5.0
# On the rig: the share of a CPU other processes may take during a run
# (suite --max-foreign-cpu).
MAX_FOREIGN_CPU = 0.05
# A fixed-rate run must complete at least this share of its offered rate.
MIN_ACHIEVED = 0.97
# On the rig, a closed-loop run of a scenario that has nothing to wait
# for (these: no service time, no sleeping application) in which both the
# server's and the generator's CPUs idled more than this share of the
# time saturated neither: it waited on something else (on a virtual
# machine, the host).
PEAK_SCENARIOS = ("static-close", "static-keepalive", "keepalive100",
                  "fourports", "tls-close", "tls-keepalive")
MAX_IDLE_AT_PEAK = 0.10


STALL_REASON = "neither CPU saturated in closed loop"

# The stall rule's controls (check_suite.py): a closed loop with nothing
# to wait for must idle less than this share of a planted stall's idle.
CONTROL_IDLE_SHARE_OF_PLANTED = 0.5


def idle_at_peak(rig):
    """The share of time both CPUs idled at most, the figure the stall
    rule compares with MAX_IDLE_AT_PEAK: the smaller of the server's and
    the generator's idle shares, or None where either is missing."""
    server_idle = (rig or {}).get("server_idle_share")
    client_idle = (rig or {}).get("client_idle_share")
    if server_idle is None or client_idle is None:
        return None
    return min(server_idle, client_idle)


def judge_stall_control(control_rig, planted_rig, generator_sysctls,
                        max_foreign_cpu=0.5):
    """Why a control of the stall rule failed, or [].  The control is a
    closed loop with nothing to wait for, run on the rig beside a planted
    stall.  How much a healthy loop idles is the host's (a halted vCPU's
    wake-up, a neighbour on the host), so the control is held to the
    planted stall measured on the same host, not to the rule's fixed
    bound: it must idle under CONTROL_IDLE_SHARE_OF_PLANTED of what the
    planted stall idled (of all the time, where others kept the planted
    run from running alone).  The rig's own cause of a stall, TIME_WAIT
    ports on the generator's side, is a setting: the generator's
    namespace must hold generator_sysctls."""
    problems = []
    got = (control_rig or {}).get("generator_sysctls") or {}
    for key, want in generator_sysctls:
        if got.get(key) != want:
            problems.append("the generator's namespace had %s = %r, "
                            "expected %r" % (key, got.get(key), want))
    control = idle_at_peak(control_rig)
    planted = idle_at_peak(planted_rig)
    if planted is None or (planted_rig or {}).get(
            "foreign_cpus", 1.0) > max_foreign_cpu:
        planted = 1.0
    if control is None:
        problems.append("no idle shares recorded")
    elif control >= CONTROL_IDLE_SHARE_OF_PLANTED * planted:
        problems.append("both CPUs idled %.0f %% of the time, not under "
                        "%.0f %% of the planted stall's %.0f %%"
                        % (100 * control,
                           100 * CONTROL_IDLE_SHARE_OF_PLANTED,
                           100 * planted))
    return problems


def only_stalled(reasons):
    """Whether a run's only reasons to be invalid are a closed-loop stall
    (judge_run's "neither CPU saturated"): its req/s is then a lower bound
    of the peak, still a safe basis for fixed rates below it."""
    return bool(reasons) and all(why.startswith(STALL_REASON)
                                 for why in reasons)


def _overflows(result):
    return result.get("kernel", {}).get("nstat", {}).get(
        "TcpExtListenOverflows", 0)


def _foreign(result, max_foreign_cpu):
    foreign = (result.get("rig") or {}).get("foreign_cpus")
    if foreign is not None and foreign > max_foreign_cpu:
        return ["other processes took %.1f %% of a CPU (> %g %%)"
                % (100 * foreign, 100 * max_foreign_cpu)]
    return []


def judge_capacity(result, max_foreign_cpu=MAX_FOREIGN_CPU):
    """A capacity climb (capacity.py): invalid when its generator failed
    or sent late at a step (the capacity would be the generator's), when
    nothing was served, or on the rig when others took more than the
    bound.  The last step's saturation and accept-queue overflows are the
    climb's end, not a fault."""
    reasons = []
    if not result.get("steps") or result.get("requests", 0) <= 0:
        reasons.append("nothing served")
    if result.get("ended_by") == "generator":
        step = result["steps"][-1]
        reasons.append("the generator failed at %d req/s (send lag p99 "
                       "%s ms, errors %s): the capacity would be the "
                       "generator's" % (step["rate"], step.get(
                           "send_lag_p99"), json.dumps(step["errors"])))
    return reasons + _foreign(result, max_foreign_cpu)


def judge_run(name, result, max_lag_ms=MAX_LAG_MS,
              max_foreign_cpu=MAX_FOREIGN_CPU):
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
    if result.get("generator") == "capacity":
        return judge_capacity(result, max_foreign_cpu)
    open_loop = result.get("generator") == "openloop" or \
        "send_lag_p99" in result
    if open_loop and result.get("send_lag_p99", 0) > max_lag_ms:
        reasons.append("generator send lag p99 %.1f ms > %g ms"
                       % (result["send_lag_p99"], max_lag_ms))
    offered = result.get("offered_rate")
    if open_loop and offered and name not in FAULT_SCENARIOS and \
            result.get("rps", 0.0) < MIN_ACHIEVED * offered:
        reasons.append("achieved %.0f req/s, under %.0f %% of the %.0f "
                       "offered (saturated)" % (result.get("rps", 0.0),
                                                100 * MIN_ACHIEVED, offered))
    if not open_loop and name not in FAULT_SCENARIOS:
        failed = {k: errors.get(k, 0) for k in ("connect", "read", "write",
                                                  "timeout") if errors.get(k)}
        if failed:
            reasons.append("wrk socket errors %s" % json.dumps(failed))
    rig = result.get("rig")
    if rig:
        reasons += _foreign(result, max_foreign_cpu)
        overflows = _overflows(result)
        if overflows:
            reasons.append("ListenOverflows %d" % overflows)
        server_idle = rig.get("server_idle_share")
        client_idle = rig.get("client_idle_share")
        peak = name in PEAK_SCENARIOS or name.startswith("pool")
        if not open_loop and peak and \
                server_idle is not None and client_idle is not None and \
                min(server_idle, client_idle) > MAX_IDLE_AT_PEAK:
            reasons.append("%s (server CPU idle %.0f %%, generator's "
                           "%.0f %%): it waited on something else"
                           % (STALL_REASON, 100 * server_idle,
                              100 * client_idle))
    return reasons
