#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0; see LICENSE.
"""Open-loop HTTP load at a fixed rate, free of coordinated omission.

Debian has no wrk2, so this is the suite's fixed-rate generator.  Request i
is due at start + i / rate whether or not earlier ones have finished, each
on a new connection (Connection: close); its latency is measured from the
time it was *due*, not from when it could be sent, so a stalled server is
charged for every request it made wait (Gil Tene's coordinated omission).
A schedule of (seconds, rate) phases gives on/off bursts.

  python3 openloop.py --url http://127.0.0.1:8080/index.html --rate 1000 \
      --duration 5
  python3 openloop.py --url ... --schedule 1:2000,1:0,1:2000,1:0

Prints one JSON object: sent, ok, errors by kind, achieved rate, latency
percentiles in ms (p50, p90, p99, p99.9, max), a CDF, and how late the
generator itself sent (send_lag_p99, send_lag_max, ms): a generator that
falls behind charges its own lag to the server, so the suite reports it.
One process does a few thousand requests a second; the suite runs several
side by side for higher rates and merges their --latencies files.
"""

import argparse
import array
import asyncio
import json
import sys
import time
import urllib.parse

PERCENTILES = (50, 75, 90, 95, 99, 99.9, 99.99)


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1,
            max(0, int(round(p / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def summarize(latencies, errors, sent, elapsed, lags=()):
    lat = sorted(latencies)
    result = {"sent": sent, "ok": len(lat), "errors": errors,
              "rate": len(lat) / elapsed if elapsed > 0 else 0.0}
    lags = sorted(lags)
    result["send_lag_p99"] = percentile(lags, 99) * 1000.0 if lags else 0.0
    result["send_lag_max"] = lags[-1] * 1000.0 if lags else 0.0
    for p in PERCENTILES:
        result["p%s" % p] = percentile(lat, p) * 1000.0
    result["max"] = (lat[-1] * 1000.0) if lat else float("nan")
    # A compact CDF: 200 points, (latency ms, fraction).
    step = max(1, len(lat) // 200)
    result["cdf"] = [(lat[i] * 1000.0, (i + 1) / len(lat))
                     for i in range(0, len(lat), step)]
    return result


async def one_request(host, port, path, due, timeout, latencies, errors):
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port), timeout)
        writer.write(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                      "\r\n" % (path, host)).encode())
        data = await asyncio.wait_for(reader.read(), timeout)
        writer.close()
        status = int(data.split(b" ", 2)[1]) if data else 0
        if status != 200:
            kind = "status_%d" % status if status else "empty"
            errors[kind] = errors.get(kind, 0) + 1
            return
        latencies.append(time.monotonic() - due)
    except asyncio.TimeoutError:
        errors["timeout"] = errors.get("timeout", 0) + 1
    except ConnectionRefusedError:
        errors["refused"] = errors.get("refused", 0) + 1
    except ConnectionResetError:
        errors["reset"] = errors.get("reset", 0) + 1
    except OSError as e:
        kind = type(e).__name__
        errors[kind] = errors.get(kind, 0) + 1


async def run(url, schedule, timeout, max_outstanding, latencies):
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname, parts.port or 80
    path = parts.path + ("?" + parts.query if parts.query else "")
    errors, tasks, lags = {}, set(), []
    sent = 0
    start = time.monotonic()
    phase_start = start
    for seconds, rate in schedule:
        count = int(seconds * rate)
        for i in range(count):
            due = phase_start + i / rate
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            lags.append(max(0.0, time.monotonic() - due))
            if len(tasks) >= max_outstanding:
                # Beyond the generator's own limit: count it, do not hide it.
                errors["generator_limit"] = errors.get("generator_limit",
                                                       0) + 1
                continue
            task = asyncio.ensure_future(one_request(
                host, port, path, due, timeout, latencies, errors))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += 1
        phase_start += seconds
        delay = phase_start - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
    if tasks:
        await asyncio.wait(tasks, timeout=timeout + 1)
    return summarize(latencies, errors, sent, time.monotonic() - start,
                     lags)


def parse_schedule(text):
    phases = []
    for item in text.split(","):
        seconds, rate = item.split(":")
        phases.append((float(seconds), float(rate)))
    return phases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--rate", type=float, default=500.0,
                        help="requests per second")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds")
    parser.add_argument("--schedule", help="SECONDS:RATE,... (bursts)")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--max-outstanding", type=int, default=4000)
    parser.add_argument("--latencies", metavar="FILE",
                        help="also write every latency (seconds, native "
                        "doubles) here, for merging several generators")
    args = parser.parse_args()
    host = urllib.parse.urlsplit(args.url).hostname
    if not (host.startswith("127.") or host in ("localhost", "::1")):
        print("openloop: only loopback targets are allowed here",
              file=sys.stderr)
        return 2
    schedule = parse_schedule(args.schedule) if args.schedule else \
        [(args.duration, args.rate)]
    latencies = []
    result = asyncio.run(run(args.url, schedule, args.timeout,
                             args.max_outstanding, latencies))
    if args.latencies:
        with open(args.latencies, "wb") as f:
            array.array("d", latencies).tofile(f)
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
