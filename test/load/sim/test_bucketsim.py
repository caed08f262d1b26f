#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The scale model decides with the MPM's own rules: it calls
pf_decide_maintenance() in build/libpfpolicy.so through ctypes.  This
checks the model's side of that call (the ctypes structures, the spawn
ramp it keeps between cycles) against the table that the C unit tests
check too (test/unit/maintenance_cases.txt): if the model and the MPM
came to disagree on a state, one of the two would fail.

  python3 test/load/sim/test_bucketsim.py
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bucketsim  # noqa: E402

CASES = os.path.join(HERE, "..", "..", "unit", "maintenance_cases.txt")


def read_cases():
    rows = []
    with open(CASES) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            label, limits, occupied, rates, states, actions, after = \
                [field.strip() for field in line.split("|")]
            nb, mn, mx, workers = map(int, limits.split())
            flat = list(map(int, states.split()))
            acts = list(map(int, actions.split()))
            rows.append({
                "label": label, "nb": nb, "min": mn, "max": mx,
                "workers": workers, "occupied": int(occupied),
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
                                          row["workers"])
                policy.rate.value = row["ramp"]
                self.assertEqual(policy.decide(row["states"],
                                               row["occupied"]),
                                 row["actions"])
                self.assertEqual(policy.ramp(), row["after"])

    def test_simulation_spawns_through_the_policy(self):
        """A run that starts with too few children must grow them by the
        policy's ramp, and keep every bucket served."""
        r = bucketsim.simulate(buckets=4, workers=32, clients=48,
                               requests=5000, warmup=500, start_children=4)
        self.assertGreater(sum(r["children_end"]), 4)
        self.assertTrue(all(c >= 1 for c in r["children_end"]))
        self.assertGreater(r["rps"], 0)


if __name__ == "__main__":
    unittest.main()
