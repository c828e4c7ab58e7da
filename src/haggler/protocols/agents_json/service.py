"""The agents.json surface without HTTP: the manifest, sessions, and one call path for every
declared capability.

Every capability call goes through :meth:`AgentsService.call`: count it against the client's
per-minute limit (``limiter.hit``), authenticate the session when one is required (or offered),
check the parameters against the capability's declaration, run the capability — all in one write
transaction, with the call's audit event in a session with audit on. A session's creation is
counted in its insert's transaction the same way.

The routes run :meth:`AgentsService.create_session` and :meth:`AgentsService.call` in the app's
``WriteLane``, which may run them again from the start (in a thread, when the database is busy):
the count is in the request's one transaction so that a request is counted once, and a refused
request's count, undone with its transaction, is written again in one of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from sqlalchemy import Connection

from haggler.catalog import Catalog
from haggler.errors import HagglerError, NotFound, RateLimited
from haggler.orders import Buyer
from haggler.protocols.agents_json import shelf
from haggler.protocols.agents_json.capabilities import Capability, parse_params, store_capabilities
from haggler.protocols.agents_json.cart import CartService
from haggler.protocols.agents_json.sessions import AgentSession, RateLimiter, SessionService, end_session
from haggler.protocols.agents_json.settings import AgentsSettings
from haggler.protocols.agents_json.trail import AuditTrail
from haggler.protocols.agents_json.views import build_manifest
from haggler.server.errors import status_for

__all__ = ["AgentsService", "Call"]


@dataclass(frozen=True)
class Call:
    """One capability call, as its implementation sees it."""

    capability: Capability
    params: dict[str, Any]
    session: AgentSession | None
    base: str


#: A capability's implementation: the call → the ``data`` of the envelope.
Handler = Callable[[Call], Any]
T = TypeVar("T")


class AgentsService:
    def __init__(self, catalog: Catalog, sessions: SessionService, limiter: RateLimiter, settings: AgentsSettings,
                 *, public_key: str | None = None, trail: AuditTrail | None = None,
                 cart: CartService | None = None) -> None:
        self.catalog = catalog
        self.sessions = sessions
        self.limiter = limiter
        self.settings = settings
        self.public_key = public_key
        #: With audit on, every capability call in a session is recorded here.
        self.trail = trail
        self.handlers: dict[str, Handler] = {
            "search": lambda c: shelf.search(catalog, c.params["q"], c.params["page"], c.params["limit"], c.base),
            "browse": lambda c: shelf.browse(catalog, c.params["category"], c.params["sort"], c.params["page"],
                                             c.params["limit"], c.base),
            "detail": lambda c: shelf.detail(catalog, c.params["id"], c.base),
            "negotiate": lambda c: shelf.negotiation_pointer(catalog, c.params["id"], c.base),
        }
        self.cart = cart
        if cart is not None:
            self.handlers.update({
                "cart.add": lambda c: cart.add(_sid(c), c.params["item_id"], c.params["quantity"],
                                               c.params["deal_id"]).to_json(),
                "cart.view": lambda c: cart.view(_sid(c)).to_json(),
                "cart.update": lambda c: cart.update(_sid(c), c.params["item_id"], c.params["quantity"]).to_json(),
                "cart.remove": lambda c: cart.remove(_sid(c), c.params["item_id"]).to_json(),
                "checkout": lambda c: cart.checkout(_sid(c), c.base).to_json(),
            })
        self._declared = store_capabilities(shelf.categories(catalog))

    @property
    def capabilities(self) -> tuple[Capability, ...]:
        """The declared capabilities that have an implementation: exactly what the manifest lists."""
        return tuple(c for c in self._declared if c.name in self.handlers)

    def manifest(self, client: str, base: str) -> dict[str, Any]:
        self.limiter.hit(client)
        store = self.catalog.store
        return build_manifest(site_name=store.name, site_url=base, description=store.tagline,
                              capabilities=self.capabilities, settings=self.settings, public_key=self.public_key)

    def sweep(self) -> int:
        """Background upkeep: end (and sign the trails of) expired sessions, forget old rate
        windows and artifacts past their retention. Returns how many sessions it ended."""
        now = self.sessions.clock()
        self.limiter.prune(now - 2 * RateLimiter.WINDOW)
        if self.trail is None:
            return 0
        ended = self.trail.finalize_expired(now)
        self.trail.prune(now)
        return ended

    # -- sessions ------------------------------------------------------------------------------------

    def create_session(self, client: str, body: dict[str, Any]) -> dict[str, Any]:
        """Count ``client``'s request and open a session for it, in one write transaction."""
        created = self._counted(client, lambda conn: self.sessions.create(client, body))
        return {"session_token": created.token, "session_id": created.session.id,
                "expires_at": created.session.expires_at.isoformat().replace("+00:00", "Z"),
                "capabilities": [c.name for c in self.capabilities]}

    def end_session(self, client: str, token: str | None) -> dict[str, Any]:
        self.limiter.hit(client)
        session = self.sessions.authenticate(token)
        self._end(session.id, "deleted")
        return {"session_id": session.id, "ended": True}

    def artifact(self, client: str, session_id: str) -> dict[str, Any]:
        self.limiter.hit(client)
        if self.trail is None:
            raise NotFound("audit trails are not enabled on this store")
        return self.trail.artifact(session_id)

    def place_order(self, checkout_id: str, buyer: Buyer) -> None:
        """The human's form: place the order once, and end the agent's session (checkout
        completion), signing its audit trail, in the placement's one write transaction: safe to
        run again from the start, as a ``WriteLane`` does when the database is busy (a placement
        that committed is found again, and its session was ended with it)."""
        assert self.cart is not None  # the checkout page exists only with a cart
        self.cart.place_order(checkout_id, buyer, lambda conn, placed: self._end_in(conn, placed.session_id, "checkout"))

    def _end(self, session_id: str, reason: str) -> None:
        with self.sessions.db.write() as conn:
            self._end_in(conn, session_id, reason)

    def _end_in(self, conn: Connection, session_id: str, reason: str) -> None:
        """End the session in the caller's write transaction; with audit on, sign its trail in it."""
        now = self.sessions.clock()
        if self.trail is not None:
            self.trail.finalize(conn, session_id, ended_at=now, end_reason=reason)
        else:
            end_session(conn, session_id, reason, now)

    # -- the call path -------------------------------------------------------------------------------

    def call(self, capability: Capability, *, client: str, token: str | None, raw: dict[str, Any],
             from_query: bool, base: str) -> Any:
        """Count ``client``'s request and run one capability call; return the envelope's ``data``.
        One write transaction: the count, the session, the call's effect and its audit event
        commit together (a crash between them can never leave an unaudited change). A refused
        call rolls back; its count and, once it was authenticated and its parameters checked, its
        refusal's audit event are written in one more."""
        trail = self.trail
        ran: Call | None = None  # the call, once it reached its handler

        def run(conn: Connection) -> Any:
            nonlocal ran
            session = self.sessions.authenticate(token, conn) if capability.requires_session or token else None
            ran = Call(capability, parse_params(capability, raw, from_query=from_query), session, base)
            data = self.handlers[capability.name](ran)
            if trail is not None and session is not None:
                trail.record(session.id, **_event(ran), policy_result="allowed", response_status=200)
            return data

        def refused(exc: Exception) -> None:
            # The effect rolled back; the refusal is still part of what the agent did.
            if trail is not None and ran is not None and ran.session is not None and isinstance(exc, HagglerError):
                trail.record(ran.session.id, **_event(ran), policy_result=f"refused: {exc.message}",
                             response_status=status_for(exc))

        return self._counted(client, run, refused)

    def _counted(self, client: str, work: Callable[[Connection], T],
                 refused: Callable[[Exception], None] | None = None) -> T:
        """``work(conn)`` in one write transaction that first counts ``client``'s request
        (``limiter.hit``, whose write joins it; its 429 is the request's). When anything fails
        the transaction rolls back, and the count is written again in one of its own, with
        ``refused(exc)``'s writes: a refused request counts as every request does. Safe to run
        again from the start, as a ``WriteLane`` does when the database is busy: a write that
        would wait raises before it did anything, and each transaction commits whole or not."""
        db = self.sessions.db
        counted = False
        try:
            with db.write() as conn:
                counted = True  # the count's own refusal (429) is undone with the transaction too
                self.limiter.hit(client)
                return work(conn)
        except Exception as exc:
            if not counted:
                raise
            late: HagglerError | None = None
            with db.write():
                try:
                    self.limiter.hit(client)
                except RateLimited:  # the limit filled meanwhile: the request was counted all the same
                    pass
                if refused is not None:
                    try:
                        refused(exc)
                    except HagglerError as error:  # its record refused before it wrote (an ended session)
                        late = error
            if late is not None:
                raise late from exc
            raise


def _event(call: Call) -> dict[str, Any]:
    """The audit event fields that describe a capability call (unset optional params left out)."""
    capability = call.capability
    return {"capability": capability.name, "method": capability.method,
            "params": {k: v for k, v in call.params.items() if v is not None}}


def _sid(call: Call) -> str:
    assert call.session is not None  # cart capabilities require a session: checked before the call
    return call.session.id
