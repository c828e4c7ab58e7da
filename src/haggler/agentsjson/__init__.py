"""agents.json 0.1.0: the machine-readable capability manifest a site serves at /.well-known/agents.json."""
