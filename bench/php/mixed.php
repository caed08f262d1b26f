<?php
// Licensed under the Apache License, Version 2.0; see LICENSE.
//
// The load suite's mod_php workload (suite.py, scenario php): an
// application with a mixed, uneven cost.  Most requests are fast and spend
// their time on the CPU; the rest wait, as an application waits on its
// database, with little CPU.  The query string may change the mix:
//   fast_pct  share of fast requests, percent (default 70)
//   cpu_us    CPU time of a fast request, microseconds (default 1000)
//   wait_min_ms, wait_max_ms  a slow request's wait, uniform (5, 30)
//   slow_cpu_us  CPU time of a slow request (default 200)

function param($name, $default, $max)
{
    $v = isset($_GET[$name]) ? intval($_GET[$name]) : $default;
    return max(0, min($v, $max));
}

// Busy for $us microseconds of wall time, doing work the optimiser cannot
// drop: a CPU-bound page, not a sleep.
function burn($us)
{
    $until = hrtime(true) + $us * 1000;
    $x = "pfb";
    $n = 0;
    while (hrtime(true) < $until) {
        $x = md5($x);
        $n++;
    }
    return $n;
}

$fast_pct = param("fast_pct", 70, 100);
$cpu_us = param("cpu_us", 1000, 1000000);
$wait_min = param("wait_min_ms", 5, 10000);
$wait_max = max($wait_min, param("wait_max_ms", 30, 10000));
$slow_cpu_us = param("slow_cpu_us", 200, 1000000);

if (mt_rand(1, 100) <= $fast_pct) {
    $kind = "fast";
    $rounds = burn($cpu_us);
} else {
    $kind = "slow";
    $rounds = burn($slow_cpu_us);
    usleep(mt_rand($wait_min * 1000, $wait_max * 1000));
}
header("Content-Type: text/plain");
echo "$kind $rounds\n";
