"""App assembly: configuration, client addresses, allowed hosts, CORS, the request edge, the JSON error edge."""
