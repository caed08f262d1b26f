#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Prints the bucket balance report from mod_bucket_status's JSON.

usage: balance_report.py URL      e.g. http://127.0.0.1:8080/bucket-status
"""

import json
import sys
import urllib.request


def main(url):
    with urllib.request.urlopen(url + "?json", timeout=10) as r:
        doc = json.load(r)
    if not doc["available"]:
        print(doc["reason"])
        return 1
    cpus = doc["cpus"]
    print("mode %s (%s), SO_REUSEPORT %s, %d bucket(s), %d per Listen; "
          "usable CPUs %d (online %d, affinity %d, quota %d)"
          % (doc["mode"], doc["mode_reason"],
             "yes" if doc["so_reuseport"] else "no", doc["bucket_count"],
             doc["buckets_per_listen"], cpus["usable"], cpus["online"],
             cpus["affinity"], cpus["quota"]))
    steering = doc.get("steering", "hash")
    line = "steering %s" % steering
    fallback = doc.get("steering_fallback", "none")
    if fallback == "refused":
        line += " (%s asked for and refused: see PFB00043 in the error " \
            "log)" % doc["steering_wanted"]
    elif fallback != "none":
        line += " (%s asked for: nothing to steer with one bucket per " \
            "Listen)" % doc["steering_wanted"]
    if steering == "idle":
        kept = sum(b["steering"]["kept"] for b in doc["buckets"])
        moved = sum(b["steering"]["moved"] for b in doc["buckets"])
        line += "; %d connection(s) kept where the hash sent them, %d " \
            "moved to a bucket with an idle child" % (kept, moved)
    print(line)
    total = sum(b["accepted"] for b in doc["buckets"]) or 1
    widest = max(b["accepted"] for b in doc["buckets"]) or 1
    print("  bucket  listener               children idle busy  accepted"
          "  share  last10s")
    for b in doc["buckets"]:
        c = b["children"]
        print("  %-6d  %-22s %8d %4d %4d %9d %5.1f%% %8d  %s"
              % (b["id"], b["listener"], c["total"], c["idle"], c["busy"],
                 b["accepted"], 100.0 * b["accepted"] / total,
                 b["accepted_last_10s"],
                 "#" * int(round(30.0 * b["accepted"] / widest))))
    for over in ("buckets", "children"):
        s = doc["balance"][over]
        print("  balance over %-8s (n=%d): max/mean %.2f  min/mean %.2f  "
              "CV %.3f  Jain %.4f" % (over, s["n"], s["max_over_mean"],
                                      s["min_over_mean"], s["cv"], s["jain"]))
    print("  page: %s   (also ?auto, ?json, ?prometheus, ?refresh=N)" % url)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
