# Licensed under the Apache License, Version 2.0; see LICENSE.
"""What the tests run, from the environment, so that another build of
httpd or of the modules can be tested with the same tests.

  HTTPD              the httpd binary (default /usr/sbin/apache2)
  APACHECTL          Debian's apachectl, for servers started the way
                     admins start them (default /usr/sbin/apachectl); it
                     runs HTTPD through APACHE_HTTPD
  HTTPD_MODULES_DIR  where httpd's own modules live: mod_mime.so,
                     mod_status.so, mod_authz_core.so, mod_dir.so, and the
                     stock MPMs (default /usr/lib/apache2/modules)
  MPM_SO             this project's MPM module, or the word "static" when
                     the MPM is compiled into HTTPD (no LoadModule line is
                     written for it then)
  STATUS_SO          mod_bucket_status.so
  TEST_HANDLER_SO    mod_pfb_test_handler.so (every server loads it: the
                     harness reads the scoreboard through it)
  HOSTILE_SO         mod_pfb_hostile.so, a child that writes hostile values
                     wherever children can (test/modules/mod_pfb_hostile.c)
  NOREUSEPORT_SO, NOBPF_SO
                     the LD_PRELOAD shims of test/integration/*.c
  NOBPF_MPM_SO       the MPM built without its BPF programs (make
                     check-fallback-build: build-nobpf/mod_mpm_prefork.so)

Paths default to this checkout's build/ directory, whatever the current
directory is.
"""

import os

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(TOP, "build")


def _path(name, default):
    value = os.environ.get(name)
    return value if value else default


HTTPD = _path("HTTPD", "/usr/sbin/apache2")
APACHECTL = _path("APACHECTL", "/usr/sbin/apachectl")
MODULES = _path("HTTPD_MODULES_DIR", "/usr/lib/apache2/modules")
MPM_SO = _path("MPM_SO", os.path.join(BUILD, "mod_mpm_prefork.so"))
MPM_STATIC = MPM_SO == "static"
STATUS_SO = _path("STATUS_SO", os.path.join(BUILD, "mod_bucket_status.so"))
TEST_HANDLER_SO = _path("TEST_HANDLER_SO",
                        os.path.join(BUILD, "mod_pfb_test_handler.so"))
HOSTILE_SO = _path("HOSTILE_SO", os.path.join(BUILD, "mod_pfb_hostile.so"))
NOREUSEPORT_SO = _path("NOREUSEPORT_SO",
                       os.path.join(BUILD, "noreuseport.so"))
NOBPF_SO = _path("NOBPF_SO", os.path.join(BUILD, "nobpf.so"))
NOBPF_MPM_SO = _path("NOBPF_MPM_SO", os.path.join(TOP, "build-nobpf",
                                                  "mod_mpm_prefork.so"))

STOCK_PREFORK = os.path.join(MODULES, "mod_mpm_prefork.so")
STOCK_EVENT = os.path.join(MODULES, "mod_mpm_event.so")
RUN_USER = "www-data"

# LoadModule lines for the extra modules most tests want, and where the
# status module answers.
STATUS_LOAD = "LoadModule bucket_status_module %s\n" % STATUS_SO
STATUS_LOCATION = ("<Location /bucket-status>\n    SetHandler bucket-status\n"
                   "</Location>\n")
TEST_HANDLER_LOAD = ("LoadModule pfb_test_handler_module %s\n"
                     % TEST_HANDLER_SO)
