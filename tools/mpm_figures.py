#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Prints the MPM's structural figures, from its sources and objects.

usage: mpm_figures.py [BUILD]     BUILD: where make put the objects
                                  (default build)

- pid writes: lines of server/mpm/prefork/**/*.c that assign a pid field
  (`->pid =` or `.pid =`);
- lines per source file of server/mpm/prefork/ and its folders, and the longest;
- lines of prefork.c that read `retained->children->slot`;
- file-scope mutable statics of prefork.c: every object declared `static`
  outside a function whose declarator is not itself const (a pointer to
  const data is mutable; a const pointer is not);
- global symbols defined across the MPM's objects (`nm -g
  --defined-only`), which the module's version script keeps out of the
  .so all the same.
"""

import glob
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPM = os.path.join(TOP, "server", "mpm", "prefork")


def strip_comments_and_strings(text):
    """The C text with comments, string and character literals blanked
    (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def top_level_statements(text):
    """Declarations at file scope, preprocessor lines dropped, function
    bodies skipped; an initializer or a struct body in braces is kept
    with its declaration."""
    lines = [l for l in text.split("\n") if not l.lstrip().startswith("#")]
    text = "\n".join(lines)
    stmts, cur, i, n = [], [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "{":
            head = "".join(cur)
            depth, j = 1, i + 1
            while j < n and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            if head.rstrip().endswith(")") and "=" not in head:
                cur = []                # a function's body
            else:
                cur.append(text[i:j])   # an initializer, a struct
            i = j
            continue
        if c == ";":
            stmts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    return [s.strip() for s in stmts if s.strip()]


def split_top(text, sep):
    """Splits at @a sep outside brackets, parentheses and braces."""
    parts, cur, depth = [], [], 0
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


def mutable_statics(path):
    """Names of the file-scope objects declared static and not const."""
    with open(path) as f:
        text = strip_comments_and_strings(f.read())
    names = []
    for stmt in top_level_statements(text):
        if not re.match(r"static\b", stmt):
            continue
        declarators = [split_top(d, "=")[0].strip()
                       for d in split_top(stmt, ",")]
        # A prototype: a parameter list after the first declarator's name
        # (a pointer to a function would read "(*name)").
        if re.search(r"\w\s*\(", declarators[0]) \
                and "(*" not in declarators[0]:
            continue
        base_const = re.search(r"\bconst\b", declarators[0].split("*")[0]
                               .rsplit(None, 1)[0])
        for decl in declarators:
            name = re.search(r"(\w+)\s*(\[[^\]]*\]\s*)*$", decl)
            if not name:
                continue
            if "*" in decl:
                # Mutable unless the pointer itself is const: "* const p".
                if re.match(r"\s*const\b", decl.rsplit("*", 1)[1]):
                    continue
            elif base_const:
                continue
            names.append(name.group(1))
    return names


def pid_writes():
    hits = []
    for path in sorted(glob.glob(os.path.join(MPM, "**", "*.c"), recursive=True)):
        with open(path) as f:
            for no, line in enumerate(f, 1):
                if re.search(r"(->|\.)pid\s*=[^=]", line):
                    hits.append("%s:%d: %s" % (os.path.basename(path), no,
                                               line.strip()))
    return hits


def line_counts():
    counts = {}
    for path in sorted(glob.glob(os.path.join(MPM, "**", "*.[ch]"), recursive=True)):
        with open(path) as f:
            counts[os.path.basename(path)] = sum(1 for _ in f)
    return counts


def global_symbols(build):
    objs = sorted(glob.glob(os.path.join(TOP, build, "server", "mpm",
                                         "prefork", "**", "*.o"),
                            recursive=True))
    if not objs:
        return None, {}
    out = subprocess.run(["nm", "-g", "--defined-only"] + objs,
                         capture_output=True, text=True, check=True).stdout
    per_file, total, current = {}, 0, None
    for line in out.splitlines():
        if line.endswith(".o:"):
            current = os.path.basename(line[:-1])
            per_file[current] = 0
        elif len(line.split()) == 3:
            per_file[current] += 1
            total += 1
    return total, per_file


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    hits = pid_writes()
    print("pid written on %d line(s) of server/mpm/prefork/**/*.c" % len(hits))
    for h in hits:
        print("    " + h)
    counts = line_counts()
    print("lines: prefork.c %d; over 1,000: %s" % (
        counts.get("prefork.c", 0),
        ", ".join("%s %d" % (k, v) for k, v in counts.items()
                  if v > 1000 and k.endswith(".c")) or "none"))
    with open(os.path.join(MPM, "prefork.c")) as f:
        slot_reads = sum(1 for l in f if "retained->children->slot" in l)
    print("lines of prefork.c reading retained->children->slot: %d"
          % slot_reads)
    statics = mutable_statics(os.path.join(MPM, "prefork.c"))
    print("file-scope mutable statics in prefork.c: %d (%s)"
          % (len(statics), ", ".join(statics)))
    total, per_file = global_symbols(build)
    if total is None:
        print("global symbols: not counted (no objects under %s)" % build)
    else:
        print("global symbols across the MPM's objects: %d (%s)" % (
            total, ", ".join("%s %d" % (k, v) for k, v in
                             sorted(per_file.items(), key=lambda kv: -kv[1])
                             if v)))


if __name__ == "__main__":
    main()
