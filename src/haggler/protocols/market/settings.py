"""The market's operator settings (kept apart from the routes so that configuration imports
nothing heavy)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from haggler.protocols.market.settlement import DEFAULT_OFFER_TURN_CAP


@dataclass(frozen=True)
class MarketSettings:
    #: A natural-language negotiation ends without a deal after this many offers; None: no cap.
    offer_turn_cap: int | None = DEFAULT_OFFER_TURN_CAP
    #: Clear every order book with both sides open this often (seconds); None: only on request.
    clear_interval_seconds: float | None = None
    #: A deal still awaiting signatures or an owner's approval this long after it opened expires,
    #: releasing its listing: nothing waits forever.
    deal_expiry_seconds: int = 86_400

    def __post_init__(self) -> None:
        cap = self.offer_turn_cap
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 2):
            raise ValueError(f"offer_turn_cap must be a number of offers of at least 2, or None (no cap), not {cap!r}")
        interval = self.clear_interval_seconds
        if interval is not None and not interval > 0:
            raise ValueError(f"clear_interval_seconds must be a positive number of seconds, not {interval!r}")
        expiry = self.deal_expiry_seconds
        if isinstance(expiry, bool) or not isinstance(expiry, int) or expiry < 1:
            raise ValueError(f"deal_expiry_seconds must be a whole number of seconds, at least 1, not {expiry!r}")

    @property
    def deal_expiry(self) -> timedelta:
        return timedelta(seconds=self.deal_expiry_seconds)
