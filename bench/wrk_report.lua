-- Licensed under the Apache License, Version 2.0; see LICENSE.
--
-- wrk script for the load suite.  Settings come from the environment:
--   WRK_CLOSE=1     "Connection: close": a new connection for every request
--   WRK_EXP_MS=10   ask the test handler to sleep an exponentially
--                   distributed time with this mean (/pfb-test?sleep=MS)
--   WRK_HIST=FILE   write every request's latency there, as a histogram:
--                   one line "<latency us> <requests>" per distinct value
--                   (wrk keeps them at 1 us; the suite gzips the file)
-- At the end it prints one line "WRK_JSON {...}" with the request count,
-- errors by kind and latency percentiles (ms), including p99.9 and a CDF.
local close = os.getenv("WRK_CLOSE") == "1"
local exp_ms = tonumber(os.getenv("WRK_EXP_MS") or "")
local hist = os.getenv("WRK_HIST")

function init(args)
    math.randomseed(os.time() + (tonumber(tostring({}):sub(8), 16) or 0))
end

request = function()
    local path = wrk.path
    local headers = {}
    if exp_ms then
        path = string.format("/pfb-test?sleep=%.3f",
                             -math.log(1 - math.random()) * exp_ms)
    end
    if close then
        headers["Connection"] = "close"
    end
    return wrk.format("GET", path, headers)
end

done = function(summary, latency, requests)
    if hist and hist ~= "" then
        local f = assert(io.open(hist, "w"))
        -- latency(i): the i-th distinct latency (us) and its count
        for i = 1, #latency do
            local us, count = latency(i)
            f:write(string.format("%d %d\n", us, count))
        end
        f:close()
    end
    local e = summary.errors
    local parts = {}
    local function add(k, v)
        parts[#parts + 1] = string.format('"%s": %s', k, v)
    end
    add("requests", summary.requests)
    add("duration_s", summary.duration / 1e6)
    add("rps", summary.requests / (summary.duration / 1e6))
    add("errors", string.format(
        '{"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}',
        e.connect, e.read, e.write, e.status, e.timeout))
    for _, p in ipairs({50, 75, 90, 99, 99.9, 99.99}) do
        add("p" .. p, latency:percentile(p) / 1000)
    end
    add("max", latency.max / 1000)
    local cdf = {}
    for p = 1, 99 do
        cdf[#cdf + 1] = string.format("[%.3f, %.2f]",
                                      latency:percentile(p) / 1000, p / 100)
    end
    cdf[#cdf + 1] = string.format("[%.3f, 0.999]", latency:percentile(99.9) / 1000)
    cdf[#cdf + 1] = string.format("[%.3f, 1.0]", latency.max / 1000)
    add("cdf", "[" .. table.concat(cdf, ", ") .. "]")
    io.write("WRK_JSON {" .. table.concat(parts, ", ") .. "}\n")
end
