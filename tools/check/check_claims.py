#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Every performance figure a document quotes is in the claims table, and
every row of the claims table comes from a folder that holds it.

The claims table is the table under "## Claims" in docs/benchmarks.md.
Each row names its figures, the folder under bench/results/ they come
from, the commit that made the folder, its pairs or rounds and the
interval.  A row's figures are either listed (`88; 116`), each of which
must appear in one of the folder's text files (report.md, other .md,
.txt, .csv, plain or in the folder's raw.tar.xz) and is held only in the
files the row says quote it ("quoted in": README, here for
docs/benchmarks.md, a name under docs/, or a path), or `§ Heading`:
every figure in that section of docs/benchmarks.md or docs/two-socket.md,
each of which must appear in the folder's files (a table copied from the
folder's report).  The row's commit must be the one
the folder records (results.json's host_state, or a "commit HASH" line of
its report).

Scanned: README.md, docs/*.md, docs/manual/ (XML and Markdown), the
packages' README.Debian files and the shipped conffile
(mpm_prefork_buckets.conf).  A figure is a number in prose, outside code
spans, code blocks, links' targets, versions, dates, log tags and
directive values, that is either a decimal (9.3, 3.98) or an integer with
a unit of performance (req/s, µs, ns, ms, %, ×, times, system calls,
wake-ups, sleeps, switches, faults, IPIs, halts), or joined to one by
"and", "to", "–", "/" or "or" ("88 and 116 ns").  Each must be held by a
claims row, or declared a setting, not a measurement, in
tools/check/claims_parameters.txt (a phrase of the file's that contains
it, and why), or listed in tools/check/claims_pending.txt (a figure in a
file another change owns, shown and not failed, until that change
removes it).  An
entry of either list that matches nothing fails: the lists only shrink;
an entry whose file is not in the tree (renamed or removed by another
change) is shown as gone, so that two branches merge.

tools/check/claims_pending.txt exists only while a figure is pending:
without it, none is.  It holds figures in files another change owns that
the claims table does not hold, shown here and not failed until that
change removes them or a folder made at a commit holds them.  One entry a
line, tab-separated: the file, the figure as its number, why (lines
starting with # are comments).  An entry that matches no figure fails, so
the list only shrinks; remove the file with its last entry.

Ends with 'claims: N passed, N failed'.
"""

import glob
import gzip
import json
import os
import re
import sys

import checklist

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# The suite's pack.py: a result folder's files, plain or packed.
sys.path.insert(0, os.path.join(TOP, "bench"))
import pack  # noqa: E402
BENCH = os.path.join(TOP, "bench", "results")
TABLE_DOC = os.path.join(TOP, "docs", "benchmarks.md")
SECTION_DOCS = (os.path.join(TOP, "docs", "benchmarks.md"),
                os.path.join(TOP, "docs", "two-socket.md"))
SCANNED = ("README.md", "docs/*.md", "docs/manual/*.md",
           "docs/manual/mod/*.xml", "docs/manual/mod/*.md",
           "debian/*README.Debian", "server/mpm/prefork/*.conf")
PARAMETERS = os.path.join(TOP, "tools", "check", "claims_parameters.txt")
# How a claims row names the files that quote it ("quoted in"): these
# short names, else docs/NAME, else a path from the top.
QUOTED = {"here": "docs/benchmarks.md", "README": "README.md",
          "README.md": "README.md"}
# A folder's text files, whose figures a row may hold.
TEXTS = (".md", ".txt", ".csv")
# A claims row's commit for a folder that names none (preliminary).
NONE_RECORDED = "none recorded"
# Figures pending in others' files (the docstring says the format); no
# file, none pending.
PENDING = os.path.join(TOP, "tools", "check", "claims_pending.txt")

# A number, its thousands apart or not ("119 676"), not glued to a word
# (p99, php8.2) or to another number.
NUMBER = r"(?<![\w.])[-−]?\d+(?:[  ,]\d{3}(?!\d))*(?:\.\d+)?"
UNITS = (r"k? ?req/s|µs|us\b|ns\b|ms\b|%|×|times\b|system calls?|calls?\b"
         r"|wake-ups?|sleeps?\b|switches\b|faults?\b|IPIs?\b|halts?\b")
JOIN = r"\s*(?:and|to|–|-|/|or|,)\s*"
FIGURE_UNIT = re.compile(r"(%s)\s?(?:%s)" % (NUMBER, UNITS))
ANY_NUMBER = re.compile(NUMBER)
# Not figures: versions and releases, tags, dates, directive values.
NOT_FIGURES = (
    r"\b\d+\.\d+\.\d+(?:\.\d+)*\b",                 # 2.4.62, 0.0.4
    r"(?:Linux|kernel|httpd|Apache|apache2|nginx|PHP|php|Debian|OpenSSL|"
    r"Python|libbpf|Check|clang|wrk|version|release|releases|Lua|Ubuntu|"
    r"gcc|autoconf|APR|HTTP)[ /]\d+(?:\.\d+)*",
    r"\b(?:PFB|AH)\d+\b",                            # log tags
    r"\b\d{4}-\d{2}-\d{2}\b|\b20\d{6}\b",           # dates, folder stamps
    r"\b[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+\s+\d+(?:\.\d+)?",  # Directive 150
    r"\bRFC\s?\d+|\bCVE-\d+-\d+",
    r"\b\d+(?:\.\d+)?\s?(?:GiB|MiB|KiB|GB|MB|KB|kB)\b",
    r"[A-Za-z]\d+\.\d+",                            # php8.2
    r"\(\d+\.\d+(?:\.\d+)*\)",                    # `exporter` (0.12)
    r"\d+\.\d+(?=\s+(?:or later|or newer|and later|onwards))",
)
# A kernel release: 2.6 to 6.x, in a sentence or a table that names Linux
# or the kernel, and followed by no unit.
KERNEL = re.compile(r"^[2-6]\.\d{1,2}$")
KERNEL_WORDS = re.compile(r"Linux|[Kk]ernels?\b|release")


def normalize(text):
    """A figure's number as the files write it: no group separators, an
    ASCII minus."""
    text = text.replace("−", "-")
    return re.sub(r"(?<=\d)[  ,](?=\d{3}\b)", "", text)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def prose(text, path):
    """The text with code, link targets and XML markup blanked (same
    length, so offsets and lines stay)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    if path.endswith(".xml"):
        text = re.sub(r"<example>.*?</example>|<highlight.*?</highlight>"
                      r"|<code>.*?</code>", blank, text, flags=re.S)
        text = re.sub(r"<[^>]+>", blank, text)
    text = re.sub(r'"[^"\n]{1,12}"', blank, text)     # quoted junk: "8x"
    text = re.sub(r"```.*?```", blank, text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", blank, text)
    text = re.sub(r"\]\([^)]*\)", blank, text)
    text = re.sub(r"https?://\S+", blank, text)
    for pattern in NOT_FIGURES:
        text = re.sub(pattern, blank, text)
    return text


def figures(text, path):
    """[(line number, figure as written, normalized number)]."""
    clean = prose(text, path)
    found = {}
    for m in FIGURE_UNIT.finditer(clean):
        found[m.start(1)] = m.group(1)
        # Numbers joined to it before ("88 and 116 ns", "0.38 to 0.58 ×").
        start = m.start(1)
        while True:
            before = re.search(r"(%s)%s$" % (NUMBER, JOIN), clean[:start])
            if not before:
                break
            found[before.start(1)] = before.group(1)
            start = before.start(1)
    for m in ANY_NUMBER.finditer(clean):
        if "." in m.group(0) and m.start() not in found:
            found[m.start()] = m.group(0)
    out = []
    for offset, fig in sorted(found.items()):
        if is_release(text, clean, offset, fig):
            continue
        line = clean.count("\n", 0, offset) + 1
        out.append((line, fig.strip(), normalize(fig.strip()).lstrip("-")))
    return out


def is_release(text, clean, offset, fig):
    """Whether a number is a kernel release: its shape (2.6 to 6.x), no
    unit after it, and Linux or the kernel named in its sentence, or in
    the header of the table it sits in (text: the file's own words)."""
    if not KERNEL.match(fig.strip()):
        return False
    after = clean[offset + len(fig):offset + len(fig) + 12]
    if re.match(r"\s?(?:%s)" % UNITS, after):
        return False
    start = text.rfind("\n\n", 0, offset)
    sentence = text[max(start, offset - 300):offset]
    sentence = sentence[max(sentence.rfind(". "), 0):]
    if KERNEL_WORDS.search(sentence):
        return True
    line_start = text.rfind("\n", 0, offset) + 1
    if text[line_start:line_start + 1] == "|":
        table = text.rfind("\n\n", 0, offset)
        header = text[table:text.find("\n", table + 2)]
        return bool(KERNEL_WORDS.search(header))
    return False


def sections(path):
    """{heading text: (first line, last line)} of a Markdown file."""
    lines = read(path).splitlines()
    heads = [(i + 1, l.lstrip("#").strip()) for i, l in enumerate(lines)
             if re.match(r"#{1,4} ", l)]
    out = {}
    for n, (line, title) in enumerate(heads):
        end = heads[n + 1][0] - 1 if n + 1 < len(heads) else len(lines)
        out[title] = (line, end)
    return out


def claims_rows():
    """The claims table's rows: [{claim, figures, folder, commit, pairs,
    interval, quoted}] (figures: [str] or a section title)."""
    text = read(TABLE_DOC)
    m = re.search(r"^## Claims\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        return None
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 7 or \
                cells[0] in ("claim", "") or set(cells[0]) <= set("-"):
            continue
        figs = cells[1]
        section = figs[1:].strip() if figs.startswith("§") else None
        files = []
        for name in re.split(r"[,;]\s*", cells[6]):
            name = name.strip().strip("`")
            if name:
                files.append(QUOTED.get(name, name if "/" in name
                                        else "docs/" + name))
        rows.append({"claim": cells[0], "files": files,
                     "figures": section or [f.strip() for f in
                                            figs.split(";") if f.strip()],
                     "folder": re.sub(r"[\[\]`]|\(.*?\)", "", cells[2])
                     .strip(),
                     "commit": cells[3].strip("` "), "pairs": cells[4],
                     "interval": cells[5], "quoted": cells[6]})
    return rows


def folder_texts(folder):
    """Every text file of a folder, plain or in its raw.tar.xz, as one
    string, normalized."""
    parts = []
    for path in sorted(glob.glob(os.path.join(folder, "**", "*"),
                                 recursive=True)):
        if path.endswith(TEXTS):
            parts.append(read(path))
    packed = pack.texts(folder, TEXTS)
    parts += [packed[name] for name in sorted(packed)]
    return normalize("\n".join(parts))


def folder_commit(folder):
    """The commit a folder records: results.json's, or a 'commit HASH'
    (or 'Commit HASH', 'made at commit HASH') line in its Markdown."""
    for name in ("results.json", "results.json.gz"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt") as f:
                return json.load(f).get("host_state", {}).get("commit")
    for path in sorted(glob.glob(os.path.join(folder, "*.md"))):
        m = re.search(r"\b[Cc]ommit ([0-9a-f]{7,40})", read(path))
        if m:
            return m.group(1)
    return None


def holds(text, number):
    """Whether a folder's text has the number as a number of its own."""
    return re.search(r"(?<![\d.])%s(?![\d]|\.\d)" % re.escape(number),
                     text) is not None


def load_list(path, columns):
    """The entries of a list file; none when there is no file."""
    entries = []
    if not os.path.exists(path):
        return entries
    for n, line in enumerate(read(path).splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) < columns:
            entries.append({"bad": "%s:%d: expected %d tab-separated "
                            "columns" % (os.path.basename(path), n,
                                         columns)})
            continue
        entries.append({"file": cells[0], "text": cells[1],
                        "why": cells[2] if len(cells) > 2 else "",
                        "line": n, "used": False})
    return entries


def main():
    results = {}
    check = checklist.recorder(results)

    rows = claims_rows()
    check("benchmarks.md_has_a_claims_table", rows, "no '## Claims' table")
    rows = rows or []
    held = set()
    held_sections = {}
    for row in rows:
        folder = os.path.join(TOP, row["folder"])
        label = "claim:%s" % row["claim"]
        if not os.path.isdir(folder) or \
                not os.path.realpath(folder).startswith(BENCH):
            check(label + ":folder", False, "%s is no folder under "
                  "bench/results/" % row["folder"])
            continue
        made = folder_commit(folder) or ""
        if row["commit"] == NONE_RECORDED:
            # Honest only where the folder itself names none.
            check(label + ":commit", not made,
                  "the row says none recorded, the folder records %s"
                  % made)
        else:
            check(label + ":commit", row["commit"] and
                  made.startswith(row["commit"]) and "-dirty" not in made,
                  "the row says %s, the folder records %s"
                  % (row["commit"], made or "none"))
        text = folder_texts(folder)
        if isinstance(row["figures"], str):
            held_sections[row["figures"]] = (row, text)
            continue
        for fig in row["figures"]:
            number = normalize(fig).lstrip("-")
            check("%s:%s_in_folder" % (label, number), holds(text, number),
                  "%s is in no text file of %s" % (fig, row["folder"]))
            for where in row["files"]:
                held.add((where, number))
    parameters = load_list(PARAMETERS, 3)
    pending = load_list(PENDING, 3)
    for entry in parameters + pending:
        if "bad" in entry:
            check("lists_well_formed", False, entry["bad"])
    section_spans = {}
    for path in SECTION_DOCS:
        for title, span in sections(path).items():
            section_spans.setdefault(path, {})[title] = span
    for title in held_sections:
        check("claims_section:%s_exists" % title, any(
            title in spans for spans in section_spans.values()),
            "no section '%s' in benchmarks.md or two-socket.md" % title)
    paths = sorted({p for pattern in SCANNED
                    for p in glob.glob(os.path.join(TOP, pattern))})
    unheld = 0
    shown = 0
    for path in paths:
        rel = os.path.relpath(path, TOP)
        text = read(path)
        flat = re.sub(r"\s+", " ", text)
        spans = section_spans.get(path, {})
        claims_span = spans.get("Claims") if path == TABLE_DOC else None
        for line, fig, number in figures(text, path):
            if (rel, number) in held or (claims_span and claims_span[0]
                                         <= line <= claims_span[1]):
                continue
            declared = [e for e in parameters if e["file"] == rel
                        and e["text"] in flat and number in normalize(
                            e["text"])]
            if declared:
                for e in declared:
                    e["used"] = True
                continue
            in_section = [t for t, (a, b) in spans.items()
                          if a <= line <= b and t in held_sections]
            if in_section:
                row, ftext = held_sections[in_section[0]]
                check("%s:%d:%s_in_%s" % (rel, line, number, row["folder"]),
                      holds(ftext, number),
                      "'%s' in section '%s' is in no text file of %s" % (
                          fig, in_section[0], row["folder"]))
                continue
            waiting = [e for e in pending if e["file"] == rel
                       and normalize(e["text"]) == number]
            if waiting:
                for e in waiting:
                    e["used"] = True
                shown += 1
                print("pending %s:%d: %s (%s)" % (rel, line, fig,
                                                    waiting[0]["why"]))
                continue
            unheld += 1
            check("%s:%d:%s_held" % (rel, line, number), False,
                  "'%s' is in no claims row (docs/benchmarks.md, Claims), "
                  "no claimed section and no declared setting" % fig)
    for entry in parameters + pending:
        if "bad" not in entry and not os.path.exists(
                os.path.join(TOP, entry["file"])):
            # A file another change renamed or removed: its entry has
            # nothing left to match in this tree (remove it when both
            # changes have landed).
            print("gone %s:%d: %s is not in this tree" % (
                os.path.basename(PARAMETERS if entry in parameters
                                 else PENDING), entry["line"],
                entry["file"]))
        elif "bad" not in entry:
            check("%s:%d_still_matches" % (
                os.path.basename(PARAMETERS if entry in parameters
                                 else PENDING), entry["line"]),
                entry["used"], "'%s' in %s matches no figure there" % (
                    entry["text"], entry["file"]))
    check("figures_scanned", len(paths) >= 5, "%d files" % len(paths))
    passed = sum(1 for ok in results.values() if ok)
    failed = len(results) - passed
    print("claims: %d passed, %d failed (%d figures outside the table, %d "
          "pending in others' files)" % (passed, failed, unheld, shown))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
