#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The scale model decides with the MPM's own rules: it calls
pf_maintenance_decide() and the idle-steering rule (pf_steer_idle_pick(),
the C the kernel program is compiled from) in build/libpfpolicy.so through
ctypes.  This checks the model's side of those calls (the ctypes
structures, the spawn ramp it keeps between cycles) against the tables
that the C unit tests check too (test/unit/maintenance_cases.txt,
test/unit/idle_steering_cases.txt): if the model and the MPM came to
disagree on a state, one of the two would fail.

  python3 bench/sim/test_bucketsim.py
"""

import ctypes
import os
import random
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bucketsim  # noqa: E402

CASES = os.path.join(HERE, "..", "..", "test", "unit",
                     "maintenance_cases.txt")
IDLE_CASES = os.path.join(HERE, "..", "..", "test", "unit",
                          "idle_steering_cases.txt")


def read_cases():
    rows = []
    with open(CASES) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            label, limits, occupied, rates, states, actions, after = \
                [field.strip() for field in line.split("|")]
            words = limits.split()
            steering = words.pop() if not words[-1].isdigit() else "hash"
            nb, mn, mx, workers = map(int, words)
            flat = list(map(int, states.split()))
            acts = list(map(int, actions.split()))
            rows.append({
                "label": label, "nb": nb, "min": mn, "max": mx,
                "workers": workers, "steering": steering,
                "occupied": int(occupied),
                "ramp": int(rates),
                "states": [tuple(flat[i:i + 3]) for i in range(0, 3 * nb, 3)],
                "actions": [tuple(acts[i:i + 2]) for i in range(0, 2 * nb, 2)],
                "after": int(after)})
    return rows


class ModelRunsTheMpmsRules(unittest.TestCase):

    def test_table_of_states(self):
        rows = read_cases()
        self.assertGreaterEqual(len(rows), 10)
        for row in rows:
            with self.subTest(row["label"]):
                policy = bucketsim.Policy(row["nb"], row["min"], row["max"],
                                          row["workers"], row["steering"])
                policy.rate.value = row["ramp"]
                self.assertEqual(policy.decide(row["states"],
                                               row["occupied"]),
                                 row["actions"])
                self.assertEqual(policy.ramp(), row["after"])

    def test_idle_steering_table(self):
        lib = bucketsim.load_policy()
        moved = ctypes.c_int()
        rows = 0
        with open(IDLE_CASES) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                label, n, draws, counts, want = \
                    [field.strip() for field in line.split("|")]
                n = int(n)
                hash_value, random_value = (int(v, 0) for v in draws.split())
                idle = (ctypes.c_int64 * n)(*map(int, counts.split()))
                with self.subTest(label):
                    got = lib.pf_steer_idle_pick(idle, n, hash_value,
                                                 random_value,
                                                 ctypes.byref(moved))
                    self.assertEqual((got, moved.value),
                                     tuple(map(int, want.split())))
                rows += 1
        self.assertGreaterEqual(rows, 10)

    def test_simulation_steers_through_the_rule(self):
        """Idle steering in the model: with as many clients as children,
        the hash queues requests behind busy children while other buckets
        have idle ones; the rule sends them to the idle ones, so the
        median latency is the service time's."""
        runs = {steering: bucketsim.simulate(
            buckets=4, workers=16, clients=16, requests=5000, warmup=500,
            steering=steering, mean_ms=10.0, overhead_ms=0.0,
            min_spare_servers=1, max_spare_servers=16)
            for steering in ("hash", "idle")}
        self.assertEqual(runs["idle"]["children_end"], [4, 4, 4, 4])
        self.assertLess(runs["idle"]["p50"], 0.8 * runs["hash"]["p50"])

    def test_simulation_spawns_through_the_policy(self):
        """A run that starts with too few children must grow them by the
        policy's ramp, and keep every bucket served."""
        r = bucketsim.simulate(buckets=4, workers=32, clients=48,
                               requests=5000, warmup=500, start_children=4)
        self.assertGreater(sum(r["children_end"]), 4)
        self.assertTrue(all(c >= 1 for c in r["children_end"]))
        self.assertGreater(r["rps"], 0)


class TwoNodes(unittest.TestCase):
    """The topology and the steering modes that know where a connection
    was received (cpu, and local: the mode that can borrow)."""

    def run_mode(self, steering, clients_per_cpu, mean_ms=10.0):
        return bucketsim.simulate(
            buckets=8, workers=64, clients=clients_per_cpu * 8,
            mean_ms=mean_ms, requests=6000, warmup=600, steering=steering,
            nodes=2, cross_ms=0.5)

    def test_cpu_steering_serves_every_connection_where_it_arrived(self):
        r = self.run_mode("cpu", 12)
        self.assertEqual(r["cross_share"], 0.0)
        self.assertEqual(r["away_share"], 0.0)

    def test_local_keeps_connections_home_while_children_are_idle(self):
        r = self.run_mode("local", 2)
        self.assertLess(r["away_share"], 0.05)
        self.assertLess(r["cross_share"], 0.01)

    def test_local_choice_follows_table(self):
        rng = random.Random(1)
        # received CPU, idle children per bucket (8 buckets, 2 nodes of
        # 4), the buckets allowed
        table = [
            (1, [0, 1, 0, 0, 1, 1, 1, 1], {1}),         # home has one
            (1, [0, 0, 0, 1, 1, 1, 1, 1], {3}),         # own node first
            (6, [1, 1, 0, 0, 0, 0, 0, 0], {0, 1}),      # then any node
            (6, [0] * 8, {6}),                          # none: stay home
            (0, [0, 2, 2, 0, 3, 0, 0, 0], {1, 2}),
        ]
        for received, idle, allowed in table:
            for _ in range(20):
                self.assertIn(bucketsim.local_choice(received, idle, 2, rng),
                              allowed, (received, idle))

    def test_local_borrows_from_its_own_node_first(self):
        r = self.run_mode("local", 6)
        self.assertGreater(r["away_share"], 0.01)
        self.assertLess(r["cross_share"], r["away_share"] / 2)

    def test_unpinned_children_cross_half_the_time_on_two_nodes(self):
        r = self.run_mode("hash", 12)
        self.assertAlmostEqual(r["cross_share"], 0.5, delta=0.05)

    def test_cross_cost_lengthens_service(self):
        near = bucketsim.simulate(buckets=8, workers=64, clients=96,
                                  requests=6000, warmup=600,
                                  steering="hash", nodes=2, cross_ms=0.0)
        far = bucketsim.simulate(buckets=8, workers=64, clients=96,
                                 requests=6000, warmup=600, steering="hash",
                                 nodes=2, cross_ms=5.0)
        self.assertGreater(far["p50"], near["p50"] + 1.0)


if __name__ == "__main__":
    unittest.main()
