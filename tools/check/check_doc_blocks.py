#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Every apache block the documents show starts, under this MPM and after
switching back.

  python3 tools/check/check_doc_blocks.py

The blocks: every ```apache block of README.md and of the Markdown under
docs/ (the manual's pages are rendered from its XML, so its examples are
among them), the indented <IfDirective> blocks of the packages'
README.Debian, and the lines mpm_prefork_buckets.conf (the package's
conffile) carries commented out, uncommented there.  Each goes into a
server configuration of its own (test/pfbtest's, with Debian's usual
modules: mod_authz_host for "Require local") and `apache2 -t` (httpd's
configtest) must say "Syntax OK" three times: with this MPM, with
Debian's prefork and with Debian's event.  A block that an admin keeps
after switching back (README's recommended lines in Debian's
mpm_prefork.conf, the status module beside another MPM) must not stop the
server that comes back, so every block must pass with every MPM; lines
only this MPM knows go inside <IfDirective ListenBucketSteering> (or the
directive they set), which the others skip.

Paths the packages install are read as the built files: a block's
LoadModule of /usr/lib/apache2/modules/mod_bucket_status.so or
mod_mpm_prefork_buckets.so loads build/'s.  Ends with 'doc-blocks: N
passed, N failed'.
"""

import glob
import os
import re
import subprocess
import sys

# The top's test/, for pfbtest (the one bootstrap, see test/pfbtest/).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "test"))
import checklist  # noqa: E402
from pfbtest import (HTTPD, MODULES, MPM_SO, STATUS_SO,  # noqa: E402
                     STOCK_EVENT, STOCK_PREFORK, TOP, Server, free_port)

CONFFILE = os.path.join(TOP, "server", "mpm", "prefork",
                        "mpm_prefork_buckets.conf")
# Where the packages put the modules, and the files built here.
INSTALLED = {"/usr/lib/apache2/modules/mod_bucket_status.so": STATUS_SO,
             "/usr/lib/apache2/modules/mod_mpm_prefork_buckets.so": MPM_SO}
# Debian's modules a block may rely on beyond the harness's own.
DEBIAN_MODULES = (("authz_host_module", "mod_authz_host.so"),
                  ("alias_module", "mod_alias.so"))


def debian_prefork():
    """Debian's own prefork, also while the -divert package has moved it
    aside (the package tests run under the same lock as this check, but a
    machine may have the package installed)."""
    distrib = STOCK_PREFORK + ".distrib"
    return distrib if os.path.exists(distrib) else STOCK_PREFORK


MPMS = (("this MPM", MPM_SO), ("Debian's prefork", debian_prefork()),
        ("Debian's event", STOCK_EVENT))


def markdown_files():
    files = [os.path.join(TOP, "README.md")]
    for dirpath, _, names in os.walk(os.path.join(TOP, "docs")):
        files += [os.path.join(dirpath, n) for n in sorted(names)
                  if n.endswith(".md")]
    return files


def blocks():
    """(where, text) of every block to check."""
    found = []
    for path in markdown_files():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r"^```apache\n(.*?)^```", text, re.M | re.S):
            line = text.count("\n", 0, m.start()) + 1
            found.append(("%s:%d" % (os.path.relpath(path, TOP), line),
                          m.group(1)))
    for path in sorted(glob.glob(os.path.join(TOP, "debian",
                                              "*.README.Debian"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r"^( +)<IfDirective [^\n]*\n.*?^\1</IfDirective>",
                             text, re.M | re.S):
            line = text.count("\n", 0, m.start()) + 1
            indent = len(m.group(1))
            found.append(("%s:%d" % (os.path.relpath(path, TOP), line),
                          "\n".join(l[indent:] for l in
                                    m.group(0).splitlines()) + "\n"))
    with open(CONFFILE, encoding="utf-8") as f:
        text = f.read()
    # The conffile as an admin leaves it once the commented lines are
    # uncommented: the whole file, those lines live.
    live = re.sub(r"^#(<IfDirective|    Listen|</IfDirective)", r"\1", text,
                  flags=re.M)
    if live != text:
        found.append(("%s, its commented lines uncommented"
                      % os.path.relpath(CONFFILE, TOP), live))
    return found


def with_built_modules(block):
    """The block, with the installed modules' paths read as build/'s, and
    whether it loads the status module itself."""
    loads_status = False
    for installed, built in INSTALLED.items():
        if installed in block:
            block = block.replace(installed, built)
            loads_status |= built == STATUS_SO
    return block, loads_status


def configtest(block, mpm):
    """(ok, output) of httpd -t on a configuration holding @a block."""
    block, loads_status = with_built_modules(block)
    modules = "".join("<IfModule !%s>\n    LoadModule %s %s\n</IfModule>\n"
                      % (name, name, os.path.join(MODULES, so))
                      for name, so in DEBIAN_MODULES
                      if os.path.exists(os.path.join(MODULES, so)))
    if not loads_status:
        modules += "LoadModule bucket_status_module %s\n" % STATUS_SO
    srv = Server(extra=block, mpm=mpm, extra_modules=modules,
                 check_log=False)
    try:
        srv.ports = [free_port()]
        srv.write_conf()
        run = subprocess.run([HTTPD, "-t", "-f", srv.conf],
                             capture_output=True, text=True, timeout=60)
        out = (run.stdout + run.stderr).strip()
        return run.returncode == 0 and "Syntax OK" in out, out
    finally:
        srv.cleanup()


def main():
    results = {}
    check = checklist.recorder(results)

    for label, path in (("the MPM", MPM_SO), ("the status module",
                                              STATUS_SO)):
        if not os.path.exists(path):
            print("FAIL %s is not built: %s (make)" % (label, path))
            print("doc-blocks: 0 passed, 1 failed")
            return 1
    found = blocks()
    check("documents_show_apache_blocks", len(found) >= 5,
          "%d found" % len(found))
    check("readme_recommended_block_found",
          any(where.startswith("README.md") and "ListenBucketSteering" in b
              for where, b in found))
    for where, block in found:
        for name, mpm in MPMS:
            ok, out = configtest(block, mpm)
            check("%s under %s" % (where, name), ok,
                  "\n%s\n--- httpd -t says:\n%s" % (block.rstrip(), out))
    failed = sum(1 for ok in results.values() if not ok)
    print("doc-blocks: %d passed, %d failed"
          % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
