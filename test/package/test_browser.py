#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""/bucket-status in a real browser: Debian's chromium, headless.

  python3 test/package/test_browser.py

Starts this MPM with mod_bucket_status (4 buckets, idle steering, so the
steering columns show), serves a little traffic, then has chromium load
the page twice: once printing the DOM it built (--dump-dom), which must
hold the summary, the bucket table with a row per bucket and its columns,
the balance table and the bar chart with a bar per bucket, and once taking
a screenshot, kept as build/bucket-status.png (a PNG of the window's
size, not blank).  Then the same against Debian's prefork with the module
loaded: the page says that bucket data is unavailable and why.  chromium
runs with a fresh profile and with its own network features off
(background networking, component updates, sync, first-run), so it
fetches nothing but the page.  Ends with 'browser: N passed, N failed'.
"""

import html.parser
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))        # test/, for pfbtest
from pfbtest import (STATUS_LOAD, STATUS_LOCATION, STOCK_PREFORK,  # noqa: E402
                     TOP, Load, Server)
from pfbtest.tally import report  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM", "chromium")
SCREENSHOT = os.path.join(TOP, "build", "bucket-status.png")
WINDOW = (1200, 900)
BUCKETS = 4

results = {}


def check(label, ok, detail=""):
    results[label] = bool(ok)
    print("%s %s%s" % ("ok  " if ok else "FAIL", label,
                       (": " + detail) if detail and not ok else ""),
          flush=True)
    return bool(ok)


def chromium(args, profile):
    """Runs headless chromium; returns (rc, stdout)."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-extensions",
            "--user-data-dir=" + profile,
            "--window-size=%d,%d" % WINDOW] + args
    try:
        run = subprocess.run(argv, capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        return 124, ""
    return run.returncode, run.stdout


class Page(html.parser.HTMLParser):
    """The tables (rows of cells), the bars of the chart, and the text."""

    def __init__(self):
        super().__init__()
        self.tables, self.rects, self.text = [], 0, []
        self.row = self.cell = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.row = []
            self.tables[-1].append(self.row)
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []
        elif tag == "rect":
            self.rects += 1

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.row.append((tag, "".join(self.cell).strip()))
            self.cell = None
        elif tag == "tr":
            self.row = None

    def handle_data(self, data):
        self.text.append(data)
        if self.cell is not None:
            self.cell.append(data)


def png_size(path):
    """(width, height) from a PNG's IHDR, or None."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


def check_bucket_page(profile):
    conf = ("ListenBuckets %d\nListenBucketSteering idle\nStartServers 8\n"
            % BUCKETS) + STATUS_LOCATION
    with Server(extra=conf, extra_modules=STATUS_LOAD) as srv:
        srv.start()
        srv.wait_ready(BUCKETS)
        load = Load("127.0.0.1", srv.ports[0], concurrency=4,
                    max_requests=200).start().wait(120)
        check("traffic served", (load.ok, load.errors) == (200, {}),
              "%d ok, %s" % (load.ok, load.errors))
        url = srv.url("/bucket-status")
        rc, dom = chromium(["--dump-dom", url], profile)
        check("chromium loads the page", rc == 0 and "</html>" in dom,
              "exit %d" % rc)
        page = Page()
        page.feed(dom)
        text = " ".join(" ".join(page.text).split())
        check("the page's title and summary",
              "Listener bucket status" in text and "Mode" in text
              and "reuseport" in text and "Steering" in text, text[:300])
        buckets = [t for t in page.tables if t and t[0]
                   and ("th", "Bucket") == t[0][0]]
        ok = check("a bucket table", len(buckets) == 1,
                   "%d tables: %s" % (len(page.tables),
                                      [t[0] for t in page.tables if t]))
        if ok:
            header = [c for _, c in buckets[0][0]]
            rows = buckets[0][1:]
            check("its columns", header[:4] == ["Bucket", "Listener",
                                                "Children", "Idle"]
                  and "Accepted" in header and "Queue" in header
                  and "Steering idle" in header, str(header))
            check("a row per bucket, each with every column",
                  len(rows) == BUCKETS
                  and all(len(r) == len(header) for r in rows),
                  "%d rows" % len(rows))
            listener = "127.0.0.1:%d" % srv.ports[0]
            check("each row names its bucket and listener",
                  [r[0][1] for r in rows] == [str(b) for b in range(BUCKETS)]
                  and all(r[1][1] == listener for r in rows),
                  str([r[:2] for r in rows]))
            accepted = header.index("Accepted")
            total = sum(int(r[accepted][1]) for r in rows)
            check("the accepted connections add up to the traffic at least",
                  total >= 200, "total %d" % total)
        balance = [t for t in page.tables if t and t[0]
                   and ("th", "Over") == t[0][0]]
        check("a balance table over buckets and children",
              len(balance) == 1
              and [r[0][1] for r in balance[0][1:]] == ["buckets",
                                                        "children"],
              str(balance))
        check("a bar per bucket in the chart", page.rects == BUCKETS,
              "%d bars" % page.rects)
        if os.path.exists(SCREENSHOT):
            os.unlink(SCREENSHOT)
        rc, _ = chromium(["--screenshot=" + SCREENSHOT, url], profile)
        size = png_size(SCREENSHOT) if os.path.exists(SCREENSHOT) else None
        check("a screenshot in build/bucket-status.png",
              rc == 0 and size == WINDOW, "exit %d, size %s" % (rc, size))
        # A blank capture compresses to almost nothing.
        check("the screenshot is not blank",
              size and os.path.getsize(SCREENSHOT) > 20000,
              "%d bytes" % (os.path.getsize(SCREENSHOT) if size else 0))


def check_unavailable_page(profile):
    with Server(mpm=STOCK_PREFORK, extra=STATUS_LOCATION,
                extra_modules=STATUS_LOAD) as srv:
        srv.start()
        rc, dom = chromium(["--dump-dom", srv.url("/bucket-status")],
                           profile)
        page = Page()
        page.feed(dom)
        text = " ".join(" ".join(page.text).split())
        check("beside Debian's prefork the page says why there is no data",
              rc == 0 and "bucket data unavailable: the running MPM is "
              "prefork" in text and not page.tables, text[:300])


def main():
    if shutil.which(CHROMIUM) is None:
        print("chromium is missing: apt-get install chromium (tools/run.sh "
              "installs it)")
        print("browser: 0 passed, 1 failed")
        return 1
    os.makedirs(os.path.dirname(SCREENSHOT), exist_ok=True)
    profile = tempfile.mkdtemp(prefix="pfb-chromium-")
    try:
        check_bucket_page(profile)
        check_unavailable_page(profile)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    print("  screenshot: %s" % os.path.relpath(SCREENSHOT, TOP))
    return report("browser", results)


if __name__ == "__main__":
    sys.exit(main())
