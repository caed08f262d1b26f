#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Every relative link of the Markdown files lands, and every repository
path the documents name is in the tree.

Links.  In every Markdown file of the tree (README, CONTRIBUTING, docs/,
the rendered manual, contrib/, bench/ and its result folders' reports),
each link or image that is not a URL, `[text](target)` or a reference
`[label]: target`, must name a file or folder that exists, relative to
the file; where it has an anchor and lands on a Markdown file, a heading
of that file must give that anchor (GitHub's rule: lower case, no
punctuation but hyphens, spaces as hyphens, -1, -2 ... for repeats).

Paths.  In the documents a reader follows (README, CONTRIBUTING, docs/
with the manual, contrib/, bench/README.md and the packages'
README.Debian), every word that starts with one of the tree's top
folders (`bench/`, `docs/`, `test/`, `tools/`, `server/` ...) must name
something in the tree, or match something where it has a `*`.  Left
alone: placeholders (a part in capitals or in <>, `DIR`, `16cpu-<date>`),
what builds make (build*/, bench-results/, debian/tmp ...) and the
result folders' reports, which record the commands as they were run.

Ends with 'links: N passed, N failed'.
"""

import glob
import os
import re
import subprocess
import sys

import checklist

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# The documents whose repository paths must exist (globs from the top).
PATH_DOCS = ("README.md", "CONTRIBUTING.md", "docs/*.md", "docs/manual/*.md",
             "docs/manual/mod/*.md", "docs/manual/mod/*.xml",
             "contrib/**/*.md", "bench/README.md", "debian/*README.Debian")
# The tree's top folders: a word starting with one of them is a path.
TOP_FOLDERS = ("bench", "contrib", "debian", "docs", "include", "modules",
               "server", "test", "tools")
# What builds and runs make, never in the tree (a module's .so named by
# its place in httpd's own tree, modules/mod_mpm_prefork.so, too).
MADE = re.compile(r"^(?:build[\w-]*/|bench-results/|test-results/"
                  r"|debian/(?:tmp|\.debhelper|files|libapache2-mod-[\w-]+)/"
                  r"|debian/.*\.(?:substvars|debhelper)$)"
                  r"|\.(?:so|o|a|la|lo)$")
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s|$)", re.M)
PATH_WORD = re.compile(r"(?<![\w./~$-])((?:%s)/[\w.*+/<>{}-]*)"
                       % "|".join(TOP_FOLDERS))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def tracked_markdown():
    """Every Markdown file of the tree: git's list in a checkout, else a
    walk that skips build output."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard", "*.md"], cwd=TOP,
                             capture_output=True, text=True, check=True)
        return sorted(p for p in out.stdout.split("\0") if p)
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(TOP):
            dirs[:] = [x for x in dirs if not MADE.search(
                os.path.relpath(os.path.join(d, x), TOP) + "/")
                and not x.startswith(".")]
            found += [os.path.relpath(os.path.join(d, f), TOP)
                      for f in files if f.endswith(".md")]
        return sorted(found)


def blank(m):
    return re.sub(r"[^\n]", " ", m.group(0))


def without_blocks(text):
    """The text with fenced code blocks blanked."""
    return re.sub(r"^(```|~~~).*?^\1", blank, text, flags=re.M | re.S)


def without_code(text):
    """The text with fenced blocks and code spans blanked (links inside
    them are examples, not links)."""
    return re.sub(r"`[^`\n]*`", blank, without_blocks(text))


def github_anchor(heading):
    """The anchor GitHub gives a heading (tools/runbook.py's rule)."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    """The anchors of a Markdown file's headings (and explicit ids)."""
    seen = {}
    found = set()
    for line in without_blocks(read(path)).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = github_anchor(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else "%s-%d" % (base, n))
    found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", read(path)))
    return found


def links(rel):
    """[(line, target)] of a Markdown file's relative links."""
    text = without_code(read(os.path.join(TOP, rel)))
    found = []
    for pattern in (LINK, REFERENCE):
        for m in pattern.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
                continue                    # http:, mailto: ...
            found.append((text.count("\n", 0, m.start()) + 1, target))
    return found


def check_link(rel, target, anchor_cache):
    """None where the link lands, else why not."""
    path, _, anchor = target.partition("#")
    if path:
        dest = os.path.normpath(os.path.join(TOP, os.path.dirname(rel),
                                             path))
        if not os.path.exists(dest):
            return "%s does not exist" % os.path.relpath(dest, TOP)
    else:
        dest = os.path.join(TOP, rel)
    if anchor and dest.endswith(".md") and os.path.isfile(dest):
        if dest not in anchor_cache:
            anchor_cache[dest] = anchors(dest)
        if anchor not in anchor_cache[dest]:
            return "no heading of %s gives #%s" % (
                os.path.relpath(dest, TOP), anchor)
    return None


def placeholder(word):
    """Whether a path word stands for paths (DIR, NAME.results.json.gz,
    16cpu-<date>, {a,b}) rather than naming one."""
    return bool(re.search(r"<|>|\{|(?:^|/|\.|-)[A-Z][A-Z0-9_]+(?=$|/|\.|-)",
                          word))


def path_words(rel):
    """[(line, word)] of the repository paths a document names."""
    text = read(os.path.join(TOP, rel))
    found = []
    for m in PATH_WORD.finditer(text):
        word = m.group(1).rstrip(".,;:")
        if text[m.end():m.end() + 1] in ("$", "<", "{"):
            continue                    # 2cpu-$(date ...), away$1
        found.append((text.count("\n", 0, m.start()) + 1, word))
    return found


def check_path(word):
    """None where the word names something in the tree, else why not."""
    if MADE.search(word) or placeholder(word):
        return None
    path = os.path.join(TOP, word)
    if "*" in word:
        return None if glob.glob(path, recursive=True) else \
            "nothing matches %s" % word
    return None if os.path.exists(path) else "%s is not in the tree" % word


def main():
    results = {}
    check = checklist.recorder(results)
    cache = {}
    files = tracked_markdown()
    check("markdown_files_found", len(files) >= 10, "%d files" % len(files))
    count = 0
    for rel in files:
        for line, target in links(rel):
            count += 1
            why = check_link(rel, target, cache)
            check("link:%s:%d:%s" % (rel, line, target), why is None, why)
    check("links_checked", count >= 100, "%d links" % count)
    docs = sorted({os.path.relpath(p, TOP) for pattern in PATH_DOCS
                   for p in glob.glob(os.path.join(TOP, pattern),
                                      recursive=True)})
    named = 0
    for rel in docs:
        for line, word in path_words(rel):
            named += 1
            why = check_path(word)
            check("path:%s:%d:%s" % (rel, line, word), why is None, why)
    check("paths_checked", named >= 100, "%d paths" % named)
    passed = sum(1 for ok in results.values() if ok)
    failed = len(results) - passed
    print("links: %d links in %d Markdown files, %d repository paths in %d "
          "documents; %d passed, %d failed" % (count, len(files), named,
                                               len(docs), passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
