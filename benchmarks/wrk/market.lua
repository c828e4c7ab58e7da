-- wrk script: every thread drives ONE keep-alive connection through whole market negotiations
-- (spec 003, the natural-language protocol), back to back, speaking for a seller and a buyer agent
-- with their own Ed25519 keys, each message signed here (wrk/signing.lua: LuaJIT's FFI to
-- libcrypto, RFC 8785 in Lua) as the market checks it:
--
--   buyer   POST /market/contact                        contact_request about the next listing (201)
--   seller  POST /market/contact/{id}/agreement         protocol_agreement, natural_language (200)
--   buyer   POST /market/contact/{id}/offers            offer 80, sequence 1 (200)
--   seller  POST .../offers                             offer 95, sequence 1 (200)
--   buyer   POST .../offers                             offer 90, sequence 2 (200)
--   seller  POST .../offers                             accept, sequence 2: the deal at 90 (201, dealId)
--   buyer   GET  /market/deals/{dealId}                 the deal_confirmed the market wrote (its token)
--   buyer   POST /market/deals/{dealId}/signatures      its signature over the deal's signing bytes (200)
--   seller  POST /market/deals/{dealId}/signatures      the same bytes, its key: "confirmed" (200)
--
-- The listings (ask 100, the owner's floor 85) were posted before the clock, one per negotiation;
-- a negotiation that fails moves on to the next listing. Each negotiation comes from its own
-- address (10.<thread>.x.y as X-Forwarded-For to a store that trusts the loopback proxy), as
-- agents do: the market counts messages per client address. The agents' ids, tokens and keys and
-- each thread's listings come from the file named by HAGGLER_WRK_MARKET, one line per thread:
--   <seller id> <seller key hex> <buyer id> <buyer token> <buyer key hex> <listing prefix> <first> <last> <run>
-- written by wrk_protocols.py before each phase, which reads the counters back from done().

dofile(os.getenv("HAGGLER_WRK_SCRIPTS") .. "/common.lua")

local threads = {}
local parties = nil

function setup(thread)
  parties = parties or data_lines("HAGGLER_WRK_MARKET")
  local p = parties[(#threads % #parties) + 1]
  for i, name in ipairs({ "seller_id", "seller_key", "buyer_id", "buyer_token", "buyer_key", "listing_prefix",
                          "first_listing", "last_listing", "run" }) do
    thread:set(name, p[i])
  end
  thread:set("thread_number", #threads % 256)
  table.insert(threads, thread)
end

contacts, offers, deals, confirmed, exhausted, errors = 0, 0, 0, 0, 0, 0

local signing = nil
local sign_seller, sign_buyer = nil, nil
local listing_number, listing_id, request_id, deal_id = nil, nil, nil, nil
local step, address, negotiations = "contact", nil, 0
local signatures = nil
local VERSION = "0.1.0"

-- step → who sends it, and what: offers are { party, sequence, price or nil (accept), text }
local OFFERS = {
  offer1 = { "buyer", 1, 80, "80 and I collect it today." },
  offer2 = { "seller", 1, 95, "It is barely used: 95." },
  offer3 = { "buyer", 2, 90, "Meet me at 90?" },
  accept = { "seller", 2, nil, "Deal at 90." },
}
local AFTER = { contact = "agree", agree = "offer1", offer1 = "offer2", offer2 = "offer3", offer3 = "accept",
                accept = "deal", deal = "sign_buyer", sign_buyer = "sign_seller" }

local function now()
  return os.date("!%Y-%m-%dT%H:%M:%SZ")
end

local function next_listing()
  listing_number = listing_number + 1
  negotiations = negotiations + 1
  if listing_number > tonumber(last_listing) then
    listing_id = nil
    return
  end
  listing_id = string.format("%s%06d", listing_prefix, listing_number)
  request_id = "rq-" .. run .. "-" .. listing_id
  address = string.format("10.%d.%d.%d", thread_number, math.floor(negotiations / 256) % 256, negotiations % 256)
  step, deal_id, signatures = "contact", nil, nil
end

local function post(path, body, extra)
  local headers = { ["Content-Type"] = "application/json", ["X-Forwarded-For"] = address }
  for name, value in pairs(extra or {}) do headers[name] = value end
  return wrk.format("POST", path, headers, body)
end

function request()
  if signing == nil then
    signing = dofile(os.getenv("HAGGLER_WRK_SCRIPTS") .. "/signing.lua")
    sign_seller, sign_buyer = signing.signer(seller_key), signing.signer(buyer_key)
    listing_number = tonumber(first_listing) - 1
    next_listing()
  end
  if listing_id == nil then  -- every listing of this thread is used: the pool was too small
    return wrk.format("GET", "/healthz")
  end
  local contact_path = "/market/contact/" .. request_id
  if step == "contact" then
    return post("/market/contact", signing.signed(sign_buyer, {
      type = "contact_request", version = VERSION, timestamp = now(), requestId = request_id, listingId = listing_id,
      buyer = { agentId = buyer_id }, protocol = "natural_language", message = "Is it still available?" }))
  elseif step == "agree" then
    return post(contact_path .. "/agreement", signing.signed(sign_seller, {
      type = "protocol_agreement", version = VERSION, timestamp = now(), requestId = request_id,
      agreedProtocol = "natural_language" }))
  elseif OFFERS[step] then
    local move = OFFERS[step]
    local party, sequence, price, text = move[1], move[2], move[3], move[4]
    local offer = { type = "offer", version = VERSION, timestamp = now(), requestId = request_id, party = party,
                    sequence = sequence, offerPrice = price, message = text }
    if price == nil then offer.action = "accept" end
    return post(contact_path .. "/offers", signing.signed(party == "buyer" and sign_buyer or sign_seller, offer))
  elseif step == "deal" then
    return wrk.format("GET", "/market/deals/" .. deal_id,
                      { ["Authorization"] = "Bearer " .. buyer_token, ["X-Forwarded-For"] = address })
  end
  local party = step == "sign_buyer" and "buyer" or "seller"
  return post("/market/deals/" .. deal_id .. "/signatures",
              string.format('{"party":"%s","signature":"%s"}', party, signatures[party]))
end

function response(status, headers, body)
  if listing_id == nil then
    exhausted = exhausted + 1
    return
  end
  local expected = (step == "contact" or step == "accept") and 201 or 200
  if status ~= expected then
    errors = errors + 1
    next_listing()
    return
  end
  if step == "contact" then
    contacts = contacts + 1
  elseif OFFERS[step] then
    offers = offers + 1
    if step == "accept" then
      deal_id = body:match('"dealId":%s*"([^"]+)"')
      if deal_id == nil then errors = errors + 1; next_listing(); return end
      deals = deals + 1
    end
  elseif step == "deal" then
    -- sign what the market serves, as an agent that reads the deal before committing to it
    local ok, document = pcall(signing.decode, body)
    if not ok or type(document.deal) ~= "table" or document.deal.finalPrice ~= 90 then
      errors = errors + 1; next_listing(); return
    end
    local bytes = signing.deal_bytes(document.deal)
    signatures = { buyer = sign_buyer(bytes), seller = sign_seller(bytes) }
  elseif step == "sign_seller" then
    if body:find('"status":%s*"confirmed"') then confirmed = confirmed + 1 else errors = errors + 1 end
    next_listing()
    return
  end
  step = AFTER[step]
end

function done(summary, latency, requests)
  report(threads, { "contacts", "offers", "deals", "confirmed", "exhausted", "errors" }, summary, latency)
end
