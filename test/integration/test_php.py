# Licensed under the Apache License, Version 2.0; see LICENSE.
"""mod_php under the children's system-call filter (guard/prefork_seccomp.c).

What PHP scripts, and programs they start, legitimately do with sockets
and processes must all work as before, setuid and setgid helpers
included (the filter leaves no_new_privs off); what native code in a
script's child can do to the bucket socket is refused or put right by the
parent.  Debian's mod_php (libapache2-mod-php, in tools/run.sh's
packages) is loaded as the load suite's php profile loads it.
"""

import errno
import os
import re
import unittest

from pfbtest import Server, http_get, MODULES, HOSTILE_SO

PHP_SO = os.path.join(MODULES, "libphp8.2.so")
PHP_LOAD = "LoadModule php_module %s\n" % PHP_SO
PHP_CONF = ("<FilesMatch \\.php$>\n    SetHandler application/x-httpd-php\n"
            "</FilesMatch>\n")
BUCKETS = ("ListenBuckets 2\nStartServers 4\nMinSpareServers 2\n"
           "MaxSpareServers 6\nMaxRequestWorkers 12\nServerLimit 12\n")
# Under make check-asan the sanitizer's runtime is preloaded into httpd, and
# it refuses PHP's dlopen() of shared extensions (RTLD_DEEPBIND): PHP then
# runs with its core alone (no conf.d), the script checks what the core
# offers, and the attacks come from mod_pfb_hostile's native code instead
# of FFI.
ASAN = bool(os.environ.get("PFB_ASAN_PRELOAD"))
HOSTILE_LOAD = ("LoadModule pfb_hostile_module %s\n<Location /hostile>\n"
                "    SetHandler pfb-hostile\n</Location>\n" % HOSTILE_SO)
# mod_php's children can take seconds to exit at a stop (see the load
# suite's php scenario): httpd then says it sends SIGTERM again.
PHP_STOP_TAGS = ("PFB00051", "AH00045")

# Every call a script or a program it runs may legitimately make on
# sockets and processes that comes near what the filter refuses; one line
# "ok NAME" or "FAIL NAME: why" each.
LEGITIMATE = r"""<?php
header("Content-Type: text/plain");
$port = intval($_GET["port"]);
function check($name, $ok, $why = "") {
    echo ($ok ? "ok " : "FAIL ") . $name . ($ok ? "" : ": " . $why) . "\n";
}
function run($cmd) {
    /* A plain environment: under make check-asan, httpd's holds the
     * sanitizer's runtime in LD_PRELOAD, which is no business of curl's. */
    $p = proc_open($cmd, [1 => ["pipe", "w"], 2 => ["pipe", "w"]], $pipes,
                   null, ["PATH" => "/usr/local/bin:/usr/bin:/bin"]);
    if ($p === false) {
        return [-1, "proc_open failed"];
    }
    $out = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
    return [proc_close($p), $out];
}

$status = file_get_contents("/proc/self/status");
check("this child runs under the filter",
      preg_match('/^Seccomp:\s+2$/m', $status), $status);
check("without no_new_privs", preg_match('/^NoNewPrivs:\s+0$/m', $status));

$srv = stream_socket_server("tcp://127.0.0.1:0", $errno, $errstr);
check("stream_socket_server", $srv !== false, $errstr);
$name = stream_socket_get_name($srv, false);
$cli = stream_socket_client("tcp://$name", $errno, $errstr, 5);
check("stream_socket_client", $cli !== false, $errstr);
$conn = stream_socket_accept($srv, 5);
check("stream_socket_accept", $conn !== false);
fwrite($cli, "ping");
check("read what was written", fread($conn, 4) === "ping");
check("stream_socket_shutdown(STREAM_SHUT_WR)",
      stream_socket_shutdown($conn, STREAM_SHUT_WR));
check("end of stream after shutdown", fread($cli, 10) === "");
check("stream_set_blocking(false) on its own socket",
      stream_set_blocking($srv, false));
check("stream_socket_shutdown(STREAM_SHUT_RDWR) on its own listener",
      stream_socket_shutdown($srv, STREAM_SHUT_RDWR));
$pair = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, 0);
check("stream_socket_pair", $pair !== false);

if (function_exists("socket_create")) {   /* a shared extension */
$s = socket_create(AF_INET, SOCK_STREAM, SOL_TCP);
foreach ([["SO_REUSEADDR", SOL_SOCKET, SO_REUSEADDR, 1],
          ["SO_REUSEPORT", SOL_SOCKET, SO_REUSEPORT, 1],
          ["SO_KEEPALIVE", SOL_SOCKET, SO_KEEPALIVE, 1],
          ["SO_RCVBUF", SOL_SOCKET, SO_RCVBUF, 65536],
          ["SO_SNDBUF", SOL_SOCKET, SO_SNDBUF, 65536],
          ["SO_RCVTIMEO", SOL_SOCKET, SO_RCVTIMEO, ["sec" => 1, "usec" => 0]],
          ["SO_LINGER", SOL_SOCKET, SO_LINGER,
           ["l_onoff" => 1, "l_linger" => 1]],
          ["TCP_NODELAY", SOL_TCP, TCP_NODELAY, 1]] as $o) {
    check("socket_set_option($o[0])", socket_set_option($s, $o[1], $o[2], $o[3]),
          socket_strerror(socket_last_error($s)));
}
check("socket_bind", socket_bind($s, "127.0.0.1", 0));
check("socket_listen", socket_listen($s, 16));
check("socket_listen again with another backlog", socket_listen($s, 1));
check("socket_set_nonblock", socket_set_nonblock($s));
check("socket_shutdown of its own listener", socket_shutdown($s, 2));
socket_close($s);
$u = socket_create(AF_INET, SOCK_DGRAM, SOL_UDP);
socket_bind($u, "127.0.0.1", 0);
socket_getsockname($u, $uaddr, $uport);
check("SO_BROADCAST", socket_set_option($u, SOL_SOCKET, SO_BROADCAST, 1));
check("udp sendto", socket_sendto($u, "x", 1, 0, "127.0.0.1", $uport) === 1);
check("udp recvfrom", socket_recvfrom($u, $buf, 1, 0, $from, $fport) === 1);
check("socket_create_pair", socket_create_pair(AF_UNIX, SOCK_STREAM, 0, $sp));
}

$body = file_get_contents("http://127.0.0.1:$port/index.html");
check("file_get_contents to loopback", strpos((string)$body, "hello") !== false);
$fp = fsockopen("127.0.0.1", $port, $errno, $errstr, 5);
check("fsockopen to loopback", $fp !== false, $errstr);

foreach ([["ls", "ls /", "usr"],
          ["sh -c", "sh -c 'echo hello from sh'", "hello from sh"],
          ["id", "id -un", "www-data"],
          ["curl to loopback", "curl -sS http://127.0.0.1:$port/index.html",
           "hello"],
          ["setgid chage (shadow)", "chage -l www-data", "Password expires"],
          ["php CLI listening, shutting down",
           "php -r '\$s = stream_socket_server(\"tcp://127.0.0.1:0\"); " .
           "stream_socket_shutdown(\$s, STREAM_SHUT_RDWR); " .
           "socket_set_option(socket_import_stream(\$s), SOL_SOCKET, " .
           "SO_REUSEPORT, 1); echo \"cli done\";'", "cli done"],
          ["a program inherits the filter", "cat /proc/self/status",
           "Seccomp:\t2"]] as $c) {
    list($rc, $out) = run($c[1]);
    check("proc_open $c[0]", $rc === 0 && strpos($out, $c[2]) !== false,
          "exit $rc: $out");
}
echo "done\n";
"""

# A script that finds the bucket socket its child holds and does one
# thing to it.  A script reaches it only through native code: php://fd is
# for the CLI alone, and the socket is close-on-exec, so programs it
# starts do not get it.  FFI is that native code here (enabled for this
# test, as some applications do); a memory bug exploited in an extension
# would be the same.
HOSTILE = r"""<?php
header("Content-Type: text/plain");
$op = $_GET["op"];
$libc = FFI::cdef("
    int getsockopt(int, int, int, void *, unsigned int *);
    int setsockopt(int, int, int, const void *, unsigned int);
    int shutdown(int, int);
    int listen(int, int);
    int *__errno_location(void);", "libc.so.6");
for ($fd = 0; $fd < 1024; $fd++) {
    $on = FFI::new("int");
    $len = FFI::new("unsigned int");
    $len->cdata = 4;
    if ($libc->getsockopt($fd, 1, 30 /* SO_ACCEPTCONN */, FFI::addr($on),
                          FFI::addr($len)) != 0 || $on->cdata != 1) {
        continue;
    }
    $one = FFI::new("int");
    $one->cdata = 1;
    if ($op == "detach") {          /* SO_DETACH_REUSEPORT_BPF */
        $rc = $libc->setsockopt($fd, 1, 68, FFI::addr($one), 4);
    } elseif ($op == "lock") {      /* SO_LOCK_FILTER */
        $rc = $libc->setsockopt($fd, 1, 44, FFI::addr($one), 4);
    } elseif ($op == "shutdown") {
        $rc = $libc->shutdown($fd, 2);
    } else {
        $rc = $libc->listen($fd, 1);
    }
    echo "fd $fd " . ($rc == 0 ? "done" : "refused " .
                      $libc->__errno_location()[0]) . "\n";
}
echo "end\n";
"""
FFI_CONF = "php_admin_value ffi.enable 1\n"


class PhpUnderTheFilter(unittest.TestCase):

    def setUp(self):
        if not os.path.exists(PHP_SO):
            self.skipTest("mod_php (%s) is not installed: apt-get install "
                          "libapache2-mod-php" % PHP_SO)

    def server(self, expect=(), extra=""):
        srv = Server(extra=BUCKETS + PHP_CONF + extra,
                     extra_modules=PHP_LOAD + (HOSTILE_LOAD if ASAN else ""),
                     expect_log=PHP_STOP_TAGS + tuple(expect))
        if ASAN:
            scan_dir = os.path.join(srv.root, "php-conf.d")
            os.mkdir(scan_dir)
            srv.env["PHP_INI_SCAN_DIR"] = scan_dir
        for name, text in (("legit.php", LEGITIMATE),
                           ("hostile.php", HOSTILE)):
            with open(os.path.join(srv.root, "htdocs", name), "w") as f:
                f.write(text)
        return srv

    def attack(self, srv, op):
        """One attack on the bucket socket from native code in a child:
        None when done, else the errno that refused it."""
        if ASAN:
            path = "/hostile?sock=" + {"detach": "detach", "lock": "lock",
                                       "backlog": "backlog",
                                       "shutdown": "shutdown"}[op]
        else:
            path = "/hostile.php?op=" + op
        status, body = http_get("127.0.0.1", srv.ports[0], path)
        text = body.decode()
        self.assertEqual(status, 200, text)
        m = re.search(r"fd \d+ (done|refused (\d+))\n", text) \
            or re.search(r"sockets 1 ok (\d) errno (\d+)", text)
        self.assertTrue(m, text)
        if ASAN:
            return None if m.group(1) == "1" else int(m.group(2))
        return None if m.group(1) == "done" else int(m.group(2))

    def test_what_php_legitimately_does_is_not_refused(self):
        with self.server() as srv:
            srv.start()
            self.assertIn("PFB00063", srv.error_log(), "no filter")
            srv.wait_ready(4)
            status, body = http_get("127.0.0.1", srv.ports[0],
                                    "/legit.php?port=%d" % srv.ports[0],
                                    timeout=60)
            text = body.decode(errors="replace")
            self.assertEqual(status, 200, text)
            lines = text.splitlines()
            print("\n".join(lines))
            self.assertEqual(lines[-1:], ["done"], text)
            self.assertEqual([l for l in lines if not l.startswith("ok ")],
                             ["done"], text)
            self.assertGreaterEqual(len(lines), 21 if ASAN else 38)

    def test_a_script_cannot_change_its_bucket_socket(self):
        with self.server(expect=("PFB00060", "AH02179"),
                         extra=FFI_CONF) as srv:
            srv.start()
            srv.wait_ready(4)
            for op in ("detach", "lock"):
                self.assertEqual(self.attack(srv, op), errno.EPERM, op)
            # What it can do, the parent puts right.
            for op, words in (("backlog", "backlog changed"),
                              ("shutdown", "stopped listening")):
                self.assertIsNone(self.attack(srv, op), op)
                self.assertTrue(srv.wait_for(
                    lambda: words in srv.error_log()), op)
            for _ in range(40):
                self.assertEqual(http_get("127.0.0.1", srv.ports[0],
                                          "/index.html")[0], 200)
            self.assertTrue(re.search(r"PFB00060.*stopped listening",
                                      srv.error_log()))


if __name__ == "__main__":
    unittest.main()
