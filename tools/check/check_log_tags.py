#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Every log call in this project's C carries its own PFBLOGNO(n) tag:
no empty tag, no number used twice, every number below next-number."""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SOURCES = ["server", "modules", "test/modules"]


def main():
    with open(os.path.join(ROOT, "docs/log-message-tags/next-number")) as f:
        next_number = int(f.read().strip())
    seen = {}
    problems = []
    calls = 0
    for top in SOURCES:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith(".c"):
                    continue
                path = os.path.join(dirpath, name)
                text = open(path).read()
                for m in re.finditer(r"\bap_log_(?:r|c|p|)error\s*\(", text):
                    calls += 1
                    window = text[m.end():m.end() + 400]
                    tag = re.search(r"PFBLOGNO\((\d*)\)", window)
                    semicolon = window.find(";")
                    if not tag or (0 <= semicolon < tag.start()):
                        line = text.count("\n", 0, m.start()) + 1
                        problems.append("%s:%d: log call without PFBLOGNO"
                                        % (path, line))
                for m in re.finditer(r"PFBLOGNO\((\d*)\)", text):
                    line = text.count("\n", 0, m.start()) + 1
                    where = "%s:%d" % (os.path.relpath(path, ROOT), line)
                    if not m.group(1):
                        problems.append("%s: empty PFBLOGNO()" % where)
                        continue
                    number = int(m.group(1))
                    if len(m.group(1)) != 5:
                        problems.append("%s: tag %s is not 5 digits"
                                        % (where, m.group(1)))
                    if number >= next_number:
                        problems.append("%s: tag %05d >= next-number %d"
                                        % (where, number, next_number))
                    if number in seen:
                        problems.append("%s: tag %05d already used at %s"
                                        % (where, number, seen[number]))
                    seen[number] = where
    for p in problems:
        print(p)
    print("log tags: %d log calls, %d tags, %d problems"
          % (calls, len(seen), len(problems)))
    return 1 if problems or not seen else 0


if __name__ == "__main__":
    sys.exit(main())
