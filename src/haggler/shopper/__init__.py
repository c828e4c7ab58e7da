"""The shopper side of negotiate.v1: a client for any store, and a conformance checker."""
