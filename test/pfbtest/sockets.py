# Licensed under the Apache License, Version 2.0; see LICENSE.
"""A server's listening sockets, read from inside: pidfd_getfd(2) gives the
harness a copy of the descriptor the server holds, so a test can read the
options the MPM set on each bucket socket with getsockopt()."""

import ctypes
import os
import re
import socket
import subprocess

SYS_PIDFD_GETFD = 438           # x86_64, arm64 and the generic table
TCP_DEFER_ACCEPT = getattr(socket, "TCP_DEFER_ACCEPT", 9)
IP_FREEBIND = getattr(socket, "IP_FREEBIND", 15)

_libc = ctypes.CDLL(None, use_errno=True)


def pidfd_getfd(pid, fd):
    """A descriptor of ours for descriptor `fd` of process `pid`."""
    pidfd = os.pidfd_open(pid)
    try:
        ours = _libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if ours < 0:
            err = ctypes.get_errno()
            raise OSError(err, "pidfd_getfd(%d, %d): %s"
                          % (pid, fd, os.strerror(err)))
        return ours
    finally:
        os.close(pidfd)


def listening_inodes(port):
    """inode -> (uid, backlog) of every socket listening on TCP `port`, any
    address, from `ss -ltneH` (uid is the socket's owner, the uid of the
    process that created it; Send-Q of a listener is its backlog)."""
    out = subprocess.run(["ss", "-ltneH", "sport = :%d" % port],
                         capture_output=True, text=True, timeout=30).stdout
    result = {}
    for line in out.splitlines():
        fields = line.split()
        uid = re.search(r"\buid:(\d+)", line)
        ino = re.search(r"\bino:(\d+)", line)
        if len(fields) < 3 or not ino:
            continue
        result[int(ino.group(1))] = (int(uid.group(1)) if uid else 0,
                                     int(fields[2]))
    return result


def process_socket_fds(pid):
    """inode -> fd for the sockets process `pid` holds."""
    result = {}
    base = "/proc/%d/fd" % pid
    for name in os.listdir(base):
        try:
            target = os.readlink(os.path.join(base, name))
        except OSError:
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", target)
        if m:
            result[int(m.group(1))] = int(name)
    return result


def listener_options(pid, port):
    """The options of every socket that process `pid` holds listening on
    TCP `port`: a list of dicts, in the order of the process's fds."""
    inodes = listening_inodes(port)
    held = process_socket_fds(pid)
    found = []
    for inode, fd in sorted(held.items(), key=lambda kv: kv[1]):
        if inode not in inodes:
            continue
        uid, backlog = inodes[inode]
        ours = pidfd_getfd(pid, fd)
        with socket.socket(fileno=ours) as s:
            found.append(read_options(s, fd=fd, uid=uid, backlog=backlog))
    return found


def read_options(s, **known):
    """The options the MPM copies from a Listen's socket to its
    duplicates (docs/design.md), and the address."""
    sol, tcp = socket.SOL_SOCKET, socket.IPPROTO_TCP
    opts = dict(known)
    opts.update({
        "family": s.family,
        "address": s.getsockname()[:2],
        "acceptconn": s.getsockopt(sol, socket.SO_ACCEPTCONN),
        "reuseport": s.getsockopt(sol, socket.SO_REUSEPORT),
        "reuseaddr": s.getsockopt(sol, socket.SO_REUSEADDR),
        "keepalive": s.getsockopt(sol, socket.SO_KEEPALIVE),
        "sndbuf": s.getsockopt(sol, socket.SO_SNDBUF),
        "rcvbuf": s.getsockopt(sol, socket.SO_RCVBUF),
        "nodelay": s.getsockopt(tcp, socket.TCP_NODELAY),
        "defer_accept": s.getsockopt(tcp, TCP_DEFER_ACCEPT),
    })
    if s.family == socket.AF_INET6:
        opts["v6only"] = s.getsockopt(socket.IPPROTO_IPV6,
                                      socket.IPV6_V6ONLY)
    # The MPM copies IP_FREEBIND at IPPROTO_IP for both families.
    opts["freebind"] = s.getsockopt(socket.IPPROTO_IP, IP_FREEBIND)
    return opts
