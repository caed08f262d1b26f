#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Unit tests of the method's pure parts: the idle policy's names and
counters (idlepolicy.py: /proc/interrupts, softnet_stat, the busy time
from the tick's idle time), whether poll can be held on a host, read from
fake sysfs trees, and what check_suite.py demands of the records on
each kind of host, capacity by stepping (capacity.py), the pool
curve's plan, what counts as saturated and the per-pair slope
(poolcurve.py, report_pool.py), the per-round growth of NET_RX
(report_rig.py), and the stall controls' verdicts (stall.py).  Run by
check_suite.py, or alone: python3 bench/test_methods.py"""

import os
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "test"))   # pfbtest

import capacity  # noqa: E402
import check_suite  # noqa: E402
import idlepolicy  # noqa: E402
import poolcurve  # noqa: E402
import report_idle  # noqa: E402
import report_pool  # noqa: E402
import report_rig  # noqa: E402
import stall  # noqa: E402
import stalltrace  # noqa: E402

INTERRUPTS = """           CPU0       CPU1
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 36:          7      73636 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
NMI:          0          0   Non-maskable interrupts
LOC:      30746      32221   Local timer interrupts
RES:      12537      13679   Rescheduling interrupts
CAL:     113153      98642   Function call interrupts
TLB:       5214       4108   TLB shootdowns
"""

SOFTNET = ("0003f45a 00000002 0000000a 00000000 00000000 00000000 00000000 "
           "00000000 00000000 00010dfb 00000000 00000000 00000000 00000000 "
           "00000000\n"
           "0004cb0d 00000001 00000001 00000000 00000000 00000000 00000000 "
           "00000000 00000000 0000e45a 00000000 00000000 00000001 00000000 "
           "00000000\n")


class IdlePolicy(unittest.TestCase):

    def test_policies_are_checked_names(self):
        self.assertEqual(idlepolicy.parse_policies("default,poll"),
                         ["default", "poll"])
        self.assertEqual(idlepolicy.parse_policies(""), ["default"])
        for bad in ("halt", "poll,poll", "default,idle"):
            with self.assertRaises(ValueError):
                idlepolicy.parse_policies(bad)

    def test_interrupts_rows_for_the_server_cpu_only(self):
        rows = idlepolicy.parse_interrupts(INTERRUPTS, [0])
        self.assertEqual(rows["CAL"], [113153])
        self.assertEqual(rows["RES"], [12537])
        self.assertEqual(rows["devices"], [8])
        rows = idlepolicy.parse_interrupts(INTERRUPTS, [1])
        self.assertEqual(rows["devices"], [73636])

    def test_softnet_columns_by_the_row_cpu(self):
        cpu0 = idlepolicy.parse_softnet(SOFTNET, [0])
        self.assertEqual(cpu0["dropped"], 2)
        self.assertEqual(cpu0["received_rps"], 0x10dfb)
        cpu1 = idlepolicy.parse_softnet(SOFTNET, [1])
        self.assertEqual(cpu1["dropped"], 1)
        self.assertEqual(cpu1["time_squeeze"], 1)

    def snapshot(self, t, halts, halt_us, polls, poll_us, tick_ns,
                 cal=0):
        s = idlepolicy.Snapshot.__new__(idlepolicy.Snapshot)
        s.cpus = [0]
        s.time = t
        s.idle = {0: {"POLL": [polls, poll_us],
                      "haltpoll idle": [halts, halt_us]}}
        s.tick_idle = {0: tick_ns} if tick_ns is not None else None
        s.irqs = {"CAL": [cal], "RES": [0]}
        s.softnet = {"dropped": 0}
        s.steal = 0.0
        return s

    def test_busy_time_comes_from_the_tick(self):
        # 2 s, the tick saw 1.5 s idle, cpuidle's residency 1.6 s (the
        # wake-up interrupts counted idle): busy is 0.5 s.
        a = self.snapshot(10.0, 0, 0, 0, 0, 0)
        b = self.snapshot(12.0, 1000, 1600000, 0, 0, 1500000000, cal=900)
        d = idlepolicy.delta(a, b)
        self.assertAlmostEqual(d["busy_s"], 0.5)
        self.assertEqual(d["idle_source"], "tick")
        self.assertAlmostEqual(d["idle_s_cpuidle"], 1.6)
        self.assertEqual(d["halts"], 1000)
        self.assertEqual(d["polls"], 0)
        per = idlepolicy.per_request(d, 500)
        self.assertAlmostEqual(per["halts_per_request"], 2.0)
        self.assertAlmostEqual(per["ipis_per_request"], 1.8)

    def test_without_the_tick_residency_gives_the_busy_time(self):
        a = self.snapshot(10.0, 0, 0, 0, 0, None)
        b = self.snapshot(12.0, 0, 0, 5000, 1200000, None)
        d = idlepolicy.delta(a, b)
        self.assertAlmostEqual(d["busy_s"], 0.8)
        self.assertEqual(d["idle_source"], "cpuidle")
        self.assertEqual(d["polls"], 5000)


def fake_sysfs(root, driver, states, cpus=2):
    """A sysfs tree under `root` as idlepolicy reads it: the cpuidle driver
    (no current_driver file where `driver` is None), each CPU's states as
    (name, exit latency µs, entries), and haltpoll's parameters where the
    driver is haltpoll."""
    def write(path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("%s\n" % text)
    cpu = os.path.join(root, "devices", "system", "cpu")
    if driver is not None:
        write(os.path.join(cpu, "cpuidle", "current_driver"), driver)
        write(os.path.join(cpu, "cpuidle", "current_governor_ro"),
              "menu" if driver != "none" else "none")
    for n in range(cpus):
        os.makedirs(os.path.join(cpu, "cpu%d" % n), exist_ok=True)
        for i, (name, latency, usage) in enumerate(states):
            d = os.path.join(cpu, "cpu%d" % n, "cpuidle", "state%d" % i)
            for key, value in (("name", name), ("latency", latency),
                               ("disable", 0), ("usage", usage),
                               ("time", 10 * usage)):
                write(os.path.join(d, key), value)
    if driver == "haltpoll":
        write(os.path.join(root, "module", "haltpoll", "parameters",
                           "guest_halt_poll_ns"), 0)


# This development VM's states (cpu0/cpuidle/state*/name, latency).
HALTPOLL_STATES = [("POLL", 0, 5), ("haltpoll idle", 1, 700)]


class IdleHost(unittest.TestCase):
    """Whether poll can be held, from the host's cpuidle: a kernel with no
    cpuidle driver (current_driver `none`) has no state for
    /dev/cpu_dma_latency to bar, so a run under poll there is not one."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def host(self, name, driver, states):
        root = os.path.join(self.tmp.name, name)
        fake_sysfs(root, driver, states)
        return root

    def assert_not_holdable(self, root, why):
        idle = idlepolicy.describe(root)
        self.assertEqual(idle["states"], [])
        self.assertIs(idle["poll_holdable"], False)
        self.assertIn(why, idle["poll_not_holdable"])
        self.assertEqual(idlepolicy.plan(["default", "poll"], idle),
                         (["default"], {"poll": idle["poll_not_holdable"]}))
        self.assertEqual(idlepolicy.plan(["default"], idle),
                         (["default"], {}))
        self.assertIn("cannot be held here",
                      idlepolicy.unavailable(["poll"], idle))
        self.assertIsNone(idlepolicy.unavailable(["default"], idle))
        self.assertNotEqual(idlepolicy.label("poll", idle),
                            idlepolicy.LABELS["poll"])
        self.assertIn("not held", idlepolicy.label("poll", idle))
        self.assertEqual(idlepolicy.label("default", idle),
                         idlepolicy.LABELS["default"])
        self.assertEqual(idlepolicy.cpuidle_counts([0, 1], root),
                         {0: {}, 1: {}})
        return idle

    def test_driver_none_cannot_hold_poll(self):
        idle = self.assert_not_holdable(self.host("none", "none", []),
                                        "cpuidle driver none: no idle state")
        self.assertEqual(idle["driver"], "none")

    def test_no_driver_file_cannot_hold_poll(self):
        idle = self.assert_not_holdable(self.host("missing", None, []),
                                        "cpuidle driver none: no idle state")
        self.assertEqual(idle["driver"], "none")
        self.assertEqual(idle["governor"], "none")

    def test_driver_without_states_cannot_hold_poll(self):
        self.assert_not_holdable(self.host("empty", "acpi_idle", []),
                                 "acpi_idle has no idle states")

    def test_states_of_exit_latency_0_leave_nothing_to_bar(self):
        idle = idlepolicy.describe(self.host("pollonly", "haltpoll",
                                             [("POLL", 0, 5)]))
        self.assertEqual(idlepolicy.holdable(idle),
                         (False, idle["poll_not_holdable"]))
        self.assertIn("exit latency 0", idle["poll_not_holdable"])

    def test_haltpoll_with_states_holds_poll(self):
        root = self.host("haltpoll", "haltpoll", HALTPOLL_STATES)
        idle = idlepolicy.describe(root)
        self.assertEqual(idle["driver"], "haltpoll")
        self.assertEqual([(s["name"], s["latency_us"])
                          for s in idle["states"]],
                         [("POLL", 0), ("haltpoll idle", 1)])
        self.assertEqual(idle["guest_haltpoll"], {"guest_halt_poll_ns": "0"})
        self.assertIs(idle["poll_holdable"], True)
        self.assertNotIn("poll_not_holdable", idle)
        self.assertEqual(idlepolicy.plan(["default", "poll"], idle),
                         (["default", "poll"], {}))
        self.assertEqual(idlepolicy.label("poll", idle),
                         idlepolicy.LABELS["poll"])
        self.assertEqual(idlepolicy.cpuidle_counts([1], root),
                         {1: {"POLL": [5, 50], "haltpoll idle": [700, 7000]}})

    def test_the_environment_names_the_tree(self):
        root = self.host("none", "none", [])
        with mock.patch.dict(os.environ, {"PFB_SYSFS": root}):
            self.assertIs(idlepolicy.describe()["poll_holdable"], False)
            # Refused before /dev/cpu_dma_latency is opened.
            with self.assertRaises(RuntimeError):
                with idlepolicy.Hold("poll"):
                    pass
            with idlepolicy.Hold("default") as hold:
                record = hold.record()
        self.assertIs(record["idle_policy_holdable"], False)
        self.assertIn("cpuidle driver none: no idle state",
                      record["idle_policy_not_holdable"])
        root = self.host("haltpoll", "haltpoll", HALTPOLL_STATES)
        with mock.patch.dict(os.environ, {"PFB_SYSFS": root}):
            with idlepolicy.Hold("default") as hold:
                record = hold.record()
        self.assertIs(record["idle_policy_holdable"], True)
        self.assertNotIn("idle_policy_not_holdable", record)


def rig_run(policy, idle, entries):
    run = {"scenario": "rate", "config": "pfb-1", "idle_policy": policy,
           "idle_policy_holdable": idle["poll_holdable"],
           "idle": {"entries": entries}}
    if not idle["poll_holdable"]:
        run["idle_policy_not_holdable"] = idle["poll_not_holdable"]
    return run


class IdleChecks(unittest.TestCase):
    """check_suite.py's idle-policy checks on the records of a host without
    cpuidle and of one with haltpoll's states: lenient only where the host
    has nothing to hold or count."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        fake_sysfs(os.path.join(tmp.name, "none"), "none", [])
        fake_sysfs(os.path.join(tmp.name, "hp"), "haltpoll", HALTPOLL_STATES)
        self.none = idlepolicy.describe(os.path.join(tmp.name, "none"))
        self.haltpoll = idlepolicy.describe(os.path.join(tmp.name, "hp"))

    def folder(self, idle, policies):
        run, not_run = idlepolicy.plan(policies, idle)
        return {"idle": idle, "idle_policies": run,
                "idle_policies_not_run": not_run}

    def test_no_cpuidle_default_only_with_the_reason_passes(self):
        doc = self.folder(self.none, ["default", "poll"])
        runs = [rig_run("default", self.none, {})]
        self.assertEqual(check_suite.policy_problems("rig", doc, runs,
                                                     self.none), [])
        self.assertEqual(check_suite.entries_problems("rig", runs,
                                                      self.none), [])

    def test_no_cpuidle_a_poll_run_or_no_reason_fails(self):
        doc = self.folder(self.none, ["default", "poll"])
        runs = [rig_run("default", self.none, {}),
                rig_run("poll", self.none, {})]
        problems = check_suite.policy_problems("rig", doc, runs, self.none)
        self.assertEqual(len(problems), 1)
        self.assertIn("poll cannot be held here, yet", problems[0])
        doc["idle_policies_not_run"] = {}
        bare = dict(rig_run("default", self.none, {}))
        del bare["idle_policy_not_holdable"]
        problems = check_suite.policy_problems("rig", doc, [bare], self.none)
        self.assertEqual(len(problems), 2)
        self.assertIn("does not say why poll cannot be held", problems[0])
        self.assertIn("does not say why it was not run", problems[1])

    def test_haltpoll_both_policies_with_entries_pass(self):
        doc = self.folder(self.haltpoll, ["default", "poll"])
        runs = [rig_run(p, self.haltpoll, {"POLL": 3, "haltpoll idle": 90})
                for p in ("default", "poll")]
        self.assertEqual(check_suite.policy_problems("rig", doc, runs,
                                                     self.haltpoll), [])
        self.assertEqual(check_suite.entries_problems("rig", runs,
                                                      self.haltpoll), [])

    def test_haltpoll_missing_entries_or_poll_fails(self):
        doc = self.folder(self.haltpoll, ["default", "poll"])
        runs = [rig_run(p, self.haltpoll, {}) for p in ("default", "poll")]
        self.assertEqual(len(check_suite.entries_problems(
            "rig", runs, self.haltpoll)), 2)
        problems = check_suite.policy_problems("rig", doc, runs[:1],
                                               self.haltpoll)
        self.assertEqual(problems, ["rig: did not run both idle policies: "
                                    "['default']"])

    def test_a_record_that_disagrees_with_the_host_fails(self):
        # A folder that says poll could not be held, checked on a host
        # with states: the check reads the host, not the folder's word.
        doc = self.folder(self.none, ["default", "poll"])
        runs = [rig_run("default", self.none, {})]
        problems = check_suite.policy_problems("rig", doc, runs,
                                               self.haltpoll)
        self.assertIn("rig: the folder records poll_holdable False, this "
                      "host's cpuidle says True", problems)
        self.assertIn("rig: did not run both idle policies: ['default']",
                      problems)
        self.assertEqual(len(check_suite.entries_problems(
            "rig", runs, self.haltpoll)), 1)


class IdleReports(unittest.TestCase):
    """report.md's idle-policy lines for a host without cpuidle: poll is
    said not run, or, in a folder made before runs dropped it there, named
    as not held; never labelled as polling."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        fake_sysfs(tmp.name, "none", [])
        self.idle = idlepolicy.describe(tmp.name)

    def test_the_policy_section_says_poll_was_not_run_and_why(self):
        run, not_run = idlepolicy.plan(["default", "poll"], self.idle)
        doc = {"idle": self.idle, "idle_policies_not_run": not_run,
               "runs": [rig_run(p, self.idle, {}) for p in run]}
        text = "\n".join(report_idle.describe_lines(doc))
        self.assertIn("Policies run: default (idle as configured). Not run: "
                      "poll (%s)." % not_run["poll"], text)
        self.assertNotIn(idlepolicy.LABELS["poll"], text)

    def test_old_poll_runs_are_named_not_held(self):
        doc = {"idle": self.idle, "runs": [rig_run(p, self.idle, {})
                                           for p in ("default", "poll")]}
        self.assertIn("not held", report_idle.heading("poll", doc))
        text = "\n".join(report_idle.describe_lines(doc))
        self.assertIn("poll (poll requested, not held", text)
        self.assertIn("The idle policy cannot be held on this host: %s."
                      % self.idle["poll_not_holdable"], text)
        self.assertNotIn(idlepolicy.LABELS["poll"], text)


def step(offered, achieved, p99, lag=0.1, errors=None):
    return {"offered_rate": offered, "rps": achieved, "p99": p99,
            "send_lag_p99": lag, "errors": errors or {},
            "requests": int(2 * achieved)}


class Capacity(unittest.TestCase):

    def test_verdicts(self):
        self.assertEqual(capacity.step_verdict(step(1000, 999, 2.0), 5),
                         "pass")
        self.assertEqual(capacity.step_verdict(step(1000, 960, 2.0), 5),
                         "fail")
        self.assertEqual(capacity.step_verdict(step(1000, 999, 10.5), 5),
                         "fail")
        self.assertEqual(capacity.step_verdict(step(1000, 999, 2.0, 6), 5),
                         "generator")
        self.assertEqual(capacity.step_verdict(
            step(1000, 999, 2.0, errors={"EADDRNOTAVAIL": 3}), 5),
            "generator")

    def test_the_climb_stops_at_the_first_step_that_does_not_pass(self):
        def server(rate):
            return step(rate, rate if rate <= 2000 else 0.9 * rate, 1.0)
        result = capacity.climb(server, capacity.ladder_from(1000), 5)
        self.assertEqual(result["capacity"], 2000)
        self.assertEqual(result["steps"][-1]["rate"], 2500)
        self.assertEqual(result["ended_by"], "fail")

    def test_a_late_generator_ends_the_climb_and_says_so(self):
        def generator(rate):
            return step(rate, rate, 1.0, lag=0.1 if rate < 1600 else 9.0)
        result = capacity.climb(generator, capacity.ladder_from(500), 5)
        self.assertEqual(result["capacity"], 1250)
        self.assertEqual(result["ended_by"], "generator")
        import validity
        self.assertTrue(any("generator" in why for why in
                            validity.judge_capacity(result)))

    def test_the_last_step_saturating_is_not_a_fault(self):
        import validity
        result = capacity.climb(lambda r: step(r, 0.5 * r, 50.0),
                                [1000], 5)
        result["kernel"] = {"nstat": {"TcpExtListenOverflows": 40}}
        result["rig"] = {"foreign_cpus": 0.01}
        self.assertEqual(result["capacity"], 0)
        self.assertEqual(validity.judge_capacity(result), [])

    def test_ladder_is_increasing_about_a_quarter_apart(self):
        for a, b in zip(capacity.LADDER, capacity.LADDER[1:]):
            self.assertTrue(1.15 < b / float(a) < 1.35, (a, b))


class PoolPlan(unittest.TestCase):

    def test_every_cell_once_a_pair_in_a_seeded_shuffle(self):
        plan = poolcurve.plan_sessions("7", 6, ["a", "b"], [64, 4096],
                                       [1000, 2500], ["default", "poll"])
        self.assertEqual(len(plan), 6 * 2 * 2)
        for pair in range(1, 7):
            cells = sorted((s["build"], s["pool"]) for s in plan
                           if s["pair"] == pair)
            self.assertEqual(cells, [("a", 64), ("a", 4096), ("b", 64),
                                     ("b", 4096)])
        for s in plan:
            self.assertEqual(sorted(map(tuple, s["order"])),
                             [(1000, "default"), (1000, "poll"),
                              (2500, "default"), (2500, "poll")])
        again = poolcurve.plan_sessions("7", 6, ["a", "b"], [64, 4096],
                                        [1000, 2500], ["default", "poll"])
        self.assertEqual(plan, again)
        orders = {tuple(map(tuple, s["order"])) for s in plan}
        self.assertGreater(len(orders), 1)

    def test_only_faults_that_are_not_saturation_run_a_session_again(self):
        doc = {"plan": poolcurve.plan_sessions("1", 1, ["a"], [64], [1000],
                                               ["default"]),
               "sessions": [], "runs": []}
        first = doc["plan"][0]
        doc["sessions"].append({"id": first["id"]})
        doc["runs"].append({"session": first["id"], "invalid": [
            "achieved 900 req/s, under 97 % of the 1000 offered "
            "(saturated)", "ListenOverflows 12"]})
        self.assertEqual(poolcurve.pending(doc, 3), [])
        doc["runs"].append({"session": first["id"], "invalid": [
            "other processes took 9.0 % of a CPU (> 5 %)"]})
        again = poolcurve.pending(doc, 3)
        self.assertEqual([s["attempt"] for s in again], [2])
        doc["sessions"].append({"id": again[0]["id"]})
        doc["runs"].append({"session": again[0]["id"], "invalid": []})
        self.assertEqual(poolcurve.pending(doc, 3), [])

    def test_after_graceful_is_a_variant_of_each_build(self):
        doc = {"settings": {"builds": ["a", "b"], "after_graceful": True}}
        self.assertEqual(report_pool.report_builds(doc),
                         ["a", "b", "a+graceful", "b+graceful"])
        doc["settings"]["after_graceful"] = False
        self.assertEqual(report_pool.report_builds(doc), ["a", "b"])

    def test_estimate_counts_the_warm_up_at_its_rate(self):
        doc = {"settings": {"warm_requests": 100, "warm_rate": 2500,
                            "after_graceful": False}, "sessions": []}
        small = poolcurve.session_estimate(doc, 64, 2, 5)
        large = poolcurve.session_estimate(doc, 2048, 2, 5)
        # 2048 children x 100 requests at 2500 req/s: 82 s of warm-up.
        self.assertGreater(large - small, 82)
        doc["settings"]["after_graceful"] = True
        self.assertGreater(poolcurve.session_estimate(doc, 2048, 2, 5),
                           large + 2 * 5)
        doc["sessions"].append({"pool": 2048, "took_s": 99.0})
        self.assertEqual(poolcurve.session_estimate(doc, 2048, 2, 5), 99.0)

    def test_saturation_is_told_apart(self):
        self.assertTrue(report_pool.only_saturated(
            ["achieved 1.0 req/s, under 97 % of the 2.0 offered "
             "(saturated)"]))
        # A saturated server's debt fills the generator's outstanding
        # requests: that follows from saturation, and is no fault.
        self.assertTrue(report_pool.only_saturated(
            ["generator generator_limit x3558", "achieved 989 req/s, "
             "under 97 % of the 2500 offered (saturated)",
             "ListenOverflows 1162"]))
        self.assertFalse(report_pool.only_saturated(
            ["generator generator_limit x3558"]))
        self.assertFalse(report_pool.only_saturated([]))
        self.assertFalse(report_pool.only_saturated(
            ["achieved 1 req/s (saturated)", "generator send lag p99 9 ms "
             "> 5 ms"]))


def pool_run(pair, pool, cpu_s, requests=1000, invalid=None, attempt=1):
    return {"config": "b", "pool": pool, "rate": 1000, "pair": pair,
            "idle_policy": "default", "attempt": attempt,
            "server_cpus_s": cpu_s, "requests": requests,
            "invalid": invalid or []}


class PoolCommits(unittest.TestCase):

    def test_only_files_no_run_executes_may_differ(self):
        # The same commit, and a tree with changes.
        self.assertIsNone(poolcurve.same_measurement("abc", "abc"))
        self.assertIn("changes", poolcurve.same_measurement(
            "abc", "abc-dirty"))
        for path in ("docs/benchmarks.md", "bench/report_pool.py"):
            self.assertTrue(any(path == p or path.startswith(p + "/")
                                for p in poolcurve.NOT_MEASURED), path)
        for path in ("server/mpm/prefork/prefork.c", "bench/rig.py",
                     "bench/poolcurve.py"):
            self.assertFalse(any(path == p or path.startswith(p + "/")
                                 for p in poolcurve.NOT_MEASURED), path)


class PoolSlope(unittest.TestCase):

    def test_slope_per_pair_in_ns_per_child(self):
        # 100 µs at 64 children, + 0.1 µs per child: 100 ns per child.
        runs = []
        for pair in (1, 2):
            for pool in (64, 512, 4096):
                runs.append(pool_run(pair, pool,
                                     (100 + 0.1 * (pool - 64)) * 1e-3))
        doc = {"runs": runs}
        slopes = report_pool.pair_slopes(doc, "b", 1000, "default",
                                         [64, 512, 4096])
        self.assertEqual(len(slopes), 2)
        for s in slopes:
            self.assertAlmostEqual(s, 100.0, places=6)

    def test_the_latest_valid_attempt_of_a_cell_counts(self):
        doc = {"runs": [pool_run(1, 64, 0.1),
                        pool_run(1, 64, 0.3, attempt=2,
                                 invalid=["other processes took 9 %"]),
                        pool_run(1, 512, 0.2),
                        pool_run(1, 512, 0.25, attempt=2)]}
        self.assertEqual(report_pool.cell_runs(
            doc, "b", 64, 1000, "default")[1]["server_cpus_s"], 0.1)
        self.assertEqual(report_pool.cell_runs(
            doc, "b", 512, 1000, "default")[1]["server_cpus_s"], 0.25)

    def test_growth_set_beside_the_prediction(self):
        # Six pairs' slopes: the interval is their min and max.
        slopes = [40.0, 45.0, 50.0, 52.0, 55.0, 60.0]
        self.assertEqual(report_pool.against_prediction(slopes, [47, 122]),
                         "overlaps the prediction")
        self.assertEqual(report_pool.against_prediction(slopes, [70, 122]),
                         "below the prediction")
        self.assertEqual(report_pool.against_prediction(slopes, [-10, 30]),
                         "above the prediction")
        self.assertEqual(report_pool.against_prediction(slopes, None), "")

    def test_verdict_holds_one(self):
        self.assertEqual(report_pool.verdict((1.0, 0.9, 1.2, 0.97)),
                         "no difference detected")
        self.assertEqual(report_pool.verdict((1.5, 1.1, 1.9, 0.97)),
                         "higher")


class WalkGrowth(unittest.TestCase):

    def test_rounds_are_paired_and_invalid_ones_left_out(self):
        def r(netrx, invalid=None):
            return {"per_connection": {"netrx_us_per_connection": netrx},
                    "invalid": invalid or []}
        lows = [r(60.0), r(62.0), r(61.0)]
        highs = [r(100.0), r(102.0, ["saturated"]), r(101.0)]
        slopes = report_rig.round_slopes(lows, highs, 448)
        self.assertEqual(len(slopes), 2)
        self.assertAlmostEqual(slopes[0], 40.0 * 1e3 / 448)


TRACE = """\
          <idle>-0       [000] d..1.   100.000000: cpu_idle: state=1 cpu_id=0
             wrk-200     [001] d..1.   100.000010: ipi_send_cpu: cpu=0 callsite=x callback=y
             wrk-200     [001] d..1.   100.000020: sched_switch: prev_comm=wrk
          <idle>-0       [001] d..1.   100.000030: cpu_idle: state=1 cpu_id=1
          <idle>-0       [000] d.h1.   100.000060: call_function_single_entry: vector=251
          <idle>-0       [000] d..1.   100.000070: cpu_idle: state=4294967295 cpu_id=0
          <idle>-0       [001] d.h1.   100.000500: local_timer_entry: vector=236
          <idle>-0       [001] d..1.   100.000510: cpu_idle: state=4294967295 cpu_id=1
          <idle>-0       [000] d..1.   100.000600: cpu_idle: state=1 cpu_id=0
          <idle>-0       [000] d..1.   100.001000: cpu_idle: state=4294967295 cpu_id=0
             wrk-200     [001] d..1.   100.001000: netif_rx: dev=veth0 len=60
"""


class StallTimeWait(unittest.TestCase):

    def test_the_timer_left_on_a_timewait_line(self):
        line = ("0 0 10.0.0.2:40000 10.0.0.1:80 "
                "timer:(timewait,%s,0)")
        self.assertEqual(stall.timewait_left(line % "59sec"), 59)
        self.assertEqual(stall.timewait_left(line % "1min"), 60)
        self.assertAlmostEqual(stall.timewait_left(line % "850ms"), 0.85)
        self.assertEqual(stall.timewait_left("no timer"), 0)

    def test_units_follow_their_plan_and_busy_ones_run_once_more(self):
        plan = stall.plan_units("s", 1, ["a"], ["rps"], [32], ["default"])
        self.assertEqual(len(stall.pending(plan, [], 0.05)), 1)
        busy = dict(plan[0], rig={"foreign_cpus": 0.2})
        self.assertEqual(len(stall.pending(plan, [busy], 0.05)), 1)
        self.assertEqual(stall.pending(plan, [busy, busy], 0.05), [])
        quiet = dict(plan[0], rig={"foreign_cpus": 0.01})
        self.assertEqual(stall.pending(plan, [quiet], 0.05), [])


class StallTrace(unittest.TestCase):

    def test_idle_periods_and_what_woke_them(self):
        events = stalltrace.parse(TRACE)
        self.assertEqual(events[0][2], "power:cpu_idle")
        periods = stalltrace.idle_periods(events, [0, 1])
        self.assertEqual([p[2] for p in periods[0]],
                         ["call_function_single", None])
        self.assertEqual([p[2] for p in periods[1]], ["local_timer"])

    def test_both_idle_spans_and_the_ipi_in_flight(self):
        events = stalltrace.parse(TRACE)
        periods = stalltrace.idle_periods(events, [0, 1])
        spans = stalltrace.both_idle(periods, [0, 1])
        self.assertEqual(len(spans), 1)
        self.assertAlmostEqual(spans[0][0], 100.000030)
        self.assertAlmostEqual(spans[0][1], 100.000070)
        self.assertEqual(stalltrace.ended_by(events, spans[0], [0, 1]),
                         "call_function_single sent before both went idle")
        delays = stalltrace.ipi_delays(events, periods)
        self.assertEqual(len(delays), 1)
        self.assertAlmostEqual(delays[0][0], 50e-6)
        self.assertTrue(delays[0][1])
        summary = stalltrace.summarize(events, [0, 1])
        self.assertEqual(summary["both_idle"]["spans"], 1)
        self.assertEqual(summary["ipi_delay_to_idle"]["count"], 1)


if __name__ == "__main__":
    unittest.main()
