-- wrk script for the bare endpoint: only prints the figures wrk_store.py reads.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("LATENCY p50_us=%d p99_us=%d requests=%d errors=%d seconds=%.3f\n",
    latency:percentile(50), latency:percentile(99), summary.requests,
    e.status + e.connect + e.read + e.write + e.timeout, summary.duration / 1e6))
end
