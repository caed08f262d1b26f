#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""docs/log-messages.md lists every log message of the code, and only those.

Every `ap_log_*error` call with a PFBLOGNO(n) tag in server/, modules/ and
test/modules/ must have one row in the catalogue's tables, in tag order,
whose level and message are the call's: the level as httpd writes it
(emerg, alert, crit, error, warn, notice, info, debug; a call that picks
between two levels lists both), the message as its format string with
APR's format macros written out (APR_PID_T_FMT as d, ...).  A catalogue
row whose tag no longer exists fails, and so does a tag listed twice or
used by two calls (one tag, one message).  The table of httpd's AH tags
maps each (once) to a PFB tag a log call has, or to none.

  python3 tools/check/check_log_catalogue.py
      check; ends 'log catalogue: ...'
  python3 tools/check/check_log_catalogue.py --rows
      print a row for each tag the catalogue lacks or gets wrong, meaning
      and action to fill in
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SOURCES = ["server", "modules", "test/modules"]
CATALOGUE = os.path.join(ROOT, "docs", "log-messages.md")

LEVELS = {"APLOG_EMERG": "emerg", "APLOG_ALERT": "alert",
          "APLOG_CRIT": "crit", "APLOG_ERR": "error",
          "APLOG_WARNING": "warn", "APLOG_NOTICE": "notice",
          "APLOG_INFO": "info", "APLOG_DEBUG": "debug"}
ORDER = list(LEVELS.values())
# Macros that format strings splice in, as the catalogue writes them.
MACROS = {"APR_PID_T_FMT": "d", "APR_SIZE_T_FMT": "lu",
          "APR_OFF_T_FMT": "ld", "APR_TIME_T_FMT": "ld",
          "APR_INT64_T_FMT": "ld", "APR_UINT64_T_FMT": "lu",
          "AP_SIG_GRACEFUL_STOP_STRING": "SIGWINCH"}
# A row of the table of httpd's tags: AH tag(s), httpd's message, and this
# MPM's tag (or "none").
AH_ROW = re.compile(r"^\|\s*(AH\d{5}(?:,\s*AH\d{5})*)\s*\|\s*`[^`]*`\s*\|"
                    r"\s*(PFB(\d{5})|none)\b[^|]*\|\s*$")
ROW = re.compile(r"^\|\s*PFB(\d{5})\s*\|([^|]*)\|\s*`([^`]*)`\s*\|([^|]*)\|"
                 r"([^|]*)\|\s*$")


def call_arguments(text, start):
    """The top-level arguments of the call whose '(' ends at start."""
    args, current, depth, i = [], "", 1, start
    while depth:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while text[j] != c:
                j += 2 if text[j] == "\\" else 1
            current += text[i:j + 1]
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                break
        if c == "," and depth == 1:
            args.append(current.strip())
            current = ""
        else:
            current += c
        i += 1
    args.append(current.strip())
    return args


def format_string(arg, where):
    """The C string literals and format macros of an argument, joined."""
    out = ""
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"|(\w+)', arg):
        if m.group(1) is not None:
            out += bytes(m.group(1), "utf-8").decode("unicode_escape")
        elif m.group(2) in MACROS:
            out += MACROS[m.group(2)]
        elif m.group(2) != "PFBLOGNO" and not m.group(2).isdigit():
            raise ValueError("%s: %s in a format string: add it to MACROS"
                             % (where, m.group(2)))
    return out


def code_messages():
    """{tag: [(where, levels, message)]} of every tagged log call."""
    found = {}
    for top in SOURCES:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if not name.endswith(".c"):
                    continue
                path = os.path.join(dirpath, name)
                text = open(path).read()
                for m in re.finditer(r"\bap_log_(?:r|c|p|)error\s*\(", text):
                    where = "%s:%d" % (os.path.relpath(path, ROOT),
                                       text.count("\n", 0, m.start()) + 1)
                    args = call_arguments(text, m.end())
                    if len(args) < 5:
                        continue
                    tag = re.search(r"PFBLOGNO\((\d+)\)", args[4])
                    if not tag:
                        continue        # check_log_tags.py reports it
                    levels = sorted({LEVELS[w] for w in re.findall(
                        r"APLOG_[A-Z]+", args[1]) if w in LEVELS},
                        key=ORDER.index)
                    message = format_string(
                        args[4][tag.end():], where).strip()
                    found.setdefault(tag.group(1), []).append(
                        (where, levels, message))
    return found


def catalogue_rows():
    """[(line number, tag, levels, message, meaning, action)]."""
    rows = []
    with open(CATALOGUE) as f:
        for n, line in enumerate(f, 1):
            m = ROW.match(line.rstrip("\n"))
            if m:
                levels = [w for w in re.split(r"[\s,/]+|\bor\b",
                                              m.group(2).strip()) if w]
                rows.append((n, m.group(1), levels, m.group(3),
                             m.group(4).strip(), m.group(5).strip()))
            elif re.match(r"^\|\s*PFB", line):
                rows.append((n, None, [], line.strip(), "", ""))
    return rows


def ah_rows():
    """[(line number, [AH tags], PFB tag or None, the line)] of the table
    of httpd's tags."""
    rows = []
    with open(CATALOGUE) as f:
        for n, line in enumerate(f, 1):
            if not re.match(r"^\|\s*AH\d", line):
                continue
            m = AH_ROW.match(line.rstrip("\n"))
            rows.append((n, re.findall(r"AH\d{5}", m.group(1)) if m else [],
                         m.group(3) if m else None, line.strip()))
    return rows


def stub_row(tag, levels, message):
    return "| PFB%s | %s | `%s` | (meaning) | (what the admin does) |" % (
        tag, ", ".join(levels), message)


def main(argv):
    code = code_messages()
    rows = catalogue_rows()
    problems = []
    listed = {}
    previous = None
    for n, tag, levels, message, meaning, action in rows:
        where = "docs/log-messages.md:%d" % n
        if tag is None:
            problems.append("%s: not a row of five cells (tag, level, "
                            "`message`, meaning, action): %s" % (where,
                                                                 message))
            continue
        if tag in listed:
            problems.append("%s: PFB%s listed twice (also line %d)"
                            % (where, tag, listed[tag]))
        listed[tag] = n
        if previous is not None and tag < previous:
            problems.append("%s: PFB%s after PFB%s: rows go in tag order"
                            % (where, tag, previous))
        previous = tag
        if not meaning or not action:
            problems.append("%s: PFB%s needs its meaning and what the admin "
                            "does" % (where, tag))
        if tag not in code:
            problems.append("%s: PFB%s is in no log call any more"
                            % (where, tag))
            continue
        calls = code[tag]
        if len(calls) == 1:
            _, code_levels, code_message = calls[0]
            if levels != code_levels:
                problems.append("%s: PFB%s level %s, the code logs at %s"
                                % (where, tag, ", ".join(levels),
                                   ", ".join(code_levels)))
            if message != code_message:
                problems.append("%s: PFB%s message differs from the code's:"
                                "\n    catalogue: %s\n    code:      %s"
                                % (where, tag, message, code_message))
    wrong = set()
    for tag, calls in sorted(code.items()):
        if len(calls) > 1:
            problems.append("PFB%s is used by %d log calls (%s): one tag, "
                            "one message" % (tag, len(calls), ", ".join(
                                w for w, _, _ in calls)))
        if tag not in listed:
            problems.append("%s: PFB%s is missing from docs/log-messages.md"
                            % (calls[0][0], tag))
            wrong.add(tag)
    # The table of httpd's tags: each AH tag once, each PFB tag one the
    # code logs, and the common events there (AH00161 is what admins grep
    # for first).
    seen_ah = {}
    mapped = {}
    for n, ah_tags, pfb, line in ah_rows():
        where = "docs/log-messages.md:%d" % n
        if not ah_tags:
            problems.append("%s: not a row of httpd's tag, `message` and "
                            "this MPM's tag or none: %s" % (where, line))
            continue
        for ah in ah_tags:
            if ah in seen_ah:
                problems.append("%s: %s listed twice (also line %d)"
                                % (where, ah, seen_ah[ah]))
            seen_ah[ah] = n
            mapped[ah] = pfb
        if pfb is not None and pfb not in code:
            problems.append("%s: %s maps to PFB%s, which no log call has"
                            % (where, ", ".join(ah_tags), pfb))
    for ah, pfb in (("AH00161", "00010"), ("AH00169", "00014"),
                    ("AH00171", "00019"), ("AH00163", "00017")):
        if mapped.get(ah) != pfb:
            problems.append("docs/log-messages.md: %s should map to PFB%s "
                            "(got %s)" % (ah, pfb, mapped.get(ah)))
    for p in problems:
        print(p)
        m = re.search(r"PFB(\d{5}) (level|message)", p)
        if m:
            wrong.add(m.group(1))
    if "--rows" in argv:
        for tag in sorted(wrong):
            _, levels, message = code[tag][0]
            print(stub_row(tag, levels, message))
    print("log catalogue: %d tags in the code, %d rows, %d of httpd's tags "
          "mapped, %d problems" % (len(code), len(listed), len(seen_ah),
                                   len(problems)))
    return 1 if problems or not code else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
