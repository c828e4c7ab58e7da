"""App assembly: configuration, client addresses, CORS, the JSON error edge."""
