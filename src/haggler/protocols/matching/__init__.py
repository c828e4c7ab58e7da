"""Bilateral match negotiation (spec 002), served under ``/api``: users and their agents,
opportunities, negotiations stored as A2A conversations, parked turns picked up by polling
agents, and MCP tools for those agents."""
