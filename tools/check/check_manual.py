#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The manual in docs/manual/mod matches the code and is rendered.

- every module document is valid against docs/manual/style/modulesynopsis.dtd
  (xmllint --valid) and against httpd's own modulesynopsis.dtd, which is
  extracted at test time from trunk's docs/manual/style in
  httpd-trunk.tar.xz ($HTTPD_SRC_DIR, default ../shared/httpd-src beside
  this checkout; the DTD is httpd's, so it is not copied here).  Without
  the tarball (a public clone) that check says "not run" and counts as
  neither passed nor failed; with CI=true it fails;
- every directive a module's command table registers (the AP_INIT_* entries
  of the C file its <sourcefile> names) has one full entry, in its own
  document or in prefork_buckets_common.xml (the common MPM directives as
  this MPM implements them) with the module in its <modulelist>, and no
  full entry names a directive the code does not register;
- each full entry has a description, syntax (starting with its name),
  default, context, compatibility and a status and module to show; each
  reference (<directivesynopsis location="...">) leads to a full entry, and
  each mpm_common entry of a module is referenced from the module's page;
- the Markdown beside each document is what docs/manual/style/markdown.xsl
  makes of it now (`make manual` rewrites it), and every relative link in
  it and in docs/manual/README.md, docs/monitoring.md and
  docs/log-messages.md leads to a file, and to a heading there;
- the pages render to HTML with httpd's own stylesheet, manual.en.xsl of
  trunk's docs/manual/style (from the same tarball; libxslt needs one
  attribute httpd's Xalan build does not, added to the extracted copy),
  into build/manual-html/mod/: every directive has its anchor there, every
  link to a page of this manual lands on an anchor it has, every other
  link between module pages names one of httpd's, and no page takes the
  name of one of httpd's (module names from trunk's source, its MPMs, and
  the manual's own pages such as mpm_common and core).  Without the
  tarball, "not run" (with CI=true: a failure).

Ends with 'manual: N passed, N failed'.
"""

import html.entities
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET

import checklist

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MANUAL = os.path.join(TOP, "docs", "manual")
MOD = os.path.join(MANUAL, "mod")
STYLE = os.path.join(MANUAL, "style", "markdown.xsl")
SOURCES = ("server", "modules")
HTTPD_SRC_DIR = os.environ.get("HTTPD_SRC_DIR") or os.path.join(
    os.path.dirname(TOP), "shared", "httpd-src")
HTTPD_TRUNK = os.path.join(HTTPD_SRC_DIR, "httpd-trunk.tar.xz")
# httpd's common.dtd reads three XHTML entity sets by public identifier
# from the web; the manual uses none of their entities, so an offline
# catalog maps each to an empty file.
XHTML_ENTITY_SETS = ("-//W3C//ENTITIES Latin 1 for XHTML//EN",
                     "-//W3C//ENTITIES Symbols for XHTML//EN",
                     "-//W3C//ENTITIES Special for XHTML//EN")
XHTML_ENTITY_FILES = ("http://www.w3.org/TR/xhtml1/DTD/xhtml-lat1.ent",
                      "http://www.w3.org/TR/xhtml1/DTD/xhtml-symbol.ent",
                      "http://www.w3.org/TR/xhtml1/DTD/xhtml-special.ent")
# The page of the common MPM directives, as this MPM implements them.
COMMON = "prefork_buckets_common"
HTML_OUT = os.path.join(TOP, "build", "manual-html")
# Pages of httpd's manual that are not modules (docs/manual/mod/).
HTTPD_PAGES = {"core", "mpm_common", "directive-dict", "module-dict",
               "quickreference", "directives", "overrides", "index",
               "allmodules"}
XHTML = "{http://www.w3.org/1999/xhtml}"


def extract_httpd_dtd(tarball, into):
    """httpd trunk's docs/manual/style DTDs and entity files, written under
    @a into; returns the path of its modulesynopsis.dtd and a catalog."""
    with tarfile.open(tarball) as tar:
        members = [m for m in tar.getmembers()
                   if m.isfile() and re.fullmatch(
                       r"[^/]+/docs/manual/style/[^/]+\.(dtd|ent)", m.name)]
        for m in members:
            m.name = os.path.basename(m.name)
            tar.extract(m, into)
    empty = os.path.join(into, "empty.ent")
    open(empty, "w").close()
    catalog = os.path.join(into, "catalog.xml")
    with open(catalog, "w") as f:
        f.write('<?xml version="1.0"?>\n<catalog xmlns="urn:oasis:names:tc:'
                'entity:xmlns:xml:catalog">\n')
        for public in XHTML_ENTITY_SETS:
            f.write('  <public publicId="%s" uri="empty.ent"/>\n' % public)
        for system in XHTML_ENTITY_FILES:
            f.write('  <system systemId="%s" uri="empty.ent"/>\n' % system)
        f.write("</catalog>\n")
    return os.path.join(into, "modulesynopsis.dtd"), catalog


def validate_against_httpd(pages, check):
    """Each page against httpd's own DTD, where the tarball is here."""
    if not os.path.exists(HTTPD_TRUNK):
        why = ("%s not found: validation against httpd's own "
               "modulesynopsis.dtd not run" % HTTPD_TRUNK)
        if os.environ.get("CI") == "true":
            check("httpd_dtd_available", False, why + " (CI=true)")
        else:
            print("not run: " + why)
        return
    tmp = tempfile.mkdtemp(prefix="pfb-httpd-dtd-")
    try:
        dtd, catalog = extract_httpd_dtd(HTTPD_TRUNK, tmp)
        check("httpd_dtd_extracted", os.path.exists(dtd), HTTPD_TRUNK)
        env = dict(os.environ, XML_CATALOG_FILES=catalog)
        for page in pages:
            run = subprocess.run(
                ["xmllint", "--noout", "--nonet", "--dtdvalid", dtd,
                 os.path.join(MOD, page)],
                capture_output=True, text=True, timeout=60, env=env)
            check("%s_valid_against_httpds_dtd" % page,
                  run.returncode == 0 and not run.stderr, run.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def httpd_page_names(tarball):
    """The names httpd's manual gives its module pages: every module of
    trunk's source (modules/*/mod_*.c), its MPMs (server/mpm/*/), and the
    manual's other pages there."""
    names = set(HTTPD_PAGES)
    with tarfile.open(tarball) as tar:
        for name in tar.getnames():
            m = re.fullmatch(r"[^/]+/modules/.+/(mod_\w+)\.c", name)
            if m:
                names.add(m.group(1))
            m = re.fullmatch(r"[^/]+/server/mpm/(\w+)/\1\.c", name)
            if m:
                names.add(m.group(1))
                names.add("mpm_" + m.group(1))
    return names


def extract_httpd_style(tarball, manual):
    """trunk's docs/manual/style under @a manual/style.  httpd builds its
    manual with Xalan; libxslt recognises EXSLT's func:function only where
    the stylesheet lists func among its extension-element-prefixes, which
    overrideindex.xsl (not used for module pages, but included by
    common.xsl) does not: that one attribute is added here."""
    with tarfile.open(tarball) as tar:
        members = []
        for m in tar.getmembers():
            parts = m.name.split("/", 3)
            if len(parts) == 4 and parts[1:3] == ["docs", "manual"] \
                    and parts[3].startswith("style") \
                    and (m.isfile() or m.isdir()):
                m.name = parts[3]
                members.append(m)
        tar.extractall(manual, members)
    path = os.path.join(manual, "style", "xsl", "overrideindex.xsl")
    with open(path) as f:
        text = f.read()
    text = text.replace('exclude-result-prefixes="exslt func httpd set str">',
                        'exclude-result-prefixes="exslt func httpd set str"'
                        ' extension-element-prefixes="func">', 1)
    with open(path, "w") as f:
        f.write(text)


def render_with_httpd(docs, check):
    """The pages as httpd's manual.en.xsl renders them, into HTML_OUT."""
    if not os.path.exists(HTTPD_TRUNK):
        why = ("%s not found: the manual rendered with httpd's manual.en.xsl"
               " not run" % HTTPD_TRUNK)
        if os.environ.get("CI") == "true":
            check("httpd_stylesheet_available", False, why + " (CI=true)")
        else:
            print("not run: " + why)
        return
    httpd_pages = httpd_page_names(HTTPD_TRUNK)
    check("httpd_page_names_found", "mod_status" in httpd_pages
          and "prefork" in httpd_pages, sorted(httpd_pages)[:10])
    for name in docs:
        check("%s_name_is_not_one_of_httpds" % name, name not in httpd_pages,
              "httpd's manual has a page %s.html: a builder could not add "
              "this one to httpd's tree" % name)
    tmp = tempfile.mkdtemp(prefix="pfb-manual-html-")
    try:
        manual = os.path.join(tmp, "manual")
        os.makedirs(os.path.join(manual, "mod"))
        extract_httpd_style(HTTPD_TRUNK, manual)
        _, catalog = extract_httpd_dtd(HTTPD_TRUNK, tmp)
        env = dict(os.environ, XML_CATALOG_FILES=catalog)
        out_dir = os.path.join(HTML_OUT, "mod")
        shutil.rmtree(HTML_OUT, ignore_errors=True)
        os.makedirs(out_dir)
        # What httpd's build writes beside each page: its metafile (the
        # reference document and the languages), and the module list.
        with open(os.path.join(manual, "mod", "allmodules.xml"), "w") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                    "<modulefilelist>\n%s</modulefilelist>\n"
                    % "".join("<modulefile>%s.xml</modulefile>\n" % n
                              for n in sorted(docs)))
        ids = {}
        for name in sorted(docs):
            shutil.copy(os.path.join(MOD, name + ".xml"),
                        os.path.join(manual, "mod"))
            with open(os.path.join(manual, "mod", name + ".xml.meta"),
                      "w") as f:
                f.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                        '<metafile reference="%s.xml">\n'
                        "  <basename>%s</basename>\n  <path>/mod/</path>\n"
                        "  <relpath>..</relpath>\n"
                        "  <variants><variant>en</variant></variants>\n"
                        "</metafile>\n" % (name, name))
            run = subprocess.run(
                ["xsltproc", "--nonet", "../style/manual.en.xsl",
                 name + ".xml"], cwd=os.path.join(manual, "mod"),
                capture_output=True, text=True, timeout=120, env=env)
            # httpd's stylesheet reports links it leaves out ("Removing
            # link" to a directive's own entry) and hints; anything else
            # is an error.
            noise = [line for line in run.stderr.splitlines()
                     if line and not line.startswith(("Removing link",
                                                      "link to '"))]
            ok = run.returncode == 0 and not noise
            check("%s_renders_with_httpds_manual_xsl" % name, ok,
                  "\n".join(noise[:10]))
            if not ok:
                continue
            out = os.path.join(out_dir, name + ".html")
            with open(out, "w") as f:
                f.write(run.stdout)
            try:
                # XHTML's DTD defines the HTML entities, which a parser
                # without the DTD does not know.
                page = ET.fromstring(re.sub(
                    r"&([A-Za-z]\w*);",
                    lambda e: "&#%d;" % html.entities.name2codepoint[
                        e.group(1)] if e.group(1) in
                    html.entities.name2codepoint and e.group(1) not in
                    ("amp", "lt", "gt", "quot") else e.group(0),
                    run.stdout).encode())
            except ET.ParseError as e:
                check("%s_html_is_xhtml" % name, False, str(e))
                continue
            ids[name] = ({e.get("id") for e in page.iter() if e.get("id")},
                         [e.get("href") for e in page.iter(XHTML + "a")
                          if e.get("href")])
            own = [d.findtext("name").strip()
                   for d in docs[name].findall("directivesynopsis")
                   if d.get("location") is None]
            missing = [d for d in own if d.lower() not in ids[name][0]]
            check("%s_html_has_every_directive" % name, not missing,
                  "no anchor for %s" % missing)
        for name, (_, hrefs) in sorted(ids.items()):
            bad = []
            for href in hrefs:
                m = re.fullmatch(r"(?:\.\./mod/)?([\w.-]+)\.html(?:#(.*))?",
                                 href)
                if not m:
                    continue        # httpd's navigation, absolute links
                page, anchor = m.group(1), m.group(2)
                if page in ids:
                    if anchor and anchor not in ids[page][0]:
                        bad.append(href)
                elif page not in httpd_pages:
                    bad.append(href)
            check("%s_html_links_land" % name, not bad, "%s" % bad)
        print("  rendered with httpd's manual.en.xsl: %s"
              % os.path.relpath(out_dir, TOP))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def registered_directives(path):
    """Names of the AP_INIT_* entries of the command table the module
    structure in @path names, wherever among the C files of @path's folder
    and the folders below it the table is defined (the MPM's is in
    prefork_directives.c, its module structure in prefork.c)."""
    text = open(path).read()
    named = re.search(r"(\w+),\s*/\*\s*command apr_table_t", text)
    if named is None or named.group(1) == "NULL":
        return []
    table_re = re.compile(r"command_rec\s+%s\s*\[\s*\]\s*=\s*\{(.*?)\n\};"
                          % re.escape(named.group(1)), re.S)
    for dirpath, _, files in sorted(os.walk(os.path.dirname(path))):
        for name in sorted(f for f in files if f.endswith(".c")):
            with open(os.path.join(dirpath, name)) as f:
                table = table_re.search(f.read())
            if table:
                return re.findall(r'AP_INIT_\w+\(\s*"([^"]+)"',
                                  table.group(1))
    return []


def find_source(name):
    for top in SOURCES:
        for dirpath, _, files in os.walk(os.path.join(TOP, top)):
            if name in files:
                return os.path.join(dirpath, name)
    return None


def render(xml_path):
    return subprocess.run(["xsltproc", STYLE, xml_path], capture_output=True,
                          text=True, timeout=60, check=True).stdout


def heading_anchors(path):
    """GitHub's anchors of a Markdown file's headings."""
    anchors = set()
    for m in re.finditer(r"^#+\s+(.*)$", open(path).read(), re.M):
        text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
        anchors.add(text.replace(" ", "-"))
    return anchors


def broken_links(md_path):
    problems = []
    text = open(md_path).read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(md_path), path)) \
            if path else md_path
        if not os.path.exists(full):
            problems.append("%s: no file %s" % (target, path))
        elif anchor and full.endswith(".md") \
                and anchor not in heading_anchors(full):
            problems.append("%s: no heading #%s in %s"
                            % (target, anchor, os.path.relpath(full, TOP)))
    return problems


def main():
    results = {}
    check = checklist.recorder(results)

    pages = sorted(f for f in os.listdir(MOD) if f.endswith(".xml"))
    check("manual_has_pages", pages)
    docs = {}
    for page in pages:
        path = os.path.join(MOD, page)
        try:
            run = subprocess.run(["xmllint", "--valid", "--noout", path],
                                 capture_output=True, text=True, timeout=60)
            ok, out = run.returncode == 0 and not run.stderr, run.stderr
        except FileNotFoundError:
            ok, out = False, "xmllint missing: apt-get install libxml2-utils"
        check("%s_valid" % page, ok, out)
        docs[page[:-4]] = ET.parse(path).getroot()

    validate_against_httpd(pages, check)
    render_with_httpd(docs, check)
    for name, root in sorted(docs.items()):
        for entry in [root] + root.findall("directivesynopsis"):
            compat = entry.find("compatibility")
            text = " ".join("".join(compat.itertext()).split()) \
                if compat is not None else ""
            # httpd's Compatibility is one line: what differs goes in the
            # usage text.
            check("%s:%s_compatibility_is_one_line"
                  % (name, entry.findtext("name").strip()),
                  len(text) <= 120 and ". " not in text,
                  repr(text))

    common = docs.get(COMMON)
    for name, root in sorted(docs.items()):
        status = (root.findtext("status") or "").strip()
        own = {d.findtext("name").strip(): d
               for d in root.findall("directivesynopsis")
               if d.get("location") is None}
        refs = {d.findtext("name").strip(): d.get("location")
                for d in root.findall("directivesynopsis")
                if d.get("location") is not None}
        check("%s_has_status" % name, status)
        for directive, entry in sorted(own.items()):
            where = "%s:%s" % (name, directive)
            modules = [m.text.strip() for m in entry.findall("modulelist/module")]
            for part in ("description", "syntax", "default", "compatibility"):
                check("%s_has_%s" % (where, part),
                      "".join(entry.find(part).itertext()).strip()
                      if entry.find(part) is not None else False)
            check("%s_has_context" % where,
                  entry.findall("contextlist/context"))
            check("%s_syntax_starts_with_name" % where,
                  "".join(entry.find("syntax").itertext()).strip()
                  .startswith(directive + " ")
                  if entry.find("syntax") is not None else False)
            check("%s_has_module" % where,
                  modules or name != COMMON)
        for directive, location in sorted(refs.items()):
            target = docs.get(location)
            check("%s:%s_reference_resolves" % (name, directive),
                  target is not None and any(
                      d.findtext("name").strip() == directive
                      and d.get("location") is None
                      for d in target.findall("directivesynopsis")),
                  "no full entry in %s.xml" % location)

        source_name = (root.findtext("sourcefile") or "").strip()
        if not source_name:
            continue
        source = find_source(source_name)
        check("%s_sourcefile_exists" % name, source, source_name)
        if not source:
            continue
        registered = registered_directives(source)
        documented = set(own)
        in_common = set()
        if common is not None:
            for d in common.findall("directivesynopsis"):
                if name in [m.text.strip()
                            for m in d.findall("modulelist/module")]:
                    in_common.add(d.findtext("name").strip())
        documented |= in_common
        missing = sorted(set(registered) - documented)
        stale = sorted(documented - set(registered))
        print("  %s: %d directives in %s, %d documented"
              % (name, len(registered), os.path.relpath(source, TOP),
                 len(documented)))
        check("%s_every_directive_documented" % name, not missing,
              "no entry for %s" % missing)
        check("%s_no_stale_entry" % name, not stale,
              "%s registers no %s" % (source_name, stale))
        check("%s_both_places_not_twice" % name,
              not (set(own) & in_common), sorted(set(own) & in_common))
        unreferenced = sorted(d for d in in_common
                              if refs.get(d) != COMMON)
        check("%s_references_its_common_entries" % name, not unreferenced,
              "add <directivesynopsis location=\"%s\"> for %s"
              % (COMMON, unreferenced))

    for page in pages:
        md = os.path.join(MOD, page[:-4] + ".md")
        try:
            rendered = render(os.path.join(MOD, page))
        except (OSError, subprocess.CalledProcessError) as e:
            check("%s_renders" % page, False, str(e))
            continue
        current = os.path.exists(md) and open(md).read() == rendered
        check("%s_rendering_current" % page, current,
              "docs/manual/mod/%s.md is not what the XML gives: make manual"
              % page[:-4])
        if current:
            problems = broken_links(md)
            check("%s_links_resolve" % page[:-4], not problems,
                  "; ".join(problems))
    index = os.path.join(MANUAL, "README.md")
    check("manual_index_exists", os.path.exists(index))
    # The pages the manual's pages and the alerts' runbook_url link into.
    for doc in (index, os.path.join(TOP, "docs", "monitoring.md"),
                os.path.join(TOP, "docs", "log-messages.md")):
        if os.path.exists(doc):
            problems = broken_links(doc)
            check("%s_links_resolve" % os.path.relpath(doc, TOP),
                  not problems, "; ".join(problems))

    failed = sum(1 for ok in results.values() if not ok)
    print("manual: %d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
