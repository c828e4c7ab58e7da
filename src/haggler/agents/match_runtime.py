"""A personal agent's runtime for match negotiation: poll for parked turns, decide, respond.

Spec 002 ("Turn Delivery (Polling)", "Personal agent reference implementation", "Configuration
knobs"). The runtime first reads its agent (``GET /api/agents/{id}``); an agent whose
``negotiationMode`` is ``disabled`` does not poll at all, so the server's system negotiator takes
its user's turns after the parked timeout. Otherwise it polls ``POST .../negotiations/pickup``
on a fixed interval; a claimed turn is decided by the *decider* (the deterministic system
negotiator by default; any ``MatchContext -> MatchTurn`` callable, such as an LLM backend, plugs
in) and answered with ``POST .../negotiations/{id}/respond``. The decider speaks v1; on a
Negotiations v2 claim its verdict is played from the claim's seat (docs/matching-api.md,
"Negotiations v2": an initiator's accept becomes a counter that proposes, a reject a withdraw or a
decline, a final-turn counterparty decides).

What can go wrong, and what it does:

* ``204``: nothing waits; sleep one interval.
* ``409`` on respond: the claim expired, another agent of the user took the turn, or the
  negotiation ended meanwhile. Logged; polling goes on.
* the server refuses the turn (another 4xx on respond) or the decider fails: logged; the claim
  stays ours until it expires, so the same turn comes back at the next pickup (a turn that fails
  twice is retried only once per interval).
* a network error or a 5xx: back off (doubling, up to ``max_backoff``) and keep going. A turn
  already claimed comes back at the next pickup, so nothing is lost.
* ``401``/``403``/``404`` on pickup (unknown key, another agent's key, unknown agent): fatal,
  :class:`AgentError` — polling could never succeed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from haggler.agents.match_context import MatchContext, MatchTurn, parse_context
from haggler.agents.match_negotiator import decide
from haggler.errors import HagglerError
from haggler.protocols.matching import v2

__all__ = ["AgentError", "Decider", "MatchAgentRuntime", "Outcome", "RuntimeStats"]

Decider = Callable[[MatchContext], MatchTurn]
_T = TypeVar("_T")

IDLE, RESPONDED, CONFLICT, FAILED = "idle", "responded", "conflict", "failed"
DISABLED = "disabled"


class AgentError(Exception):
    """Polling cannot work (bad key, unknown agent): stop and say why."""


class _Transient(Exception):
    """The server is unreachable or failing (network error, 5xx, 429): back off and retry."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one poll did: ``kind`` is idle, responded, conflict or failed; ``turn`` is
    (negotiation id, turn number) when a turn was picked up."""

    kind: str
    turn: tuple[str, int] | None = None


@dataclass(slots=True)
class RuntimeStats:
    pickups: int = 0
    responded: int = 0
    conflicts: int = 0
    failures: int = 0
    network_errors: int = 0


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    message = body.get("error") if isinstance(body, dict) else None
    return f"{response.status_code} {message or response.reason_phrase}"


@dataclass
class MatchAgentRuntime:
    server: str
    agent_id: str
    api_key: str
    decider: Decider = decide
    #: Seconds between polls while nothing waits.
    interval: float = 30.0
    #: The longest pause after repeated network errors.
    max_backoff: float = 300.0
    #: Seconds to wait for each HTTP response.
    timeout: float = 30.0
    log: Callable[[str], None] = print
    sleep: Callable[[float], None] = time.sleep
    #: An httpx client to send with (requests carry absolute URLs and the agent's key, so any
    #: client will do: one with event hooks, say); default: a new one, closed by :meth:`close`.
    client: httpx.Client | None = None
    stats: RuntimeStats = field(default_factory=RuntimeStats)

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ValueError("the polling interval must be a positive number of seconds")
        self._own_client = self.client is None
        if self.client is None:
            self.client = httpx.Client(timeout=self.timeout)
        self._base = self.server.rstrip("/") + "/api/agents/" + self.agent_id
        self._headers = {"Authorization": f"Bearer {self.api_key}"}
        self._troubled: set[tuple[str, int]] = set()

    def close(self) -> None:
        if self._own_client and self.client is not None:
            self.client.close()

    def __enter__(self) -> MatchAgentRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP ----------------------------------------------------------------------------------------

    def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        assert self.client is not None
        try:
            response = self.client.request(method, url, headers=self._headers, **kwargs)
        except httpx.TransportError as exc:
            raise _Transient(f"{type(exc).__name__}: {exc or 'no response'}") from None
        if response.status_code >= 500 or response.status_code == 429:
            raise _Transient(_error_text(response))
        return response

    def agent(self) -> dict[str, Any]:
        """The agent as the server knows it (``GET /api/agents/{id}``)."""
        response = self._request("GET", self._base)
        if response.status_code != 200:
            raise AgentError(f"cannot read agent {self.agent_id}: {_error_text(response)}")
        return _json_object(response)

    # -- one poll ------------------------------------------------------------------------------------

    def poll_once(self) -> Outcome:
        """Pick up the oldest waiting turn, decide it and respond. Raises :class:`AgentError`
        when polling cannot work, ``_Transient`` on network trouble."""
        response = self._request("POST", self._base + "/negotiations/pickup")
        if response.status_code == 204:
            return Outcome(IDLE)
        if response.status_code != 200:
            raise AgentError(f"pickup refused: {_error_text(response)}")
        self.stats.pickups += 1
        claim = _json_object(response)
        if not isinstance(claim.get("negotiationId"), str) or not isinstance(claim.get("turnNumber"), int):
            raise _Transient("a pickup without negotiationId and turnNumber")
        key = (claim["negotiationId"], claim["turnNumber"])
        where = f"{key[0]} turn {key[1]}"
        try:
            turn = self._decide(claim)
        except Exception as exc:  # noqa: BLE001 - any decider (an LLM backend) may fail; keep polling
            detail = exc.message if isinstance(exc, HagglerError) else f"{type(exc).__name__}: {exc}"
            return self._failed(key, f"{where}: the decider failed ({detail})")
        response = self._request("POST", f"{self._base}/negotiations/{key[0]}/respond", json=turn.to_json())
        if response.status_code == 409:
            self.stats.conflicts += 1
            self.log(f"{where}: not taken ({_error_text(response)}); polling on")
            return Outcome(CONFLICT, key)
        if response.status_code == 401:
            raise AgentError(f"respond refused: {_error_text(response)}")
        if response.status_code != 200:
            return self._failed(key, f"{where}: the server refused the {turn.action.value} "
                                     f"({_error_text(response)})")
        self.stats.responded += 1
        negotiation = _json_object(response)
        self.log(f"{where}: {turn.action.value} → {_summary(negotiation)}")
        return Outcome(RESPONDED, key)

    def _decide(self, claim: dict[str, Any]) -> MatchTurn:
        """The decider's turn for a claim. A v2 negotiation's claim names the seat, whether the turn
        is the final one and any deadlock: the decider decides in v1's words and its verdict is
        played from the seat (``protocols/matching/v2.py``, :func:`~haggler.protocols.matching.v2.play`)."""
        context = parse_context(claim)
        if claim.get("protocolVersion") != v2.V2:
            return self.decider(context)
        deadlock = claim.get("deadlock") if isinstance(claim.get("deadlock"), dict) else {}
        run = deadlock.get("nonConvergentRun") if deadlock.get("bargaining") is True else None
        return v2.play(self.decider, context, str(claim.get("seat")), final=claim.get("finalTurn") is True,
                       deadlock_run=run if isinstance(run, int) else None)

    def _failed(self, key: tuple[str, int], message: str) -> Outcome:
        self.stats.failures += 1
        self.log(message)
        return Outcome(FAILED, key)

    # -- the loop ------------------------------------------------------------------------------------

    def run(self, *, once: bool = False) -> int:
        """Poll until interrupted (``KeyboardInterrupt`` propagates to the caller), or with
        ``once`` until nothing waits. Returns an exit status: 0, or 1 when ``once`` saw a turn
        fail. Raises :class:`AgentError` when polling cannot work, and with ``once`` when the
        server cannot be reached (without it, network trouble is waited out)."""
        agent = self._retrying(self.agent, once)
        if agent.get("negotiationMode") == DISABLED:
            self.log(f"agent {self.agent_id} has negotiationMode disabled: not polling (the system "
                     f"negotiator takes its user's turns after the parked timeout)")
            return 0
        self.log(f"agent {self.agent_id} ({agent.get('name')}) for user {agent.get('userId')}: "
                 + ("handling the waiting turns" if once else f"polling every {self.interval:g}s"))
        while True:
            outcome = self._retrying(self.poll_once, once)
            if outcome.kind == IDLE:
                if once:
                    break
                self.sleep(self.interval)
            elif outcome.kind in (CONFLICT, FAILED):
                assert outcome.turn is not None
                if outcome.turn in self._troubled:  # the same turn again: do not spin on it
                    if once:
                        break
                    self.sleep(self.interval)
                self._troubled.add(outcome.turn)
        return 1 if self.stats.failures else 0

    def _retrying(self, call: Callable[[], _T], once: bool) -> _T:
        """``call()``, backing off (doubling from twice the interval up to ``max_backoff``) while
        the server cannot be reached; with ``once``, the first network error is an AgentError."""
        backoff = 0.0
        while True:
            try:
                return call()
            except _Transient as exc:
                self.stats.network_errors += 1
                if once:
                    raise AgentError(f"cannot reach {self.server}: {exc}") from None
                backoff = min(self.max_backoff, 2 * (backoff or self.interval))
                self.log(f"server trouble ({exc}); retrying in {backoff:g}s")
                self.sleep(backoff)


def _json_object(response: httpx.Response) -> dict[str, Any]:
    """A 200's JSON object; anything else (a proxy's HTML page, say) is server trouble."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise _Transient(f"{response.status_code} without a JSON object")
    return data


def _summary(negotiation: dict[str, Any]) -> str:
    outcome = negotiation.get("outcome")
    if negotiation.get("state") != "completed" or not isinstance(outcome, dict):
        waiting = negotiation.get("waitingFor")
        return f"negotiation {negotiation.get('state')}" + (f", waiting for {waiting}" if waiting else "")
    if outcome.get("hasOpportunity"):
        return f"negotiation completed after {outcome.get('turnCount')} turns: opportunity pending"
    return (f"negotiation completed after {outcome.get('turnCount')} turns: "
            + ("stalled (" + outcome["reason"] + ")" if outcome.get("reason") else "rejected"))
