-- wrk script for the bare endpoint: only prints the figures wrk_store.py reads.

dofile(os.getenv("HAGGLER_WRK_SCRIPTS") .. "/common.lua")

function done(summary, latency, requests)
  report({}, {}, summary, latency)
end
