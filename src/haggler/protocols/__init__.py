"""Wire protocols: thin adapters from each protocol's format onto the engine."""
