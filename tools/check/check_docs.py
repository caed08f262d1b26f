#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""What the documents say about ranges, kernels and privileges is what
the code does.

Ranges.  The accepted range of each integer directive is read from the
MPM's own table (int_directives[] in prefork.c, which its command table
points each directive at, with the limits' macros resolved from the
headers).  Every range a document gives for a directive ("an integer from
A to B" in a sentence that names it, the manual's entry of that directive
first of all) must be that range, and each manual entry of an integer
directive must give one.

Kernels and privileges.  docs/kernel-requirements.tsv is the one table of
what each feature needs.  Each of its rows is derived here from the code:
the kernel interfaces a feature uses (SO_REUSEPORT; for each steering mode
the section of its BPF program, the maps and map flags the program reaches,
global data and loops in the functions it calls, and the socket option
that attaches it) and, from KERNEL_RELEASES, the release that brought
each; the row's Linux version is the newest of them.  Then every sentence
or table row of the admin's documents that states a Linux version must
explain it by a feature or interface it names, name each steering mode's
own version, name no interface the code does not use, and say "root" (or
the capabilities) where the feature needs BPF.

Ends with 'docs: N passed, N failed'.
"""

import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

import checklist

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MPM = os.path.join(TOP, "server", "mpm", "prefork")
TABLE = os.path.join(TOP, "docs", "kernel-requirements.tsv")

# The release that brought each kernel interface (facts from the kernel's
# documentation and history).
KERNEL_RELEASES = {
    "SO_REUSEPORT": "3.9",            # with load balancing over a group
    "BPF_MAP_TYPE_ARRAY": "3.19",
    "SO_ATTACH_REUSEPORT_CBPF": "4.6",  # 4.5 for UDP, 4.6 for TCP
    "SO_ATTACH_REUSEPORT_EBPF": "4.6",
    "sk_reuseport": "4.19",           # BPF_PROG_TYPE_SK_REUSEPORT
    "BPF_MAP_TYPE_REUSEPORT_SOCKARRAY": "4.19",
    "global-data": "5.2",             # .rodata/.data maps of a program
    "bounded-loops": "5.3",
    "BPF_F_MMAPABLE": "5.5",
    "SO_DETACH_REUSEPORT_BPF": "5.8",
    "CAP_BPF": "5.8",
    # A program that also chooses where a closing socket's connections go.
    "BPF_SK_REUSEPORT_SELECT_OR_MIGRATE": "5.14",
}
# How documents name the interfaces.
INTERFACE_WORDS = {
    "SO_REUSEPORT": r"\bSO_REUSEPORT\b",
    "SO_ATTACH_REUSEPORT_CBPF": r"SO_ATTACH_REUSEPORT_CBPF|classic BPF",
    "SO_ATTACH_REUSEPORT_EBPF": r"SO_ATTACH_REUSEPORT_EBPF",
    "sk_reuseport": r"\bSK_REUSEPORT\b",
    "BPF_MAP_TYPE_REUSEPORT_SOCKARRAY": r"REUSEPORT_SOCKARRAY",
    "BPF_F_MMAPABLE": r"BPF_F_MMAPABLE|mmap-able",
    "SO_DETACH_REUSEPORT_BPF": r"SO_DETACH_REUSEPORT_BPF",
    "CAP_BPF": r"\bCAP_BPF\b|\bCAP_SYS_ADMIN\b",
    "BPF_SK_REUSEPORT_SELECT_OR_MIGRATE":
        r"BPF_SK_REUSEPORT_SELECT_OR_MIGRATE|handed over|hand(?:s)? (?:its|their) queues? over",
}
# How documents name each feature of the table.
FEATURE_WORDS = {
    "buckets": r"\bSO_REUSEPORT\b|\b[Bb]uckets\b(?! with| under)",
    "steering hash": r"hash program|program[^.]*over the MPM's own sockets"
                     r"|other processes[^.]*port's group",
    "steering idle": r"`idle`|\bidle steering|[Ss]teering idle\b"
                     r"|\bidle (?:and|or) (?:local|cpu)\b"
                     r"|\b(?:local|cpu) (?:and|or) idle\b"
                     r"|idle steering's",
    "steering cpu": r"`cpu`|\bcpu steering|[Ss]teering cpu\b"
                    r"|\bcpu (?:and|or) (?:local|idle)\b"
                    r"|\b(?:local|idle),? (?:and|or) cpu\b|, cpu Linux",
    "steering local": r"`local`|\blocal steering|[Ss]teering local\b"
                      r"|\blocal (?:and|or) (?:idle|cpu)\b"
                      r"|\b(?:idle|cpu) (?:and|or) local\b",
    "socket handover": r"[Hh]andover|handed over|hand(?:s)? (?:its|their) "
                       r"queues? over",
    "steering detach": r"\bdetach|SO_DETACH_REUSEPORT_BPF|[Ss]witching "
                       r"back to `?hash|[Tt]urning steering off",
}
STEERING_MODES = ("steering idle", "steering cpu", "steering local")
# "Linux 5.5", "Linux >= 5.5", and in a sentence that says "Linux" a
# mode's own "cpu 5.2" or "cpu steering 5.2".
VERSION = re.compile(
    r"\bLinux\s*(?:>=|≥)?\s*(\d+\.\d+)(?![\d.])"
    r"|(?<=Linux)(?=)"
    r"|\b(?:idle|cpu|local)(?: steering)?,? (?:needs? )?(\d+\.\d+)"
    r"(?![\d.])(?!\s*×)")
ROOT = re.compile(r"\broot\b|CAP_BPF|CAP_SYS_ADMIN")

# The admin's documents: every statement of a kernel version in them is
# checked.
DOCUMENTS = ["README.md", "docs/differences.md", "docs/design.md",
             "docs/steering.md", "docs/monitoring.md", "docs/log-messages.md",
             "docs/building.md", "docs/manual/mod/*.xml", "debian/control",
             "debian/*.README.Debian",
             "server/mpm/prefork/mpm_prefork_buckets.conf",
             "contrib/prometheus/bucket-alerts.yml"]


def read(path):
    with open(path) as f:
        return f.read()


def version_key(v):
    return tuple(int(x) for x in v.split("."))


# ------------------------------------------------------------- ranges --

def c_macros():
    """Integer #defines of the MPM's headers."""
    macros = {}
    for header in glob.glob(os.path.join(MPM, "**", "*.h"), recursive=True):
        for m in re.finditer(r"^#define\s+(\w+)\s+\(?(-?\d+)\)?\s*$",
                             read(header), re.M):
            macros[m.group(1)] = int(m.group(2))
    return macros


def directive_ranges():
    """{directive: (min, max)} from prefork.c's int_directives[] and the
    command table entries that point at it."""
    text = read(os.path.join(MPM, "prefork_directives.c"))
    macros = c_macros()

    def value(token):
        token = token.strip()
        m = re.fullmatch(r"(-?\d+)(?:LL|L|U)*", token)
        return int(m.group(1)) if m else macros[token]

    table = re.search(r"int_directive_t\s+int_directives\[\w+\]\s*=\s*\{"
                      r"(.*?)\n\};", text, re.S).group(1)
    limits = {}
    for m in re.finditer(r"\[(\w+)\]\s*=\s*\{\s*[^,]+,\s*([^,]+),\s*([^,]+),",
                         table):
        limits[m.group(1)] = (value(m.group(2)), value(m.group(3)))
    ranges = {}
    for m in re.finditer(r'AP_INIT_\w+\(\s*"(\w+)",\s*set_int_directive,\s*'
                         r"&int_directives\[(\w+)\]", text):
        ranges[m.group(1)] = limits[m.group(2)]
    return ranges


def manual_entries():
    """{directive: text of its full manual entry}."""
    entries = {}
    for path in glob.glob(os.path.join(TOP, "docs", "manual", "mod",
                                       "*.xml")):
        for d in ET.parse(path).getroot().findall("directivesynopsis"):
            if d.get("location") is None:
                entries[d.findtext("name").strip()] = \
                    " ".join("".join(d.itertext()).split())
    return entries


RANGE = re.compile(r"integer from (-?\d+) to (-?\d+)")


# ------------------------------------------------------- the table --

def read_table():
    rows = {}
    for line in read(TABLE).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        feature, linux, privileges, interfaces = line.split("\t")
        rows[feature] = {"linux": linux, "privileges": privileges,
                         "interfaces": set(interfaces.split())}
    return rows


def c_functions(text):
    """{name: body} of the functions defined in C text."""
    functions = {}
    text = re.sub(r'SEC\("[^"]*"\)', "", text)
    for m in re.finditer(r"^(?=[A-Za-z_])[\w ]*?\b(\w+)\s*\([^;{)]*"
                         r"(?:\)[^;{]*)?\)\s*\{", text, re.M):
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        functions[m.group(1)] = text[m.end():i]
    return functions


def derive_steering():
    """{mode: set of kernel interfaces} from the BPF programs' source."""
    bpf = read(os.path.join(MPM, "steering", "prefork_steering.bpf.c"))
    rules = read(os.path.join(MPM, "steering", "prefork_steering_rules.h"))
    kernel = read(os.path.join(MPM, "steering", "prefork_steering_kernel.c"))
    functions = c_functions(rules)
    functions.update(c_functions(bpf))
    maps = {}
    for m in re.finditer(r"struct\s*\{(.*?)\}\s*(\w+)\s+SEC\(\"\.maps\"\)",
                         bpf, re.S):
        found = set(re.findall(r"__uint\((?:type|map_flags),\s*(\w+)\)",
                               m.group(1)))
        maps[m.group(2)] = found
    global_data = set(re.findall(r"^(?:const\s+)?volatile\s+[\w ]+?\b(\w+)"
                                 r"\s*=", bpf, re.M))
    attach = set(re.findall(r"\b(SO_ATTACH_REUSEPORT_[CE]BPF)\b", kernel))
    programs = {}
    for m in re.finditer(r'SEC\("([\w/]+)"\)\s*int\s+pf_steer_(\w+)\s*\(',
                         bpf):
        # "sk_reuseport/migrate" loads as plain sk_reuseport where the
        # kernel lacks the handover (prefork_steering_kernel.c): the
        # handover is a row of its own.
        section, mode = m.group(1).split("/")[0], m.group(2)
        seen, todo, used = set(), ["pf_steer_" + mode], {section}
        while todo:
            name = todo.pop()
            if name in seen or name not in functions:
                continue
            seen.add(name)
            body = functions[name]
            for map_name, found in maps.items():
                if re.search(r"\b%s\b" % map_name, body):
                    used |= found
            if any(re.search(r"\b%s\b" % g, body) for g in global_data):
                used.add("global-data")
            # A loop the compiler unrolls leaves the verifier none.
            looped = re.sub(r"#pragma unroll\s*\n\s*for\s*\(", "", body)
            if re.search(r"\b(for|while)\s*\(", looped):
                used.add("bounded-loops")
            todo += [f for f in functions if re.search(r"\b%s\s*\(" % f,
                                                       body)]
        programs["steering " + mode] = used | attach
    return programs


def derive_rows():
    rows = derive_steering()
    os_text = read(os.path.join(MPM, "guard", "prefork_os.c"))
    if re.search(r"setsockopt\([^;]*SO_REUSEPORT\b", os_text):
        rows["buckets"] = {"SO_REUSEPORT"}
    kernel = read(os.path.join(MPM, "steering", "prefork_steering_kernel.c"))
    if re.search(r"\bSO_DETACH_REUSEPORT_BPF\b", kernel):
        rows["steering detach"] = {"SO_DETACH_REUSEPORT_BPF"}
    bpf = read(os.path.join(MPM, "steering", "prefork_steering.bpf.c"))
    if re.search(r'SEC\("sk_reuseport/migrate"\)', bpf):
        rows["socket handover"] = {"sk_reuseport",
                                   "BPF_SK_REUSEPORT_SELECT_OR_MIGRATE"}
    return rows


def newest(interfaces):
    return max((KERNEL_RELEASES[i] for i in interfaces), key=version_key)


# ------------------------------------------------------- documents --

def marked_text(el):
    """An element's text, with <code> written as Markdown's `code`."""
    parts = [el.text or ""]
    for child in el:
        inner = marked_text(child)
        parts.append("`%s`" % inner if child.tag == "code" else inner)
        parts.append(child.tail or "")
    return "".join(parts)


def statements(path):
    """The sentences and table rows of a document, as plain text."""
    text = read(path)
    if path.endswith(".xml"):
        root = ET.fromstring(text)
        blocks = []
        for el in root.iter():
            if el.tag in ("p", "li", "compatibility", "description"):
                blocks.append(" ".join(marked_text(el).split()))
        text = "\n\n".join(blocks)
    else:
        text = re.sub(r"```.*?```", "", text, flags=re.S)
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = block.splitlines()
        if lines and all(line.lstrip().startswith("|") for line in lines):
            out += lines
            continue
        # List items are statements of their own.
        items, current = [], []
        for line in lines:
            if re.match(r"\s*(?:[-*]|\d+\.)\s", line) and current:
                items.append(current)
                current = []
            current.append(line)
        items.append(current)
        for item in items:
            flat = " ".join(line.strip().lstrip("#").strip() for line in item)
            out += re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", flat)
    return out


def check_statement(sentence, table, used_anywhere):
    """Problems with one sentence that states a Linux version."""
    if "Linux" not in sentence:
        return []
    versions = [a or b for a, b in VERSION.findall(sentence) if a or b]
    if not versions:
        return []
    problems = []
    features = {f for f, words in FEATURE_WORDS.items()
                if re.search(words, sentence)}
    named = {i for i, words in INTERFACE_WORDS.items()
             if re.search(words, sentence)}
    allowed = {table[f]["linux"] for f in features if f in table}
    allowed |= {KERNEL_RELEASES[i] for i in named}
    for v in versions:
        if v not in allowed:
            problems.append("Linux %s: no feature or interface named here "
                            "needs it (named: %s)"
                            % (v, sorted(features | named) or "none"))
    for f in features & set(STEERING_MODES):
        if table[f]["linux"] not in versions:
            problems.append("%s needs Linux %s, which this does not say"
                            % (f, table[f]["linux"]))
    for i in named:
        if i not in used_anywhere:
            problems.append("%s: the code uses no such interface" % i)
    if any(table[f]["privileges"] == "bpf"
           for f in features - {"steering detach"} if f in table) \
            and not ROOT.search(sentence):
        problems.append("a feature that needs root at start-up, without "
                        "saying so")
    return problems


def main():
    results = {}
    check = checklist.recorder(results)

    # Ranges.
    ranges = directive_ranges()
    check("code_has_integer_directives", len(ranges) >= 10, ranges)
    entries = manual_entries()
    for directive, (low, high) in sorted(ranges.items()):
        stated = RANGE.findall(entries.get(directive, ""))
        check("manual:%s_states_its_range" % directive, stated,
              "no 'integer from A to B' in its entry")
        for a, b in stated:
            check("manual:%s_range_%s_to_%s" % (directive, a, b),
                  (int(a), int(b)) == (low, high),
                  "the code accepts %d to %d" % (low, high))
    paths = sorted({p for pattern in DOCUMENTS
                    for p in glob.glob(os.path.join(TOP, pattern))})
    checked = 0
    for path in paths:
        rel = os.path.relpath(path, TOP)
        for sentence in statements(path):
            named = [d for d in ranges
                     if re.search(r"\b%s\b" % d, sentence)]
            for a, b in RANGE.findall(sentence):
                if len(named) == 1:
                    checked += 1
                    want = ranges[named[0]]
                    check("%s: %s %s to %s" % (rel, named[0], a, b),
                          (int(a), int(b)) == want,
                          "the code accepts %d to %d: %r"
                          % (want[0], want[1], sentence[:200]))
    print("  %d ranges checked outside the manual's entries" % checked)

    # The table against the code.
    table = read_table()
    derived = derive_rows()
    check("table_has_every_derived_feature", set(derived) <= set(table),
          "missing: %s" % sorted(set(derived) - set(table)))
    check("table_has_no_feature_the_code_lacks", set(table) <= set(derived),
          "not in the code: %s" % sorted(set(table) - set(derived)))
    used_anywhere = set()
    for feature, interfaces in sorted(derived.items()):
        used_anywhere |= interfaces
        row = table.get(feature)
        if row is None:
            continue
        check("%s_interfaces_are_the_code's" % feature,
              row["interfaces"] == interfaces,
              "table %s, code %s" % (sorted(row["interfaces"]),
                                     sorted(interfaces)))
        check("%s_needs_linux_%s" % (feature, row["linux"]),
              row["linux"] == newest(interfaces),
              "its interfaces need Linux %s" % newest(interfaces))
        bpf = any(i.startswith(("sk_", "BPF_", "global-", "bounded-"))
                  or "REUSEPORT_" in i for i in interfaces)
        check("%s_privileges" % feature,
              row["privileges"] == ("bpf" if bpf else "none"),
              row["privileges"])
    used_anywhere.add("CAP_BPF")

    # Every stated kernel version in the documents.
    stated = 0
    for path in paths:
        rel = os.path.relpath(path, TOP)
        for n, sentence in enumerate(statements(path), 1):
            problems = check_statement(sentence, table, used_anywhere)
            if "Linux" in sentence and VERSION.search(sentence):
                stated += 1
                check("%s: statement %d" % (rel, n), not problems,
                      "; ".join(problems) + ": %r" % sentence[:300])
    check("documents_state_kernel_versions", stated >= 5, stated)

    failed = sum(1 for ok in results.values() if not ok)
    print("docs: %d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
