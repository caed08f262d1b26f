# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Which lines of an httpd error log a test did not expect: the verdict
every server's log gets, the harness's private servers' and the system
apache2's the package tests start."""

import re

# Lines that mean a crash whatever their level: a child killed by a signal
# other than the ones the parent sends (httpd logs it at notice), and the
# parent's own fatal-signal handler.
CRASH_TAGS = frozenset({"AH00052", "AH00060"})
LEVEL = re.compile(r"^\[[^\]]*\] \[[^\]\s]*:(\w+)\]")
SERIOUS = frozenset({"warn", "error", "crit", "alert", "emerg"})
TAG = re.compile(r"\b(AH\d{5}|PFB\d{5})\b")


def unexpected_lines(log, expected_tags=()):
    """Lines of an error log's text at warn or above, crash lines
    (AH00052 ...) and lines not in the error log's format (a sanitizer or
    libc writing to stderr), unless they carry a tag in expected_tags."""
    allowed = set(expected_tags)
    bad = []
    for line in log.splitlines():
        if not line.strip():
            continue
        m = LEVEL.match(line)
        tags = set(TAG.findall(line))
        if m and m.group(1) not in SERIOUS and not tags & CRASH_TAGS:
            continue
        if tags & allowed:
            continue
        bad.append(line)
    return bad
