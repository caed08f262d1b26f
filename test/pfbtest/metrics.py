# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Names and types in a Prometheus text exposition (the status module's
?prometheus, prometheus-apache-exporter's /metrics)."""

import re


def exported_metric_names(exposition):
    """Metric names in a text exposition: every sample's name and every
    # TYPE / # HELP line's."""
    names = set()
    for line in exposition.splitlines():
        m = re.match(r"#\s+(?:TYPE|HELP)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)", line)
        if m:
            names.add(m.group(1))
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{|\s)", line)
        if m:
            names.add(m.group(1))
    return names


def metric_families(exposition):
    """name -> type from the # TYPE lines of a text exposition."""
    families = {}
    for line in exposition.splitlines():
        m = re.match(r"#\s+TYPE\s+(\S+)\s+(\S+)", line)
        if m:
            families[m.group(1)] = m.group(2)
    return families
