-- wrk script: every thread drives ONE keep-alive connection through whole exchange transactions
-- (the transaction negotiation protocol), back to back, speaking for both parties with their own
-- keys: the consumer opens at 300 with at most 450; the provider counters 440, the consumer 380,
-- the provider 420; the consumer accepts (420 is held from its wallet) and the provider completes
-- (the hold is paid out). Each thread's consumer, provider and service come from the file named by
-- HAGGLER_WRK_PARTIES ("<consumer key> <provider key> <service id>" a line), written by
-- wrk_protocols.py, which also reads the counters back from done().

dofile(os.getenv("HAGGLER_WRK_SCRIPTS") .. "/common.lua")

local threads = {}
local parties = nil

function setup(thread)
  parties = parties or data_lines("HAGGLER_WRK_PARTIES")
  local p = parties[(#threads % #parties) + 1]
  thread:set("consumer_key", p[1])
  thread:set("provider_key", p[2])
  thread:set("service_id", p[3])
  table.insert(threads, thread)
end

opened, turns, matched, completed, errors = 0, 0, 0, 0, 0
local txn, step = nil, 0
local as_consumer, as_provider = nil, nil

-- step: 0 open, 1..4 negotiate, 5 complete
local MOVES = {
  { "provider", '{"type":"counter_offer","terms":{"priceCents":440},"message":"440 with the standard SLA"}' },
  { "consumer", '{"type":"counter_offer","terms":{"priceCents":380},"message":"380?"}' },
  { "provider", '{"type":"counter_offer","terms":{"priceCents":420},"message":"420, final"}' },
  { "consumer", '{"type":"accept"}' },
}

function request()
  if as_consumer == nil then
    as_consumer = { ["Authorization"] = "Bearer " .. consumer_key, ["Content-Type"] = "application/json" }
    as_provider = { ["Authorization"] = "Bearer " .. provider_key, ["Content-Type"] = "application/json" }
  end
  if txn == nil then
    return wrk.format("POST", "/v1/transactions", as_consumer, string.format(
      '{"serviceId":"%s","maxPriceCents":450,"initialOfferCents":300,"input":{"pages":4}}', service_id))
  end
  if step <= #MOVES then
    local move = MOVES[step]
    return wrk.format("POST", "/v1/transactions/" .. txn .. "/negotiate",
                      move[1] == "consumer" and as_consumer or as_provider, move[2])
  end
  return wrk.format("POST", "/v1/transactions/" .. txn .. "/complete", as_provider, '{"output":{"bullets":5}}')
end

function response(status, headers, body)
  if txn == nil then
    if status == 201 then
      opened = opened + 1
      txn = body:match('"id":%s*"([^"]+)"')
      step = 1
    else
      errors = errors + 1
    end
    return
  end
  if status ~= 200 then
    errors = errors + 1
    txn = nil
    return
  end
  if step <= #MOVES then
    turns = turns + 1
    if body:find('"status":%s*"matched"') then matched = matched + 1 end
    step = step + 1
  else
    if body:find('"status":%s*"completed"') then completed = completed + 1 else errors = errors + 1 end
    txn = nil
  end
end

function done(summary, latency, requests)
  report(threads, { "opened", "turns", "matched", "completed", "errors" }, summary, latency)
end
