-- wrk script: every thread is ONE polling match agent (spec 002) on one keep-alive connection,
-- taking the turns parked for its user back to back: POST .../negotiations/pickup, then POST
-- .../{negotiationId}/respond — a counter on its first turn of a negotiation, an accept on any
-- later one — until the negotiation ends (the respond's view carries its outcome). The agents'
-- ids and keys come from the file named by HAGGLER_WRK_AGENTS ("<agent id> <key>" a line),
-- written by wrk_protocols.py, which also reads the counters back from done().

dofile(os.getenv("HAGGLER_WRK_SCRIPTS") .. "/common.lua")

local threads = {}
local agents = nil

function setup(thread)
  agents = agents or data_lines("HAGGLER_WRK_AGENTS")
  local agent = agents[(#threads % #agents) + 1]
  thread:set("agent_id", agent[1])
  thread:set("key", agent[2])
  table.insert(threads, thread)
end

pickups, empty, turns, completed, errors = 0, 0, 0, 0, 0
local claimed, turn_number = nil, 0
local headers = nil

local TURN = '{"action":"%s","message":"%s","assessment":{"reasoning":"%s",' ..
             '"suggestedRoles":{"ownUser":"peer","otherUser":"peer"}}}'

function request()
  if headers == nil then
    headers = { ["Authorization"] = "Bearer " .. key, ["Content-Type"] = "application/json" }
  end
  local base = "/api/agents/" .. agent_id .. "/negotiations"
  if claimed == nil then
    return wrk.format("POST", base .. "/pickup", headers, "")
  end
  local body
  if turn_number <= 2 then
    body = string.format(TURN, "counter", "What does your user bring to a first project?",
                         "Promising, but my user wants to hear what the first project would be.")
  else
    body = string.format(TURN, "accept", "My user accepts.", "The match serves my user.")
  end
  return wrk.format("POST", base .. "/" .. claimed .. "/respond", headers, body)
end

function response(status, headers, body)
  if claimed == nil then
    if status == 200 then
      pickups = pickups + 1
      claimed = body:match('"negotiationId":%s*"([^"]+)"')
      turn_number = tonumber(body:match('"turnNumber":%s*(%d+)')) or 2
      if claimed == nil then errors = errors + 1 end
    elseif status == 204 then
      empty = empty + 1  -- nothing parked for this agent's user: it polls again
    else
      errors = errors + 1
    end
    return
  end
  claimed = nil
  if status == 200 then
    turns = turns + 1
    if body:find('"outcome":%s*{') then completed = completed + 1 end
  else
    errors = errors + 1
  end
end

function done(summary, latency, requests)
  report(threads, { "pickups", "empty", "turns", "completed", "errors" }, summary, latency)
end
