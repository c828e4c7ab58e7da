"""The store's agents.json surface: canonical JSON, signed audit trails and the audit signing key."""
