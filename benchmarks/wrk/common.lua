-- Shared by the wrk scripts (loaded with dofile from the directory in HAGGLER_WRK_SCRIPTS, which
-- wrk_store.py's run_wrk sets).

-- The demo catalog's products, one per thread round-robin.
PRODUCTS = { "aerion-v12-cordless", "stillair-p400", "crema-mini-openbox", "grindwell-conical-pro",
             "halcyon-anc-900", "meridian-studio-ref", "tidemark-r5-robot", "breeze-hc3-clearance" }

-- A chat message for the `next` URL's {url_encoded_message}.
function encode(text)
  return (text:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

-- The whitespace-separated fields of each line of the data file named by the environment variable
-- `variable` (written by wrk_protocols.py before the run).
function data_lines(variable)
  local rows = {}
  for line in io.lines(os.getenv(variable)) do
    local fields = {}
    for field in line:gmatch("%S+") do table.insert(fields, field) end
    if #fields > 0 then table.insert(rows, fields) end
  end
  return rows
end

-- The two lines wrk_store.py and wrk_protocols.py read back:
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
