"""The negotiation lab: scenarios, strategies in tournaments, and protocol comparisons."""
