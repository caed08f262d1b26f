# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Processes and ports, read from /proc and the kernel."""

import pwd
import socket
import subprocess

from .config import RUN_USER

# Fields of /proc/PID/stat after the command name.
STAT_STATE = 0
STAT_PPID = 1
STAT_PGRP = 2


def free_port(host="127.0.0.1"):
    """A port the kernel considers free on host right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run_user_ids():
    """(uid, gid) the servers' children run as."""
    entry = pwd.getpwnam(RUN_USER)
    return entry.pw_uid, entry.pw_gid


def live_pids(field, value):
    """Pids of live (not zombie) processes whose /proc/PID/stat field
    (STAT_PPID, STAT_PGRP) equals value."""
    pids = []
    for entry in _proc_entries():
        fields = stat_fields(entry)
        if fields and int(fields[field]) == value and fields[STAT_STATE] != "Z":
            pids.append(entry)
    return pids


def stat_fields(pid):
    """/proc/PID/stat after the command name, or None when gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def is_alive(pid):
    fields = stat_fields(pid)
    return fields is not None and fields[STAT_STATE] != "Z"


def start_time(pid):
    """When a live process started (clock ticks since boot, field 22 of
    /proc/PID/stat), or None when it is gone or a zombie: with the pid,
    it names one process even after the pid is given to another."""
    fields = stat_fields(pid)
    if fields is None or fields[STAT_STATE] == "Z":
        return None
    return int(fields[19])


def processes_with_argument(argument):
    """Pids of live processes with `argument` among their command-line
    arguments (httpd's children keep the parent's command line)."""
    wanted = argument.encode()
    pids = []
    for pid in _proc_entries():
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if wanted in args and is_alive(pid):
            pids.append(pid)
    return pids


def proc_status(pid):
    """(VmRSS kB, open fds) of a process."""
    import os
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir("/proc/%d/fd" % pid))


def _proc_entries():
    import os
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def listen_sockets(port):
    """Listening TCP sockets on a port, from `ss -ltnH` (one line each)."""
    out = subprocess.run(["ss", "-ltnH", "sport = :%d" % port],
                         capture_output=True, text=True, timeout=30).stdout
    return [l for l in out.splitlines() if l.strip()]
