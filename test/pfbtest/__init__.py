# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The one test harness: starts the real httpd with the built modules (or
Debian's stock MPMs), reads its logs and scoreboard, and loads it.  Used by
test/integration, the load suite (bench/), test/package,
test/valgrind_parent.py and tools/render-dashboard.py.  It needs only
Python's standard library, so the package tests run it where the packages
are installed.

It lives in test/, so test/ must be on sys.path.  Scripts in test/ have it
there already; scripts one level down (test/integration/run.py,
test/package/*.py) add their parent directory with the same two lines:

    sys.path.insert(0, os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))        # test/, for pfbtest

the load suite's scripts (bench/*.py) add the top's test/, and anything
else runs with PYTHONPATH=test.  What it runs comes from the
environment (HTTPD, HTTPD_MODULES_DIR, MPM_SO, STATUS_SO, TEST_HANDLER_SO:
see pfbtest.config).  Helpers that are not about a server have modules of
their own: pfbtest.metrics (Prometheus expositions), pfbtest.tally (the
package tests' closing line), pfbtest.sockets (a server's sockets, read
from inside).
"""

from .config import (HTTPD, MODULES, MPM_SO, MPM_STATIC, STATUS_SO,
                     TEST_HANDLER_SO, HOSTILE_SO, NOREUSEPORT_SO, NOBPF_SO,
                     NOBPF_MPM_SO,
                     STOCK_PREFORK, STOCK_EVENT, RUN_USER, STATUS_LOAD,
                     STATUS_LOCATION, TEST_HANDLER_LOAD, TOP)
from .load import Load, get_url, http_get, read_response
from .logs import unexpected_lines
from .procs import (STAT_PPID, STAT_PGRP, free_port, run_user_ids,
                    live_pids, is_alive, proc_status, listen_sockets)
from .server import Server, Scoreboard, StartupError, exit_on_sigterm
from .waits import DEADLINE, wait_for

__all__ = [
    "HTTPD", "MODULES", "MPM_SO", "MPM_STATIC", "STATUS_SO",
    "TEST_HANDLER_SO", "HOSTILE_SO", "NOREUSEPORT_SO", "NOBPF_SO",
    "NOBPF_MPM_SO",
    "STOCK_PREFORK", "STOCK_EVENT", "RUN_USER", "STATUS_LOAD",
    "STATUS_LOCATION", "TEST_HANDLER_LOAD", "TOP", "Load", "get_url",
    "http_get", "read_response", "unexpected_lines",
    "STAT_PPID", "STAT_PGRP", "free_port", "run_user_ids", "live_pids",
    "is_alive", "proc_status", "listen_sockets", "Server", "Scoreboard",
    "StartupError", "exit_on_sigterm", "DEADLINE", "wait_for",
]
