-- Shared by the wrk scripts (loaded with dofile from the directory in HAGGLER_WRK_SCRIPTS, which
-- wrk_store.py's run_wrk sets): the two lines wrk_store.py and wrk_protocols.py read back.
--   COUNTS <name>=<sum over the threads> ...   (the scripts' own counters, when they keep any)
--   LATENCY p50_us= p99_us= requests= errors= seconds=
function report(threads, names, summary, latency)
  if #names > 0 then
    local parts = {}
    for _, name in ipairs(names) do
      local total = 0
      for _, thread in ipairs(threads) do total = total + thread:get(name) end
      table.insert(parts, name .. "=" .. total)
    end
    io.write("COUNTS " .. table.concat(parts, " ") .. "\n")
  end
  local e = summary.errors
  io.write(string.format("LATENCY p50_us=%d p99_us=%d requests=%d errors=%d seconds=%.3f\n",
    latency:percentile(50), latency:percentile(99), summary.requests,
    e.status + e.connect + e.read + e.write + e.timeout, summary.duration / 1e6))
end
