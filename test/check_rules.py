#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The Prometheus rules in contrib/prometheus hold and are tested.

- `promtool check rules` accepts bucket-alerts.yml and `promtool test
  rules` passes bucket-alerts.test.yml;
- every alert has a test where it fires and one where it stays quiet, and
  every recording rule is tested or used by an alert;
- every alert has a summary, a description and a runbook_url made of the
  operator's base (the external label runbook_base) and a section of
  monitoring.md which exists; every test group sets an absolute base, and
  every runbook_url a test expects is absolute.

Ends with 'rules: N passed, N failed'.
"""

import os
import re
import subprocess
import sys

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(TOP, "contrib", "prometheus", "bucket-alerts.yml")
TESTS = os.path.join(TOP, "contrib", "prometheus", "bucket-alerts.test.yml")
MONITORING = os.path.join(TOP, "docs", "monitoring.md")


def github_anchor(heading):
    """The anchor GitHub (and most Markdown renderers) give a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def main():
    results = {}

    def check(label, ok, detail=""):
        results[label] = bool(ok)
        print("%s %s%s" % ("ok  " if ok else "FAIL", label,
                           (": " + detail) if detail and not ok else ""))

    for argv in (["promtool", "check", "rules", RULES],
                 ["promtool", "test", "rules", TESTS]):
        try:
            run = subprocess.run(argv, capture_output=True, text=True,
                                 timeout=120, cwd=os.path.dirname(RULES))
            ok, out = run.returncode == 0, run.stdout + run.stderr
        except FileNotFoundError:
            ok, out = False, "promtool missing: apt-get install prometheus"
        check(" ".join(argv[:3]), ok, out)

    with open(RULES) as f:
        rules = yaml.safe_load(f)
    with open(TESTS) as f:
        tests = yaml.safe_load(f)
    with open(MONITORING) as f:
        anchors = {github_anchor(m.group(1)) for m in
                   re.finditer(r"^#+\s+(.*)$", f.read(), re.M)}

    alerts, records = {}, {}
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                alerts[rule["alert"]] = rule
            else:
                records[rule["record"]] = rule
    firing, quiet, tested_exprs = set(), set(), []
    expected_urls, bases = [], []
    for case in tests["tests"]:
        bases.append(case.get("external_labels", {}).get("runbook_base", ""))
        for t in case.get("alert_rule_test", []):
            (firing if t.get("exp_alerts") else quiet).add(t["alertname"])
            for a in t.get("exp_alerts") or []:
                expected_urls.append(
                    a.get("exp_annotations", {}).get("runbook_url", ""))
        for t in case.get("promql_expr_test", []):
            tested_exprs.append(t["expr"])

    check("rules_have_alerts", alerts)
    for name, rule in sorted(alerts.items()):
        check("%s_tested_firing" % name, name in firing)
        check("%s_tested_quiet" % name, name in quiet)
        annotations = rule.get("annotations", {})
        check("%s_has_summary_and_description" % name,
              annotations.get("summary") and annotations.get("description"))
        url = annotations.get("runbook_url", "")
        m = re.fullmatch(r"\{\{ \$externalLabels\.runbook_base \}\}"
                         r"/monitoring\.md#([\w-]+)", url)
        check("%s_runbook_url_names_a_section" % name,
              m and m.group(1) in anchors,
              "%r: not {{ $externalLabels.runbook_base }}/monitoring.md#"
              "<a heading of docs/monitoring.md>" % url)
    check("tests_set_an_absolute_runbook_base",
          bases and all(re.match(r"https?://", b) for b in bases),
          "a test group without external_labels.runbook_base: %r" % bases)
    check("tests_expect_absolute_runbook_urls",
          expected_urls and all(re.match(r"https?://[^/]+/.*monitoring\.md#",
                                         u) for u in expected_urls),
          "%r" % [u for u in expected_urls if not u.startswith("http")])
    for name, rule in sorted(records.items()):
        used = any(name in expr for expr in tested_exprs) or any(
            name in a["expr"] for a in alerts.values())
        check("%s_tested_or_alerted_on" % name, used)

    failed = sum(1 for ok in results.values() if not ok)
    print("rules: %d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
