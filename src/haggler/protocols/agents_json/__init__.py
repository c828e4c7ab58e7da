"""The agents.json surface: the manifest and its validator, sessions, cart and checkout, and the signed audit trail."""
