#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The MPM's shape, held to the figures it has reached (make check-structure).

usage: check_structure.py [--figures | --map] [BUILD]

The MPM lives in capability folders under server/mpm/prefork/ (the root,
buckets/, conn/, guard/, steering/), each reached through its headers.
This check reads the built objects in BUILD (default build) and the
sources, and fails when the shape slides back:

- folders: at least MIN_FOLDERS capability folders beside the root;
- faces: each folder is included from outside it through one header, its
  face, and no other;
- crossings: the global symbols defined in one folder's objects and
  referenced from another folder's (nm), at most MAX_CROSSINGS;
- circles: no two files call each other, directly or round a longer loop
  (from the objects' undefined and defined symbols), and no two headers
  include each other (from the #include lines);
- lines: prefork.c at most MAX_PREFORK_LINES (httpd's own is about
  1,560), every other source at most MAX_SOURCE_LINES;
- the map: CONTRIBUTING.md's Layout section shows, in its first ```text
  block, what --map prints now.

--figures prints the figures and every crossing without judging them,
and then: the lines that write a pid field (`->pid =`, `.pid =`);
prefork.c's lines that read `retained->children->slot`; prefork.c's
file-scope mutable statics (an object declared static outside a function
whose declarator is not itself const: a pointer to const data is
mutable, a const pointer is not); and the global symbols each object
defines (nm -g --defined-only), which the module's version script keeps
out of the .so all the same.
--map prints the picture of the rooms: each folder (the root included)
with its face and its .c files, then an arrow for each pair of folders
one of which uses global symbols the other defines, with how many each
way (as --figures counts them, from the objects).  Everything in it is
sorted, so the same tree always prints the same picture.
MAX_CROSSINGS is the figure the folders reached; lower it as the faces
narrow, never raise it to let a change in.
"""

import collections
import difflib
import glob
import os
import re
import signal
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MPM = os.path.join(TOP, "server", "mpm", "prefork")

MIN_FOLDERS = 4
MAX_CROSSINGS = 47
MAX_PREFORK_LINES = 1600
MAX_SOURCE_LINES = 1000

CONTRIBUTING = os.path.join(TOP, "CONTRIBUTING.md")
MAP_WIDTH = 78          # the picture's boxes, border to border
MAP_LABEL = 10          # the column a box's labels take


def folder_of(path):
    """'.' for the root, else the capability folder's name."""
    rel = os.path.relpath(os.path.dirname(path), MPM)
    return rel.split(os.sep)[0]


def objects(build):
    root = os.path.join(TOP, build, "server", "mpm", "prefork")
    return sorted(glob.glob(os.path.join(root, "**", "*.o"), recursive=True)), root


def symbol_tables(objs):
    """Per object: the global symbols it defines, those of them that are
    functions, and the symbols it uses."""
    defines, functions, uses = {}, {}, {}
    for obj in objs:
        out = subprocess.run(["nm", obj], capture_output=True, text=True,
                             check=True).stdout
        d, f, u = set(), set(), set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBRVW":
                d.add(parts[2])
                if parts[1] == "T":
                    f.add(parts[2])
            elif len(parts) == 2 and parts[0] == "U":
                u.add(parts[1])
        defines[obj], functions[obj], uses[obj] = d, f, u
    return defines, functions, uses


def crossings(objs, obj_root, defines, uses):
    """{symbol: (defining folder, set of using folders)} for every global
    symbol used from a folder other than its own."""
    owner = {}
    for obj in objs:
        for sym in defines[obj]:
            owner[sym] = obj
    found = {}
    for obj in objs:
        for sym in uses[obj]:
            if sym not in owner:
                continue
            home = folder_of(owner[sym].replace(obj_root, MPM, 1))
            here = folder_of(obj.replace(obj_root, MPM, 1))
            if home != here:
                found.setdefault(sym, (home, set()))[1].add(here)
    return found


def strongly_connected(graph):
    """Tarjan's components of more than one node: the circles."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def call_graph(objs, obj_root, functions, uses):
    """File -> the files whose functions it calls.  Data is left out: every
    file names the module structure for its log level (APLOG_USE_MODULE),
    which is no call back into prefork.c."""
    owner = {}
    for obj in objs:
        for sym in functions[obj]:
            owner[sym] = obj
    graph = collections.defaultdict(set)
    for obj in objs:
        name = os.path.relpath(obj, obj_root)[:-2] + ".c"
        for sym in uses[obj]:
            if sym in owner and owner[sym] != obj:
                graph[name].add(os.path.relpath(owner[sym], obj_root)[:-2]
                                + ".c")
    return graph


def sources():
    return sorted(p for p in glob.glob(os.path.join(MPM, "**", "*.[ch]"),
                                       recursive=True))


def include_graph():
    """File -> the MPM files it includes, each #include "x" resolved as the
    compiler does: beside the including file, then from the MPM's root."""
    graph = collections.defaultdict(set)
    for path in sources():
        with open(path) as f:
            for line in f:
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                for base in (os.path.dirname(path), MPM):
                    target = os.path.normpath(os.path.join(base, m.group(1)))
                    if os.path.exists(target):
                        graph[os.path.relpath(path, MPM)].add(
                            os.path.relpath(target, MPM))
                        break
    return graph


def faces(graph):
    """{folder: the set of its headers that files outside it include}."""
    found = collections.defaultdict(set)
    for src, targets in graph.items():
        for target in targets:
            home = target.split(os.sep)[0] if os.sep in target else "."
            here = src.split(os.sep)[0] if os.sep in src else "."
            if home != "." and home != here:
                found[home].add(target)
    return found


def line_counts():
    counts = {}
    for path in sources():
        with open(path) as f:
            counts[os.path.relpath(path, MPM)] = sum(1 for _ in f)
    return counts


def room_name(folder):
    return "root" if folder == "." else folder + "/"


def room_sources():
    """{folder: its .c files' names, sorted}, the root as '.'."""
    found = collections.defaultdict(list)
    for path in sources():
        if path.endswith(".c"):
            found[folder_of(path)].append(os.path.basename(path))
    return found


def root_headers(graph):
    """The root's headers that files of the other folders include."""
    found = set()
    for src, targets in graph.items():
        if os.sep not in src:
            continue
        found.update(t for t in targets if os.sep not in t)
    return sorted(found)


def box(title, rows):
    """A box MAP_WIDTH wide: the title in its top border, then each
    (label, words) row wrapped under its label."""
    inner = MAP_WIDTH - 4
    out = ["+-- %s %s+" % (title, "-" * (MAP_WIDTH - len(title) - 6))]
    for label, words in rows:
        line = ""
        for word in words:
            if line and len(line) + 1 + len(word) > inner - MAP_LABEL:
                out.append("| %-*s%-*s |" % (MAP_LABEL, label,
                                              inner - MAP_LABEL, line))
                label, line = "", word
            else:
                line = line + " " + word if line else word
        out.append("| %-*s%-*s |" % (MAP_LABEL, label, inner - MAP_LABEL,
                                      line))
    out.append("+" + "-" * (MAP_WIDTH - 2) + "+")
    return out


def draw_map(rooms, faced, shared, by_pair, total):
    """The picture --map prints and CONTRIBUTING.md shows."""
    files = room_sources()
    lines = []
    for room in rooms:
        if room == ".":
            rows = [("face", ["none:", "the", "module,", "entered",
                              "through", "its", "hooks"]),
                    ("included", ["by", "other", "rooms:"]
                     + (shared or ["none"]))]
            title = "root: server/mpm/prefork/"
        else:
            rows = [("face", [os.path.basename(h)
                              for h in sorted(faced.get(room, ()))]
                     or ["none"])]
            title = room_name(room)
        rows.append(("sources", files.get(room, [])))
        lines.extend(box(title, rows))
    lines.append("")
    lines.append("A -- n --> B: A's objects use n global symbols that B's "
                 "define (%d" % total)
    lines.append("cross in all; one used from two rooms is on both arrows).")
    lines.append("")
    width = max(len(room_name(r)) for r in rooms)
    for i, a in enumerate(rooms):
        for b in rooms[i + 1:]:
            there, back = by_pair.get((a, b), 0), by_pair.get((b, a), 0)
            if not there and not back:
                continue
            left = room_name(a)
            if there:
                lines.append("    %-*s  -- %2d -->  %s"
                             % (width, left, there, room_name(b)))
                left = ""
            if back:
                lines.append("    %-*s  <-- %2d --  %s"
                             % (width, left, back,
                                "" if there else room_name(b)))
    return "".join(line.rstrip() + "\n" for line in lines)


def contributing_map():
    """The first ```text block of CONTRIBUTING.md's Layout section, or
    None."""
    with open(CONTRIBUTING) as f:
        text = f.read()
    m = re.search(r"^# Layout\n(.*?)(?=^# |\Z)", text, re.M | re.S)
    if not m:
        return None
    block = re.search(r"^```text\n(.*?)^```", m.group(1), re.M | re.S)
    return block.group(1) if block else None


# ------------------------------------------------------------------
# Further figures, printed with --figures only: the pid writes, prefork.c's
# reads of the children's slots and its file-scope mutable statics, and
# the global symbols each object defines.

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


def print_more_figures(build):
    """The figures beyond the structure's: what --figures adds."""
    hits = pid_writes()
    print("pid written on %d line(s) of server/mpm/prefork/**/*.c"
          % len(hits))
    for h in hits:
        print("    " + h)
    with open(os.path.join(MPM, "prefork.c")) as f:
        slot_reads = sum(1 for l in f if "retained->children->slot" in l)
    print("lines of prefork.c reading retained->children->slot: %d"
          % slot_reads)
    statics = mutable_statics(os.path.join(MPM, "prefork.c"))
    print("file-scope mutable statics in prefork.c: %d (%s)"
          % (len(statics), ", ".join(statics)))
    total, per_file = global_symbols(build)
    print("global symbols across the MPM's objects: %d (%s)" % (
        total, ", ".join("%s %d" % (k, v) for k, v in
                         sorted(per_file.items(), key=lambda kv: -kv[1])
                         if v)))


def main(argv):
    figures_only = "--figures" in argv
    map_only = "--map" in argv
    args = [a for a in argv if a not in ("--figures", "--map")]
    build = args[0] if args else "build"
    objs, obj_root = objects(build)
    if not objs:
        print("structure: no objects under %s/server/mpm/prefork: run make "
              "first" % build)
        return 1
    folders = sorted(d for d in os.listdir(MPM)
                     if os.path.isdir(os.path.join(MPM, d)))
    defines, functions, uses = symbol_tables(objs)
    cross = crossings(objs, obj_root, defines, uses)
    calls = strongly_connected(call_graph(objs, obj_root, functions, uses))
    graph = include_graph()
    includes = strongly_connected(graph)
    faced = faces(graph)
    counts = line_counts()
    prefork_lines = counts.get("prefork.c", 0)
    long_files = {p: n for p, n in counts.items()
                  if p != "prefork.c" and p.endswith(".c")
                  and n > MAX_SOURCE_LINES}

    by_pair = collections.Counter()
    for sym, (home, users) in cross.items():
        for user in users:
            by_pair[(user, home)] += 1
    picture = draw_map(["."] + folders, faced, root_headers(graph), by_pair,
                       len(cross))
    if map_only:
        sys.stdout.write(picture)
        return 0
    print("structure: %d capability folders (%s); %d global symbols cross "
          "folders; %d call circle(s), %d include circle(s); prefork.c %d "
          "lines, longest other source %s"
          % (len(folders), ", ".join(folders), len(cross), len(calls),
             len(includes), prefork_lines,
             max(((n, p) for p, n in counts.items() if p != "prefork.c"),
                 default=(0, "none"))))
    for pair, n in sorted(by_pair.items()):
        print("    %-22s %d" % ("%s -> %s" % pair, n))
    for folder in folders:
        print("    face of %s/: %s" % (folder, ", ".join(
            sorted(faced.get(folder, ())) or ["none"])))
    if figures_only:
        for sym in sorted(cross, key=lambda s: (cross[s][0], s)):
            home, users = cross[sym]
            print("    %s (%s) <- %s" % (sym, home, ", ".join(sorted(users))))
        for comp in calls:
            print("    call circle: %s" % " <-> ".join(comp))
        for comp in includes:
            print("    include circle: %s" % " <-> ".join(comp))
        print_more_figures(build)
        return 0

    problems = []
    if len(folders) < MIN_FOLDERS:
        problems.append("%d capability folders, at least %d wanted"
                        % (len(folders), MIN_FOLDERS))
    if len(cross) > MAX_CROSSINGS:
        problems.append("%d global symbols cross folders, at most %d: go "
                        "through the folder's face (--figures lists them)"
                        % (len(cross), MAX_CROSSINGS))
    for folder in folders:
        if len(faced.get(folder, ())) > 1:
            problems.append("%s/ is included from outside through %d "
                            "headers (%s): one face, please"
                            % (folder, len(faced[folder]),
                               ", ".join(sorted(faced[folder]))))
    for comp in calls:
        problems.append("files call each other: %s" % " <-> ".join(comp))
    for comp in includes:
        problems.append("headers include each other: %s"
                        % " <-> ".join(comp))
    if prefork_lines > MAX_PREFORK_LINES:
        problems.append("prefork.c has %d lines, at most %d"
                        % (prefork_lines, MAX_PREFORK_LINES))
    for path, n in sorted(long_files.items()):
        problems.append("%s has %d lines, at most %d"
                        % (path, n, MAX_SOURCE_LINES))
    shown = contributing_map()
    if shown != picture:
        if shown is not None:
            sys.stdout.writelines(difflib.unified_diff(
                shown.splitlines(True), picture.splitlines(True),
                "CONTRIBUTING.md (Layout)", "check_structure.py --map"))
        problems.append("CONTRIBUTING.md's Layout picture is not what the "
                        "tree gives now: after make, run python3 "
                        "tools/check/check_structure.py --map and put what "
                        "it prints in place of the first ```text block "
                        "under '# Layout'")
    for p in problems:
        print("FAIL " + p)
    print("structure: %d problem(s)" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(sys.argv[1:]))
