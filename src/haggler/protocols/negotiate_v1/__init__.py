"""negotiate.v1: discovery, catalog and chat over plain GETs (spec 000)."""
