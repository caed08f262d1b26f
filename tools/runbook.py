#!/usr/bin/python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Writes the alerts' runbook: the "Alerts and what to do" section of
docs/monitoring.md as one HTML page, with an anchor per alert.

  /usr/bin/python3 tools/runbook.py [docs/monitoring.md] > runbook.html

The Debian package libapache2-mod-bucket-status installs the page as
/usr/share/doc/libapache2-mod-bucket-status/runbook.html, where every
alert's runbook_url in contrib/prometheus/bucket-alerts.yml points
(dh_compress leaves HTML uncompressed, so the anchors open as they are).
Each heading's anchor is the one GitHub gives it (HttpdBucketStarvation:
#httpdbucketstarvation), so the rule file's anchors name the same
sections in the source and in the package.  Links to other documents of
the source tree, which the package does not ship beside the page, become
plain text; links within the section and absolute ones stay.

Needs Debian's python3-markdown (run it with /usr/bin/python3).
"""

import html
import os
import re
import sys

import markdown

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = "Alerts and what to do"
TITLE = "mod_bucket_status: alerts and what to do"


def section(text, title):
    """The '## title' section of a Markdown text, heading included."""
    m = re.search(r"^## %s\n.*?(?=^## |\Z)" % re.escape(title), text,
                  re.M | re.S)
    if not m:
        raise SystemExit("no '## %s' section" % title)
    return m.group(0)


def github_anchor(heading):
    """The anchor GitHub gives a heading (as tools/check/check_rules.py
    does)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def local_links_as_text(text):
    """[words](other.md#x) -> words; in-page and absolute links stay."""
    def keep_or_drop(m):
        target = m.group(2)
        if target.startswith("#") or re.match(r"[a-z]+:", target):
            return m.group(0)
        return m.group(1)
    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", keep_or_drop, text)


def render(source_text):
    body = markdown.markdown(
        local_links_as_text(section(source_text, SECTION)),
        extensions=["toc", "tables", "fenced_code"],
        extension_configs={"toc": {"slugify": lambda value, sep:
                                   github_anchor(value)}})
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
            "<meta charset=\"utf-8\"/>\n<title>%s</title>\n"
            "<style>body { font-family: sans-serif; max-width: 50em; "
            "margin: 1em auto; } code { font-size: 95%%; }</style>\n"
            "</head>\n<body>\n<h1>%s</h1>\n<p>The runbook of the alerts in "
            "bucket-alerts.yml (libapache2-mod-bucket-status's examples), "
            "from docs/monitoring.md of the source.</p>\n%s\n</body>\n"
            "</html>\n" % (html.escape(TITLE), html.escape(TITLE), body))


def main(argv):
    source = argv[0] if argv else os.path.join(TOP, "docs", "monitoring.md")
    with open(source, encoding="utf-8") as f:
        sys.stdout.write(render(f.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
