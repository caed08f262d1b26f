#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The Prometheus rules in contrib/prometheus hold and are tested.

- `promtool check rules` accepts bucket-alerts.yml and `promtool test
  rules` passes bucket-alerts.test.yml;
- every alert has a test where it fires and one where it stays quiet, and
  every recording rule is tested or used by an alert;
- every alert has a summary, a description and a runbook_url that works
  as shipped, with no label to set: the runbook the Debian package
  installs (RUNBOOK_URL), at the anchor of a heading of docs/monitoring.md's
  "Alerts and what to do", which tools/runbook.py renders into that page
  (checked in the page it writes); nothing in the rules reads an external
  label, and no test sets one;
- every alert with a cause or reason label is tested firing for each case
  it is meant for (the rules file's own comments name them) and quiet on
  the near misses (docs/monitoring.md says which).

Ends with 'rules: N passed, N failed'.
"""

import os
import re
import subprocess
import sys

import yaml

import checklist

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RULES = os.path.join(TOP, "contrib", "prometheus", "bucket-alerts.yml")
TESTS = os.path.join(TOP, "contrib", "prometheus", "bucket-alerts.test.yml")
MONITORING = os.path.join(TOP, "docs", "monitoring.md")
RUNBOOK_TOOL = os.path.join(TOP, "tools", "runbook.py")
# Where libapache2-mod-bucket-status installs the runbook (debian/rules).
RUNBOOK_URL = ("file:///usr/share/doc/libapache2-mod-bucket-status/"
               "runbook.html")
# Labels that tell an alert's cases apart, and the values each must be
# tested firing with.
CASES = {"HttpdBucketStarvation": ("cause", {"imbalance", "saturation"}),
         "HttpdBucketSteeringFallback": ("mode_reason",
                                         {"ratio",
                                          "idle-steering-unavailable"}),
         "HttpdBucketDataUnavailable": ("reason", {"incompatible"})}


def github_anchor(heading):
    """The anchor GitHub (and most Markdown renderers) give a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def main():
    results = {}
    check = checklist.recorder(results)

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
        rules_text = f.read()
        rules = yaml.safe_load(rules_text)
    with open(TESTS) as f:
        tests = yaml.safe_load(f)
    with open(MONITORING) as f:
        text = f.read()
    alerts_section = re.search(r"^## Alerts and what to do\n(.*?)(?=^## |\Z)",
                               text, re.M | re.S)
    anchors = {github_anchor(m.group(1)) for m in
               re.finditer(r"^#+\s+(.*)$",
                           alerts_section.group(1) if alerts_section else "",
                           re.M)}
    check("monitoring_md_has_the_alerts_section", alerts_section)
    try:
        run = subprocess.run(["/usr/bin/python3", RUNBOOK_TOOL, MONITORING],
                             capture_output=True, text=True, timeout=60)
        rc, page, why = run.returncode, run.stdout, run.stderr
    except OSError as e:
        rc, page, why = 1, "", str(e)
    check("runbook_renders", rc == 0 and "</html>" in page,
          why + " (tools/runbook.py needs Debian's python3-markdown)")
    page_ids = set(re.findall(r'id="([^"]+)"', page))

    alerts, records = {}, {}
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                alerts[rule["alert"]] = rule
            else:
                records[rule["record"]] = rule
    firing, quiet, tested_exprs = set(), set(), []
    expected_urls, fired_cases, external = [], {}, []
    for case in tests["tests"]:
        if case.get("external_labels"):
            external.append(case["external_labels"])
        for t in case.get("alert_rule_test", []):
            (firing if t.get("exp_alerts") else quiet).add(t["alertname"])
            for a in t.get("exp_alerts") or []:
                expected_urls.append(
                    a.get("exp_annotations", {}).get("runbook_url", ""))
                label = CASES.get(t["alertname"], (None,))[0]
                if label:
                    fired_cases.setdefault(t["alertname"], set()).add(
                        a.get("exp_labels", {}).get(label))
        for t in case.get("promql_expr_test", []):
            tested_exprs.append(t["expr"])

    check("rules_have_alerts", alerts)
    check("rules_read_no_external_label", "$externalLabels" not in rules_text)
    check("tests_set_no_external_label", not external, "%r" % external)
    for name, rule in sorted(alerts.items()):
        check("%s_tested_firing" % name, name in firing)
        check("%s_tested_quiet" % name, name in quiet)
        if name in CASES:
            label, wanted = CASES[name]
            got = fired_cases.get(name, set())
            check("%s_tested_firing_for_each_%s" % (name, label),
                  wanted <= got, "tested: %s, wanted: %s"
                  % (sorted(got), sorted(wanted)))
        annotations = rule.get("annotations", {})
        check("%s_has_summary_and_description" % name,
              annotations.get("summary") and annotations.get("description"))
        url = annotations.get("runbook_url", "")
        m = re.fullmatch(re.escape(RUNBOOK_URL) + r"#([\w-]+)", url)
        check("%s_runbook_url_names_a_section" % name,
              m and m.group(1) in anchors,
              "%r: not %s#<a heading of docs/monitoring.md's alerts>"
              % (url, RUNBOOK_URL))
        check("%s_runbook_anchor_in_the_page" % name,
              m and m.group(1) in page_ids,
              "%r not among the runbook page's ids %s"
              % (url, sorted(page_ids)))
    check("tests_expect_the_shipped_runbook",
          expected_urls and all(u.startswith(RUNBOOK_URL + "#")
                                for u in expected_urls),
          "%r" % [u for u in expected_urls
                  if not u.startswith(RUNBOOK_URL)])
    for name, rule in sorted(records.items()):
        used = any(name in expr for expr in tested_exprs) or any(
            name in a["expr"] for a in alerts.values())
        check("%s_tested_or_alerted_on" % name, used)

    failed = sum(1 for ok in results.values() if not ok)
    print("rules: %d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
