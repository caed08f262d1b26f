#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A result folder's shape, and reading a file of it wherever it lies.

  python3 bench/pack.py DIR...      # pack each folder (again)

A published folder keeps as plain files what a reader opens: its reports
and notes (*.md), pictures (*.png, *.svg), the results its reports are
made from (results.json, or results.json.gz, NAME.results.json.gz,
wakeorder.py's results.jsonl and host.json, bench_stock.py's
summary.json), the small summaries documents read or
link (a model's prediction.json, pool_cause.py's cause.txt) and the
scripts of a measurement made by hand (*.py, *.sh).  Everything else
(configurations, per-run latency histograms, raw.log, results.csv, chart
data, strace and perf output ...) goes into one archive at the folder's
top, raw.tar.xz, subfolders' files included.  A gzip'd file is stored
uncompressed under its name less .gz: xz then compresses across the
histograms, where gzip compressed each alone.

Packing is deterministic (members sorted, no times or owners), and an
archive whose members would not change is not rewritten, so packing a
folder again leaves git with nothing to commit.  Loose files replace the
members of the same name; a member whose name now stays plain comes out
as a plain file; no other member is ever dropped.

The scripts read a folder's files through exists() and open_text(),
which take the path the file had before packing: the plain file where
there is one, else the member of the nearest raw.tar.xz above it (a
gzip'd file's member decompressed).  A script that adds to a packed
folder takes out a file it appends to first (take_out), and the report
writers pack the folder again when they are done (keep_shape), so a
packed folder stays packed.  A folder that has no archive yet (a suite
run under bench-results/) stays loose until pack()."""

import fnmatch
import gzip
import io
import os
import sys
import tarfile

ARCHIVE = "raw.tar.xz"
# What stays a plain file, by name (see the docstring).
KEPT = ("*.md", "*.png", "*.svg",
        "results.json", "results.json.gz", "*.results.json.gz",
        "results.jsonl", "host.json", "summary.json", "prediction.json",
        "cause.txt",
        "*.py", "*.sh")
# xz's preset: the largest folder (2cpu-20261128-pool) packs in about
# 20 s on one CPU.
PRESET = 9

_members_cache = {}


def kept(name):
    """Whether a file of this name stays plain."""
    base = os.path.basename(name)
    return any(fnmatch.fnmatchcase(base, p) for p in KEPT)


def members(archive):
    """{name: bytes} of an archive, cached while the file is unchanged."""
    st = os.stat(archive)
    key = os.path.abspath(archive)
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _members_cache.get(key)
    if cached and cached[0] == stamp:
        return cached[1]
    found = {}
    with tarfile.open(archive, "r:xz") as tar:
        for info in tar:
            if info.isfile():
                found[info.name] = tar.extractfile(info).read()
    _members_cache[key] = (stamp, found)
    return found


def archive_above(path):
    """The nearest raw.tar.xz in path's directory or above it, or None."""
    d = os.path.dirname(os.path.abspath(path))
    while True:
        candidate = os.path.join(d, ARCHIVE)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _member(path):
    """(bytes, whether still gzip'd) of path's member, or None."""
    archive = archive_above(path)
    if not archive:
        return None
    name = os.path.relpath(os.path.abspath(path), os.path.dirname(archive))
    held = members(archive)
    if name in held:
        return held[name], name.endswith(".gz")
    if name.endswith(".gz") and name[:-3] in held:
        return held[name[:-3]], False
    return None


def exists(path):
    """Whether the file is there, plain or packed."""
    return os.path.exists(path) or _member(path) is not None


def open_text(path):
    """The file's text, decompressed where it is gzip'd, from the plain
    file or the archive."""
    if os.path.exists(path):
        if path.endswith(".gz"):
            return gzip.open(path, "rt", encoding="utf-8")
        return open(path, encoding="utf-8")
    found = _member(path)
    if found is None:
        raise FileNotFoundError("%s: neither a file nor in an archive "
                                "above it" % path)
    data, gzipped = found
    if gzipped:
        data = gzip.decompress(data)
    return io.StringIO(data.decode("utf-8"))


def texts(folder, suffixes):
    """{name: text} of the members of folder's own archive whose names
    end with one of suffixes."""
    archive = os.path.join(folder, ARCHIVE)
    if not os.path.isfile(archive):
        return {}
    return {name: data.decode("utf-8", "replace")
            for name, data in members(archive).items()
            if name.endswith(suffixes)}


def take_out(path):
    """Before a script appends to path: where the file is packed, write
    the member out as the plain file again (pack() puts it back whole)."""
    if os.path.exists(path):
        return
    found = _member(path)
    if found is not None:
        with open(path, "wb") as f:
            f.write(found[0])


def _loose(folder):
    """Files under folder that do not stay plain, as names relative to
    it, sorted."""
    found = []
    for d, dirs, files in os.walk(folder):
        dirs.sort()
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), folder)
            if rel != ARCHIVE and not rel.endswith(ARCHIVE + ".tmp") \
                    and not kept(f):
                found.append(rel)
    return sorted(found)


def _write(archive, held):
    tmp = archive + ".tmp"
    with tarfile.open(tmp, "w:xz", preset=PRESET,
                      format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(held):
            info = tarfile.TarInfo(name)
            info.size = len(held[name])
            info.mode = 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(held[name]))
    os.replace(tmp, archive)


def pack(folder):
    """Moves every loose file of folder that does not stay plain into its
    raw.tar.xz, and members that stay plain out of it.  Returns the names
    moved in."""
    loose = _loose(folder)
    archive = os.path.join(folder, ARCHIVE)
    old = members(archive) if os.path.isfile(archive) else {}
    plain = [name for name in old if kept(name)]
    if not loose and not plain:
        return []
    twice = [rel for rel in loose if rel + ".gz" in loose]
    if twice:
        raise ValueError("%s: both %s and %s.gz; keep one"
                         % (folder, twice[0], twice[0]))
    held = dict(old)
    for name in plain:
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(held[name])
        del held[name]
    for rel in loose:
        with open(os.path.join(folder, rel), "rb") as f:
            data = f.read()
        if rel.endswith(".gz"):
            data, rel = gzip.decompress(data), rel[:-3]
        held[rel] = data
    if not held:
        os.unlink(archive)
    elif held != old:
        _write(archive, held)
    for rel in loose:
        os.unlink(os.path.join(folder, rel))
    for d, dirs, files in os.walk(folder, topdown=False):
        if d != folder and not os.listdir(d):
            os.rmdir(d)
    return loose


def keep_shape(path):
    """After a script wrote into a folder: where the folder (or one above
    it) is packed, pack that one again."""
    archive = archive_above(os.path.join(path, ARCHIVE))
    if archive:
        pack(os.path.dirname(archive))


def main(argv):
    if not argv or any(a.startswith("-") for a in argv):
        print(__doc__.split("\n\n")[0])
        return 2
    for folder in argv:
        if not os.path.isdir(folder):
            print("pack: %s is not a folder" % folder)
            return 1
        moved = pack(folder)
        print("%s: %d files into %s" % (folder, len(moved), ARCHIVE))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
