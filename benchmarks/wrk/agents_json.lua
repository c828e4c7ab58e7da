-- wrk script: every thread drives ONE keep-alive connection through whole agents.json visits,
-- back to back, as the manifest describes them: open a session, follow the negotiate pointer into
-- a negotiate.v1 chat, offer 90% of list price and say "deal", redeem the deal into the cart, check
-- out, and place the order on the checkout page (the human's step, a form POST answered 303).
-- Each visit comes from its own address (10.<thread>.x.y, sent as X-Forwarded-For to a store that
-- trusts the loopback proxy), as shoppers' agents do: the store limits agents.json requests per
-- client address, and one address for every visit would be one very busy client, not many.
-- Counters are read back by wrk_protocols.py from done().

dofile(os.getenv("HAGGLER_WRK_SCRIPTS") .. "/common.lua")

local threads = {}

function setup(thread)
  thread:set("product", PRODUCTS[(#threads % #PRODUCTS) + 1])
  thread:set("thread_number", #threads % 256)
  table.insert(threads, thread)
end

sessions, turns, deals, placed, errors = 0, 0, 0, 0, 0
local API = "/.well-known/agents/api"
local step, token, path, list_price, deal_id = "session", nil, nil, 500, nil
local visits, address = 0, nil

local function local_path(url)
  return (url:gsub("^https?://[^/]+", ""))
end

function request()
  if step == "session" then
    visits = visits + 1
    address = string.format("10.%d.%d.%d", thread_number, math.floor(visits / 256) % 256, visits % 256)
    return wrk.format("POST", API .. "/session", { ["Content-Type"] = "application/json", ["X-Forwarded-For"] = address },
                      '{"agent_name":"wrk shopper"}')
  end
  local as_agent = { ["X-Agent-Session"] = token, ["Content-Type"] = "application/json", ["X-Forwarded-For"] = address }
  if step == "pointer" then
    return wrk.format("GET", API .. "/negotiate?id=" .. product, as_agent)
  elseif step == "start" then
    return wrk.format("GET", path, { ["X-Forwarded-For"] = address })
  elseif step == "offer" or step == "deal" then
    local message = step == "deal" and "deal" or ("would you take $" .. math.floor(list_price * 0.9) .. "?")
    local encoded = encode(message)
    return wrk.format("GET", (path:gsub("{url_encoded_message}", function() return encoded end)),
                      { ["X-Forwarded-For"] = address })
  elseif step == "cart" then
    return wrk.format("POST", API .. "/cart", as_agent,
                      string.format('{"item_id":"%s","quantity":1,"deal_id":"%s"}', product, deal_id))
  elseif step == "checkout" then
    return wrk.format("POST", API .. "/checkout", as_agent, "")
  end
  return wrk.format("POST", path, { ["Content-Type"] = "application/x-www-form-urlencoded", ["X-Forwarded-For"] = address },
                    "name=Ada+Lovelace&email=ada%40example.com&address=12+Analytical+Row%2C+London")
end

local function restart()
  step, token, path, deal_id = "session", nil, nil, nil
end

function response(status, headers, body)
  if step == "session" then
    token = status == 201 and body:match('"session_token":%s*"([^"]+)"') or nil
    if token then sessions = sessions + 1; step = "pointer" else errors = errors + 1 end
  elseif step == "pointer" then
    local url = status == 200 and body:match('"start_chat":%s*{[^}]-"url":%s*"([^"]+)"') or nil
    if url then path = local_path(url); step = "start" else errors = errors + 1; restart() end
  elseif step == "start" then
    local next_url = status == 201 and body:match('"next":%s*"([^"]+)"') or nil
    if next_url then
      path = local_path(next_url)
      list_price = tonumber(body:match('"price":%s*([%d%.]+)')) or 500
      step = "offer"
    else errors = errors + 1; restart() end
  elseif step == "offer" or step == "deal" then
    if status ~= 200 then errors = errors + 1; restart(); return end
    turns = turns + 1
    deal_id = body:match('"deal":%s*{[^}]-"id":%s*"([^"]+)"')
    if deal_id then
      deals = deals + 1; step = "cart"
    elseif body:find('"closed":%s*true') or step == "deal" then
      restart()  -- no deal this time: a new visit
    else
      path = local_path(body:match('"next":%s*"([^"]+)"') or path); step = "deal"
    end
  elseif step == "cart" then
    if status == 200 then step = "checkout" else errors = errors + 1; restart() end
  elseif step == "checkout" then
    local url = status == 200 and body:match('"url":%s*"([^"]+)"') or nil
    if url then path = local_path(url); step = "place" else errors = errors + 1; restart() end
  else
    if status == 303 then placed = placed + 1 else errors = errors + 1 end
    restart()
  end
end

function done(summary, latency, requests)
  report(threads, { "sessions", "turns", "deals", "placed", "errors" }, summary, latency)
end
