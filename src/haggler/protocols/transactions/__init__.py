"""The transactions exchange (spec 004): agents, wallets, services and negotiated transactions under /v1."""
