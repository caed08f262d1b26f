-- wrk script: each request asks the pfb-test handler to sleep for a time
-- drawn from an exponential distribution (mean MEAN_MS, default 10 ms),
-- on a new connection each time (Connection: close), as one-process-per-
-- connection servers are used behind most load balancers.
local mean_ms = tonumber(os.getenv("MEAN_MS") or "10")

function init(args)
    math.randomseed(os.time() + (tonumber(tostring({}):sub(8), 16) or 0))
end

request = function()
    local ms = -math.log(1 - math.random()) * mean_ms
    return wrk.format("GET", string.format("/pfb-test?sleep=%.3f", ms),
                      {["Connection"] = "close"})
end
