# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Waiting for a state, never for a fixed time."""

import time

# How long the harness waits for a state by default.  Generous: the tests
# run on loaded machines and under ASan; a wait ends as soon as its
# condition holds.
DEADLINE = 60


def wait_for(predicate, timeout=DEADLINE, interval=0.05):
    """Polls predicate until it returns something true, or timeout
    seconds passed; returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()
