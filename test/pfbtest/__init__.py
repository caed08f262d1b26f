# Licensed under the Apache License, Version 2.0; see LICENSE.
"""The one test harness: starts the real httpd with the built modules, reads
its logs and scoreboard, and loads it.  Used by test/integration, test/load
and test/valgrind_parent.py.

It lives in test/, so test/ must be on sys.path.  Scripts in test/ have it
there already; scripts one level down (test/integration/run.py,
test/load/*.py) add their parent directory with the same two lines:

    sys.path.insert(0, os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))        # test/, for pfbtest

and anything else runs with PYTHONPATH=test.  What it runs comes from the
environment (HTTPD, HTTPD_MODULES_DIR, MPM_SO, STATUS_SO, TEST_HANDLER_SO:
see pfbtest.config).
"""

from .config import (HTTPD, MODULES, MPM_SO, MPM_STATIC, STATUS_SO,
                     TEST_HANDLER_SO, HOSTILE_SO, NOREUSEPORT_SO, NOBPF_SO,
                     NOBPF_MPM_SO,
                     STOCK_PREFORK, STOCK_EVENT, RUN_USER, STATUS_LOAD,
                     TEST_HANDLER_LOAD, TOP)
from .load import Load, http_get, read_response
from .procs import (STAT_PPID, STAT_PGRP, free_port, run_user_ids,
                    live_pids, is_alive, proc_status, listen_sockets)
from .server import (Server, Scoreboard, StartupError, DEADLINE,
                     exit_on_sigterm)

__all__ = [
    "HTTPD", "MODULES", "MPM_SO", "MPM_STATIC", "STATUS_SO",
    "TEST_HANDLER_SO", "HOSTILE_SO", "NOREUSEPORT_SO", "NOBPF_SO",
    "NOBPF_MPM_SO",
    "STOCK_PREFORK", "STOCK_EVENT", "RUN_USER", "STATUS_LOAD",
    "TEST_HANDLER_LOAD", "TOP", "Load", "http_get", "read_response",
    "STAT_PPID", "STAT_PGRP", "free_port", "run_user_ids", "live_pids",
    "is_alive", "proc_status", "listen_sockets", "Server", "Scoreboard",
    "StartupError", "DEADLINE", "exit_on_sigterm",
]
