"""Per-client limits on what anyone may do without an account worth keeping: guess credentials,
register agents, and write into other agents' inboxes. One :class:`Limits` serves every surface,
so a limit is counted once, wherever it is hit.

- **Wrong credentials** (``--max-wrong-tokens``): the operator token wherever it is taken
  (``/metrics``, ``/api``, ``/market``, ``/admin``) and the agent keys of ``/api`` and ``/market``
  share one count per client address. Only a wrong token is counted. Past the limit the address is
  *paced*: each worker compares at most one credential from it per :data:`PACE` (the others are
  429 with ``Retry-After`` before any comparison, so a guesser learns nothing from them), and a
  compared right token is served. Guessing from a blocked address drops from hundreds a second
  to one a second per worker, while the operator, even behind the guesser's address, gets in
  with a retry rather than being locked out for the window.
- **Registrations** (``--max-registrations-per-hour``): ``POST /v1/agents`` and
  ``POST /market/agents`` together, per client address.
- **Agent messages** (``--max-agent-messages-per-hour``): the market's messages from one agent to
  another — contact requests, protocol agreements, sealed bids, offers, instant matches — and
  the listings and wanted ads whose notices reach other agents' inboxes, per client address.
- **Contact requests** (``--max-contacts-per-hour``): per sending agent, and per receiving inbox
  from one client address (so that one sender cannot use up a seller's inbox for everyone else).
  A contact request is the one message nobody asked for; every other message answers the
  recipient's own move (an agreement answers a contact, offers alternate, an instant match sells
  a listing once), so bounding contacts bounds what lands in an inbox unasked. Past the limit the
  request is refused and the inbox keeps what it has: the sender learns (429), nothing is lost
  silently. The market's own notices are never limited.

Counts live in the database (``storage/counters.py``, :class:`SlidingWindow`), so every worker
counts the same ones. The client address is ``server/clientip.py``'s, an IPv6 one counted by
its /64 (:func:`~haggler.server.clientip.holder`); like the chat-start limit, registrations,
messages and the pacing of a blocked address spare this machine unless ``--limit-loopback``
(wrong credentials from it are still counted).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Callable, TypeVar

from sqlalchemy import Connection
from starlette.requests import HTTPConnection

from haggler.errors import RateLimited, Unauthorized, limit_words
from haggler.server.clientip import holder
from haggler.storage.counters import SlidingWindow, window_key
from haggler.storage.database import Database
from haggler.trust.hashing import is_secret

T = TypeVar("T")

#: The window of the wrong-credential limit.
WRONG_TOKEN_WINDOW = timedelta(minutes=15)
#: How often a worker compares a credential from an address past the wrong-token limit.
PACE = timedelta(seconds=1)
#: The most blocked addresses a worker remembers; past it, those whose block ended are forgotten.
MAX_BLOCKED = 10_000
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class ClientLimits:
    """The operator's settings for :class:`Limits` (``haggler serve`` options of the same names)."""

    #: Wrong tokens or keys one client address may present in 15 minutes.
    max_wrong_tokens: int = 10
    #: Agents one client address may register per hour, on the exchange and the market together.
    max_registrations_per_hour: int = 20
    #: Market messages to other agents one client address may send per hour.
    max_agent_messages_per_hour: int = 300
    #: Contact requests one agent may send, and one agent's inbox may receive from one client
    #: address, per hour.
    max_contacts_per_hour: int = 30

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{field.name.replace('_', '-')} must be a whole number of at least 1, not {value!r}")


@dataclass(frozen=True)
class Gate:
    """One sliding-window limit: its keys' prefix in ``rate_windows``, and how a 429 words it."""

    prefix: str
    window: SlidingWindow
    #: The limit in words, for :func:`limit_words`.
    words: str
    option: str
    #: What the refused client did too often.
    what: str

    def take(self, conn: Connection, subject: str, now: datetime) -> None:
        """Count one event of ``subject`` in the caller's transaction; RateLimited past the limit."""
        wait = self.window.take(conn, window_key(self.prefix, subject), now)
        if wait is not None:
            raise RateLimited(f"{self.what}: try again in {wait} seconds ("
                              + limit_words(self.words, self.option) + ")", wait)


def _gate(prefix: str, limit: int, window: timedelta, words: str, option: str, what: str) -> Gate:
    return Gate(prefix, SlidingWindow(limit, window), words, option, what)


class Limits:
    """Every per-client limit of one store. ``client_of`` and ``is_local`` are the app's notion of
    a request's client (``server/clientip.py``)."""

    def __init__(self, db: Database, clock: Callable[[], datetime], settings: ClientLimits, *,
                 client_of: Callable[[HTTPConnection], str], is_local: Callable[[HTTPConnection], bool],
                 limit_loopback: bool) -> None:
        self.db = db
        self.clock = clock
        self.settings = settings
        self.client_of: Callable[[HTTPConnection], str] = lambda request: holder(client_of(request))
        self.is_local = is_local
        self.limit_loopback = limit_loopback
        # Addresses past the wrong-token limit, as this worker learnt when it refused one: until
        # when they are blocked, and when the next credential from each may be compared. In
        # memory, so that a request from an address nobody blocked pays one dict lookup.
        self._blocked: dict[str, tuple[datetime, datetime]] = {}
        self._pace_lock = threading.Lock()
        minutes = f"{WRONG_TOKEN_WINDOW.total_seconds() / 60:g} minutes"
        self.wrong_tokens = _gate("wrong-token:", settings.max_wrong_tokens, WRONG_TOKEN_WINDOW,
                                  f"{settings.max_wrong_tokens} wrong tokens per client address in {minutes}",
                                  "--max-wrong-tokens", "too many wrong tokens from your address")
        self.registrations = _gate("register:", settings.max_registrations_per_hour, HOUR,
                                   f"{settings.max_registrations_per_hour} registrations per hour per client address",
                                   "--max-registrations-per-hour", "too many registrations from your address")
        self.messages = _gate("agent-message:", settings.max_agent_messages_per_hour, HOUR,
                              f"{settings.max_agent_messages_per_hour} agent messages per hour per client address",
                              "--max-agent-messages-per-hour", "too many messages from your address")
        contacts = f"{settings.max_contacts_per_hour} contact requests per hour"
        self.contacts_sent = _gate("contact-from:", settings.max_contacts_per_hour, HOUR,
                                   f"{contacts} from one agent", "--max-contacts-per-hour",
                                   "this agent has sent too many contact requests")
        self.contacts_received = _gate("contact-to:", settings.max_contacts_per_hour, HOUR,
                                       f"{contacts} into one agent's inbox from one client address",
                                       "--max-contacts-per-hour",
                                       "the seller's inbox has taken all the contact requests it takes for now")

    def _take(self, gate: Gate, subject: str) -> None:
        """Count one event of ``subject`` in a transaction of its own, or in the caller's write
        when one is open (``Database.write`` joins it: the market counts a message in the
        transaction of its action)."""
        with self.db.write() as conn:
            gate.take(conn, subject, self.clock())

    def _exempt(self, request: HTTPConnection) -> bool:
        """Whether the request's client is this machine, exempt from the write limits."""
        return not self.limit_loopback and self.is_local(request)

    # -- credentials ----------------------------------------------------------------------------------

    def pace(self, request: HTTPConnection) -> None:
        """Call before comparing a credential the request presents. From an address past the
        wrong-token limit, RateLimited unless this worker has compared none from it in the last
        :data:`PACE` — so the comparison cannot be used as an oracle at speed. Once per request
        (a route may compare the operator token and then an agent token)."""
        if not self._blocked or getattr(request.state, "credential_paced", False) or self._exempt(request):
            return
        request.state.credential_paced = True
        client, now = self.client_of(request), self.clock()
        with self._pace_lock:
            blocked = self._blocked.get(client)
            if blocked is None:
                return
            until, next_compare = blocked
            if until <= now:
                del self._blocked[client]
                return
            if now < next_compare:
                wait = math.ceil((next_compare - now).total_seconds())
                raise RateLimited("too many wrong tokens from your address: one token a second is checked from it, "
                                  f"try again in {wait} seconds ("
                                  + limit_words(self.wrong_tokens.words, self.wrong_tokens.option) + ")", wait)
            self._blocked[client] = (until, now + PACE)

    def wrong_credential(self, request: HTTPConnection) -> None:
        """Count a wrong token or key the request presented; RateLimited, and not counted, once its
        client address has presented ``max_wrong_tokens`` within the window (from then on the
        address is paced: :meth:`pace`)."""
        client = self.client_of(request)
        try:
            self._take(self.wrong_tokens, client)
        except RateLimited as exc:
            self._block(client, self.clock() + timedelta(seconds=exc.retry_after_seconds))
            raise

    def _block(self, client: str, until: datetime) -> None:
        with self._pace_lock:
            if client not in self._blocked and len(self._blocked) >= MAX_BLOCKED:
                # forget the blocks that ended; if that is not enough, the half that end soonest
                now = self.clock()
                live = sorted((times[0], address) for address, times in self._blocked.items() if times[0] > now)
                keep = live[len(live) - MAX_BLOCKED // 2:] if len(live) >= MAX_BLOCKED else live
                self._blocked = {address: self._blocked[address] for _, address in keep}
            next_compare = self._blocked.get(client, (until, self.clock() + PACE))[1]
            self._blocked[client] = (until, max(next_compare, self.clock() + PACE))

    def authenticated(self, request: HTTPConnection, authorization: str | None, authenticate: Callable[[], T]) -> T:
        """``authenticate()`` (which raises Unauthorized for an unknown credential) for a request
        carrying ``authorization``: paced first when its address is blocked, and a wrong
        credential counted (429 past the limit). A missing one is neither paced nor counted."""
        if authorization:
            self.pace(request)
        try:
            return authenticate()
        except Unauthorized:
            if authorization:
                self.wrong_credential(request)
            raise

    def operator(self, request: HTTPConnection, credential: str, token: str | None) -> bool:
        """Whether ``credential`` is the operator ``token``, compared in constant time once
        :meth:`pace` lets it be. A wrong one is counted by :meth:`wrong_credential`, or refused by
        it (429)."""
        self.pace(request)
        if is_secret(credential, token):
            return True
        self.wrong_credential(request)
        return False

    # -- writes anyone may make -----------------------------------------------------------------------

    def registration(self, request: HTTPConnection) -> None:
        """Count a registration by the request's client (429 past the limit)."""
        if not self._exempt(request):
            self._take(self.registrations, self.client_of(request))

    def agent_message(self, request: HTTPConnection) -> None:
        """Count a market message by the request's client (429 past the limit)."""
        if not self._exempt(request):
            self._take(self.messages, self.client_of(request))

    def contact(self, conn: Connection, request: HTTPConnection, sender: str, recipient: str) -> None:
        """Count a contact request from agent ``sender`` into agent ``recipient``'s inbox, in the
        transaction that delivers it: a refusal (429) rolls the delivery back, and a request refused
        for anything else counts nothing."""
        if not self._exempt(request):
            self.count_contact(conn, sender, recipient, self.client_of(request))

    def count_contact(self, conn: Connection, sender: str, recipient: str, client: str) -> None:
        """Count a contact request from agent ``sender`` into ``recipient``'s inbox, by ``client``
        (an address here; a Matrix user on the Matrix door): the limits hold on either door."""
        now = self.clock()
        self.contacts_sent.take(conn, sender, now)
        self.contacts_received.take(conn, f"{recipient} {client}", now)
