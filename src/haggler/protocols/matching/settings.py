"""The matching service's operator settings (kept apart from the routes so that configuration
imports nothing heavy)."""

from __future__ import annotations

from dataclasses import dataclass

HOUR = 3600
DAY = 24 * HOUR
#: The protocol versions a negotiation may speak (docs/matching-api.md, "Negotiations v2").
PROTOCOL_VERSIONS = ("v1", "v2")


@dataclass(frozen=True)
class TurnCaps:
    """Turn caps by scenario (spec: "Turn cap"): a positive number of turns, or None for no cap.

    Never 0: the public implementation stored "unlimited" as 0 and once read 0 as "finalize after
    every turn"; here 0 is refused where a cap is configured and nothing else means unlimited."""

    system_system: int | None = 6
    mixed: int | None = 8
    personal_personal: int | None = None

    def __post_init__(self) -> None:
        for name in ("system_system", "mixed", "personal_personal"):
            cap = getattr(self, name)
            if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
                raise ValueError(f"turn cap {name} must be a positive number of turns or None (no cap), not {cap!r}")

    def for_sides(self, source_personal: bool, candidate_personal: bool) -> int | None:
        if source_personal and candidate_personal:
            return self.personal_personal
        if source_personal or candidate_personal:
            return self.mixed
        return self.system_system


@dataclass(frozen=True)
class MatchingSettings:
    #: The bearer token of the operator API; None: operator routes answer 403.
    operator_token: str | None = None
    #: How long a claimed turn may go unanswered before it returns to waiting_for_agent.
    claim_timeout_seconds: int = 6 * HOUR
    #: How long a parked turn waits for a pickup, from first parking, before the system takes it.
    parked_timeout_seconds: int = 24 * HOUR
    #: The safety valve of a personal-vs-personal negotiation, from its start.
    negotiation_timeout_seconds: int = 24 * HOUR
    caps: TurnCaps = TurnCaps()
    #: The protocol version of a fresh negotiation (one whose pair never negotiated before; a
    #: continuation keeps its predecessor's). v1 by default, as at Index Network.
    protocol_version: str = "v1"
    #: v2's turn caps: 6 unless both sides have personal agents (then none, bounded by the wall clock).
    v2_caps: TurnCaps = TurnCaps(system_system=6, mixed=6, personal_personal=None)
    #: v2: the outreach screen before the first turn (reach_out | pass; a pass ends ``screened_out``).
    v2_screen: bool = False
    #: v2: ``ask_user``, a personal agent's pause to consult its own user (state ``input_required``).
    v2_ask_user: bool = False
    #: v2: how long a user has to answer an ``ask_user`` before the conservative default applies.
    v2_ask_user_window_seconds: int = 24 * HOUR
    #: v2: deadlock detection (a trailing run of counters/questions shifts system turns to bargaining).
    v2_deadlock: bool = False
    #: v2: how long a run of counters/questions makes a deadlock (at least 2).
    v2_deadlock_threshold: int = 4
    #: v2: the wall-clock bound of an uncapped negotiation, from its start (beyond Index, which has none).
    v2_wall_clock_seconds: int = 7 * DAY

    def __post_init__(self) -> None:
        if self.protocol_version not in PROTOCOL_VERSIONS:
            raise ValueError(f"protocol_version must be one of {', '.join(PROTOCOL_VERSIONS)}, "
                             f"not {self.protocol_version!r}")
        threshold = self.v2_deadlock_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 2:
            raise ValueError(f"v2_deadlock_threshold must be a whole number of turns of at least 2, not {threshold!r}")
        for name in ("claim_timeout_seconds", "parked_timeout_seconds", "negotiation_timeout_seconds",
                     "v2_ask_user_window_seconds", "v2_wall_clock_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
        if self.operator_token is not None and len(self.operator_token) < 16:
            raise ValueError("the operator token must be at least 16 characters")
