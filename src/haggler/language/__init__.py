"""Free text ⇄ structured intents: parsing shopper turns, rendering merchant replies."""
