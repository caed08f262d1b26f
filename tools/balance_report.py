#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Prints the bucket balance report from mod_bucket_status's JSON.

usage: balance_report.py URL      e.g. http://127.0.0.1:8080/bucket-status
       balance_report.py --save URL FILE
                                  keeps the server's JSON in FILE
       balance_report.py --compare TITLE FILE TITLE FILE
                                  two saved reports side by side (the
                                  Quick start's demo)
"""

import json
import sys
import urllib.request

COLUMN = 60         # the width of one report beside another


def fetch(url):
    with urllib.request.urlopen(url + "?json", timeout=10) as r:
        return json.load(r)


def steering_counts(doc):
    """(kept, moved) over every bucket, or None without steering figures."""
    if not all("steering" in b for b in doc["buckets"]):
        return None
    return (sum(b["steering"]["kept"] for b in doc["buckets"]),
            sum(b["steering"]["moved"] for b in doc["buckets"]))


def report_lines(doc, bar_width=30):
    """The report as lines of text."""
    if not doc["available"]:
        return [doc["reason"]]
    cpus = doc["cpus"]
    lines = ["mode %s (%s), SO_REUSEPORT %s" % (
        doc["mode"], doc["mode_reason"],
        {True: "works", False: "refused", None: "not needed"}[
            doc["so_reuseport"]]),
             "%d bucket(s), %d per Listen; usable CPUs %d (online %d, "
             "affinity %d, quota %d)" % (
                 doc["bucket_count"], doc["buckets_per_listen"],
                 cpus["usable"], cpus["online"], cpus["affinity"],
                 cpus["quota"])]
    steering = doc.get("steering", "hash")
    line = "steering %s" % steering
    fallback = doc.get("steering_fallback", "none")
    if fallback == "refused":
        line += " (%s asked for and refused: see PFB00043 or PFB00150 " \
            "in the error log)" % doc["steering_wanted"]
    elif fallback != "none":
        line += " (%s asked for: nothing to steer with one bucket per " \
            "Listen)" % doc["steering_wanted"]
    lines.append(line)
    counts = steering_counts(doc)
    if counts is not None:
        lines.append("steering: %d kept where the %s sent them, %d moved "
                     "to a bucket with an idle child"
                     % (counts[0], "receiving CPU" if steering == "local"
                        else "hash", counts[1]))
    total = sum(b["accepted"] for b in doc["buckets"]) or 1
    widest = max([b["accepted"] for b in doc["buckets"]] + [1])
    lines.append("bucket children idle busy  accepted  share")
    for b in doc["buckets"]:
        c = b["children"]
        lines.append("%-6d %8d %4d %4d %9d %5.1f%%  %s"
                     % (b["id"], c["total"], c["idle"], c["busy"],
                        b["accepted"], 100.0 * b["accepted"] / total,
                        "#" * int(round(float(bar_width) * b["accepted"]
                                        / widest))))
    for over in ("buckets", "children"):
        s = doc["balance"][over]
        lines.append("over %s (n=%d): max/mean %.2f, Jain %.4f"
                     % (over, s["n"], s["max_over_mean"], s["jain"]))
    return lines


def report(url):
    doc = fetch(url)
    for line in report_lines(doc):
        print(line)
    if doc["available"]:
        print("page: %s   (also ?auto, ?json, ?prometheus, ?refresh=N)"
              % url)
    return 0 if doc["available"] else 1


def save(url, path):
    doc = fetch(url)
    with open(path, "w") as f:
        json.dump(doc, f)
    return 0


def compare(title_a, path_a, title_b, path_b):
    """Both reports, each in a column of its own."""
    columns = []
    for title, path in ((title_a, path_a), (title_b, path_b)):
        with open(path) as f:
            doc = json.load(f)
        lines = [title, "-" * min(len(title), COLUMN)]
        for line in report_lines(doc, bar_width=12):
            while len(line) > COLUMN:
                cut = line.rfind(" ", 0, COLUMN)
                cut = cut if cut > 0 else COLUMN
                lines.append(line[:cut])
                line = "  " + line[cut:].lstrip()
            lines.append(line)
        columns.append(lines)
    height = max(len(c) for c in columns)
    for i in range(height):
        left = columns[0][i] if i < len(columns[0]) else ""
        right = columns[1][i] if i < len(columns[1]) else ""
        print(("%-" + str(COLUMN) + "s | %s") % (left, right))
    return 0


def main(argv):
    if len(argv) == 1 and not argv[0].startswith("-"):
        return report(argv[0])
    if len(argv) == 3 and argv[0] == "--save":
        return save(argv[1], argv[2])
    if len(argv) == 5 and argv[0] == "--compare":
        return compare(*argv[1:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
