-- wrk script: every thread drives ONE keep-alive connection through negotiate.v1 chats back to
-- back (start, offers rising from 60% of list by 5% a turn, "deal" after the 8th), following the
-- hypermedia `next` URL of each reply. One connection per thread (wrk -t N -c N) keeps each
-- chat's state in its thread's Lua state. Counters are read back in done() by wrk_store.py.

dofile(os.getenv("HAGGLER_WRK_SCRIPTS") .. "/common.lua")

local threads = {}

function setup(thread)
  thread:set("product", PRODUCTS[(#threads % #PRODUCTS) + 1])
  thread:set("thread_number", #threads % 256)
  table.insert(threads, thread)
end

starts, turns, deals, closed, errors = 0, 0, 0, 0, 0
local next_path, list_price, offers = nil, 500, 0
-- Each chat comes from its own address (10.<thread>.x.y, sent as X-Forwarded-For to a store that
-- trusts the loopback proxy), as shoppers do: one address starting every chat would make the
-- per-address start limit read a window of thousands of starts, which no real store sees.
local chats_started = 0

local function shopper_address()
  chats_started = chats_started + 1
  return string.format("10.%d.%d.%d", thread_number, math.floor(chats_started / 256) % 256, chats_started % 256)
end

function request()
  if next_path == nil then
    return wrk.format("GET", "/api/store/chat/start?product_id=" .. product, {["X-Forwarded-For"] = shopper_address()})
  end
  local message
  if offers >= 8 then
    message = "deal"
  else
    message = "would you take $" .. math.floor(list_price * (0.60 + 0.05 * offers)) .. "?"
  end
  offers = offers + 1
  local encoded = encode(message)  -- a function replacement: the %-escapes are not capture references
  return wrk.format("GET", (next_path:gsub("{url_encoded_message}", function() return encoded end)))
end

function response(status, headers, body)
  if status == 201 then
    starts = starts + 1
    list_price = tonumber(body:match('"price":%s*([%d%.]+)')) or 500
    offers = 0
  elseif status == 200 then
    turns = turns + 1
  else
    errors = errors + 1
    next_path = nil
    return
  end
  if body:find('"closed":%s*true') then
    closed = closed + 1
    if body:find('"deal":%s*{') then deals = deals + 1 end
    next_path = nil
  else
    local found = body:match('"next":%s*"([^"]+)"')
    next_path = found and (found:gsub("^https?://[^/]+", "")) or nil
  end
end

function done(summary, latency, requests)
  report(threads, { "starts", "turns", "deals", "closed", "errors" }, summary, latency)
end
