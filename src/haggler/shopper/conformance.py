"""``haggler check``: does a store speak nash.v1 or negotiate.v1 the way any shopper agent expects?

``run_checks(base_url)`` talks to a live store over plain HTTP (httpx, synchronous) exactly as
a shopper agent would: discovery (``/nash.json``, ``/.well-known/nash.json``, then the
negotiate.v1 files, as pier39's connector looks), catalog, one chat driven by following
``next``, and a few deliberate error probes. nash.v1 is negotiate.v1 under its successor name,
so every check applies to both; the report says which version the store named. A nash.v1 store
gets one more chat (a second chat start), accepted at once, to see the top-level
``checkout_url`` on the reply that closes it with a deal: that leaves an unpaid deal at the
store, which expires as any unpaid deal does. Every rule of the spec (and every known defect of
existing stores) is one small check function in ``CHECKS``, in the order a reader meets it in the spec; each
gives one ``CheckResult``.

The checker is a polite client. It stays inside the limits the store publishes:

* chat starts are counted and never exceed ``limits.max_chat_starts_per_hour_per_ip`` (the
  normal run needs two: one chat, one unknown-product probe); when the budget would be
  exceeded, the remaining chat checks are skipped and say why;
* shopper turns stay within ``max_messages_per_chat`` and ``max_message_length_chars`` —
  except the one deliberate over-long message that checks the length limit;
* a 429 outside the opt-in rate-limit probe is reported and stops all further requests
  (a very short ``Retry-After`` is waited out once);
* timeouts and connection errors become failed checks, never tracebacks.

The opt-in rate-limit probe (``probe_rate_limit=True``) deliberately starts more chats than
the per-IP limit, each with a different spoofed ``X-Forwarded-For``: a store that keys its
limit on that client-supplied header never answers 429. After the probe the checker's own
address is usually rate-limited for up to an hour.
"""

from __future__ import annotations

import email.utils
import json
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Literal, Union
from urllib.parse import quote, urljoin, urlsplit

import httpx

from haggler.shopper.client import (
    DISCOVERY_FILES,
    NASH_PROTOCOL,
    PLACEHOLDER,
    PROTOCOL_KEYS,
    PROTOCOLS,
    fill_template,
    protocol_of,
    store_base,
)

HIDDEN_FIELDS = ("floor", "levers", "inventory_note", "merchant_persona")
LIMIT_FIELDS = ("max_chat_starts_per_hour_per_ip", "max_messages_per_chat", "session_idle_ttl_seconds",
                "max_message_length_chars")
CLOSED_ERROR = "this chat is closed"

#: Chat starts the checker allows itself when the store publishes no usable limit.
DEFAULT_START_BUDGET = 4
#: Shopper turns per chat the checker allows itself when the store publishes no usable limit.
DEFAULT_MESSAGE_BUDGET = 10
#: How many times the checker says goodbye before concluding the store won't close.
WALK_AWAY_TURNS = 3
#: A 429 whose Retry-After is at most this many seconds is waited out (once).
SHORT_RETRY_SECONDS = 5.0
#: The length probe is skipped above this limit: such a URL would hit server URL limits instead.
MAX_PROBE_LENGTH = 8000
#: The rate-limit probe gives up (skip) when the published limit would need more starts than this.
MAX_PROBE_STARTS = 200

FIRST_TURN = "Hi! Is shipping included with this one?"
WALK_AWAY = "no thanks, goodbye"
#: How the deal probe accepts the terms on the table (the word stores tell shoppers to say).
ACCEPT = "deal"
#: How many times the deal probe says it before concluding the store won't close on it.
ACCEPT_TURNS = 2

Level = Literal["MUST", "SHOULD"]
Status = Literal["pass", "fail", "warn", "skip"]


@dataclass(frozen=True)
class CheckResult:
    id: str
    title: str
    section: str
    level: Level
    status: Status
    #: What was seen when the check did not pass (and a short note for some passes).
    detail: str = ""


@dataclass
class ConformanceReport:
    base_url: str
    results: list[CheckResult] = field(default_factory=list)
    #: The version the store's descriptor names ("nash.v1" or "negotiate.v1"), or what it names
    #: instead; None when no descriptor was found.
    protocol: str | None = None
    #: Chat starts the checker made (including the rate-limit probe's).
    chat_starts: int = 0
    #: Why the checker stopped sending requests early (a 429), if it did.
    halted: str | None = None

    @property
    def must_failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.level == "MUST" and r.status == "fail"]

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "fail"]

    @property
    def ok(self) -> bool:
        return not self.must_failures

    def result(self, check_id: str) -> CheckResult:
        for r in self.results:
            if r.id == check_id:
                return r
        raise KeyError(check_id)

    def counts(self) -> dict[str, int]:
        counts = {"pass": 0, "fail": 0, "warn": 0, "skip": 0}
        for r in self.results:
            counts[r.status] += 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "protocol": self.protocol,
            "ok": self.ok,
            "counts": self.counts(),
            "chat_starts": self.chat_starts,
            "halted": self.halted,
            "results": [asdict(r) for r in self.results],
        }


# -- control flow inside a check -----------------------------------------------------------

class _Skip(Exception):
    """The check cannot run (a precondition failed elsewhere, or a limit would be exceeded)."""


class _Fail(Exception):
    """A request could not be completed (timeout, connection error): the check fails."""


class _Halted(Exception):
    """The store answered 429 outside the rate-limit probe: stop sending requests."""


@dataclass
class _Exchange:
    kind: str  # discovery | catalog | start | say | history
    method: str
    url: str
    status: int
    headers: httpx.Headers
    content: bytes
    json: Any = None
    is_json: bool = False

    @property
    def label(self) -> str:
        return f"{self.method} {_short(self.url)}"

    @property
    def object(self) -> dict[str, Any] | None:
        """The body when it is a JSON object (``json`` is None unless the body parsed)."""
        return self.json if isinstance(self.json, dict) else None

    def snippet(self, limit: int = 120) -> str:
        text = self.content.decode("utf-8", "replace").strip().replace("\n", " ")
        return text if len(text) <= limit else text[:limit] + "…"


@dataclass
class _Chat:
    """The one conversation the checker holds with the store."""

    start: _Exchange
    product_id: str
    session_id: str | None = None
    next_url: str | None = None  # the last non-null next, resolved and usable
    nexts: list[tuple[str, Any]] = field(default_factory=list)  # (where, raw next value)
    says: list[tuple[str, _Exchange]] = field(default_factory=list)  # (message sent, response)
    accepted: list[str] = field(default_factory=list)  # shopper turns answered 200
    closed_by: _Exchange | None = None
    last_open_next: str | None = None  # the next URL in effect before the chat closed


_MISSING = object()


def _memo(method: Callable[["_Ctx"], Any]) -> Callable[["_Ctx"], Any]:
    """Run a fixture once; later callers get its value, or a skip naming the earlier failure."""
    name = method.__name__

    def wrapper(self: "_Ctx") -> Any:
        cached = self._memo.get(name, _MISSING)
        if isinstance(cached, BaseException):
            if isinstance(cached, (_Fail, _Halted)):
                raise _Skip(f"not checked: an earlier request failed ({cached})")
            raise cached
        if cached is not _MISSING:
            return cached
        try:
            value = method(self)
        except (_Skip, _Fail, _Halted) as exc:
            self._memo[name] = exc
            raise
        self._memo[name] = value
        return value

    return wrapper


class _Ctx:
    """Shared state of one run: the HTTP client, what was seen, and the budgets."""

    def __init__(self, base_url: str, client: httpx.Client, *, probe_rate_limit: bool, timeout: float,
                 product_id: str | None, sleep: Callable[[float], None]) -> None:
        self.base = base_url
        self.client = client
        self.probe_rate_limit = probe_rate_limit
        self.timeout = timeout
        self.product_id = product_id
        self.sleep = sleep
        self.exchanges: list[_Exchange] = []
        self.starts = 0
        self.halted: str | None = None
        self._memo: dict[str, Any] = {}

    # -- HTTP ------------------------------------------------------------------------------

    def get(self, url: str, kind: str, *, headers: dict[str, str] | None = None,
            allow_429: bool = False) -> _Exchange:
        if self.halted:
            raise _Skip(f"not sent: {self.halted}")
        for attempt in (1, 2):
            try:
                response = self.client.get(url, headers=headers)
            except httpx.TimeoutException:
                raise _Fail(f"GET {_short(url)}: no answer within {self.timeout:g}s") from None
            except httpx.RequestError as exc:  # connection refused, TLS, protocol, decoding, redirects
                raise _Fail(f"GET {_short(url)}: {type(exc).__name__}: {str(exc) or 'request failed'}") from None
            except httpx.InvalidURL as exc:
                raise _Fail(f"GET {_short(url)}: invalid URL ({exc})") from None
            exchange = self._record(kind, url, response)
            if response.status_code != 429 or allow_429:
                return exchange
            retry = _retry_after_seconds(response.headers.get("retry-after"))
            if attempt == 1 and retry is not None and retry <= SHORT_RETRY_SECONDS:
                self.sleep(max(retry, 0.0))
                continue
            wait = f"Retry-After: {response.headers['retry-after']}" if "retry-after" in response.headers \
                else "no Retry-After"
            self.halted = (f"the store answered 429 ({wait}) to {exchange.label}; the checker stopped "
                           f"rather than keep sending requests — run it again later")
            raise _Halted(self.halted)
        raise AssertionError("unreachable")

    def _record(self, kind: str, url: str, response: httpx.Response) -> _Exchange:
        content = response.content
        exchange = _Exchange(kind, response.request.method, str(response.url), response.status_code,
                             response.headers, content)
        try:
            exchange.json = json.loads(content.decode("utf-8-sig"))
            exchange.is_json = True
        except (UnicodeDecodeError, ValueError):
            pass
        self.exchanges.append(exchange)
        return exchange

    # -- discovery ---------------------------------------------------------------------------

    def discovery_url(self, path: str) -> str:
        """Where ``path`` (one of the client's ``DISCOVERY_FILES``) is: under the store's base, or at the
        host's root for the ``/.well-known/`` ones (RFC 8615)."""
        if path.startswith("/.well-known/"):
            parts = urlsplit(self.base)
            return f"{parts.scheme}://{parts.netloc}{path}"
        return self.base + path

    def discovery(self) -> list[tuple[str, _Exchange]]:
        """Every discovery file asked for once, in a shopper's order: (path, response). A file that
        could not be fetched is left out; the first failure is raised when nothing was fetched."""
        if "discovery" not in self._memo:
            fetched: list[tuple[str, _Exchange]] = []
            failure: Exception | None = None
            for path in DISCOVERY_FILES:
                try:
                    fetched.append((path, self.get(self.discovery_url(path), "discovery")))
                except (_Fail, _Halted, _Skip) as exc:
                    failure = failure or exc
            self._memo["discovery"] = (fetched, failure)
        fetched, failure = self._memo["discovery"]
        if not fetched and failure is not None:
            raise failure
        return fetched

    def discovery_responses(self) -> list[tuple[str, _Exchange]]:
        """The discovery files the store serves (200), in a shopper's order."""
        try:
            return [(path, exchange) for path, exchange in self.discovery() if exchange.status == 200]
        except (_Fail, _Halted, _Skip):
            return []

    @_memo
    def found(self) -> tuple[str, _Exchange]:
        """The descriptor as a shopper finds it: the first discovery file that answers with JSON."""
        for path, exchange in self.discovery_responses():
            if exchange.is_json:
                return path, exchange
        raise _Skip("no usable discovery document (see discovery.document)")

    def descriptor(self) -> dict[str, Any]:
        path, exchange = self.found()
        if exchange.object is None:
            raise _Skip(f"{path} is not a JSON object (see discovery.document)")
        return exchange.object

    @_memo
    def v1(self) -> dict[str, Any]:
        """The descriptor, once it names nash.v1 or negotiate.v1 — a shopper must refuse anything else."""
        descriptor = self.descriptor()
        protocol = protocol_of(descriptor)
        if protocol not in PROTOCOLS:
            seen = "missing" if protocol is None else repr(protocol)
            raise _Skip(f"the protocol version is {seen}, not one of {', '.join(map(repr, PROTOCOLS))}: "
                        f"a shopper must refuse this store")
        return descriptor

    def version(self) -> str:
        return str(protocol_of(self.v1()))

    def endpoint(self, key: str, attr: str) -> str:
        endpoints = self.v1().get("endpoints")
        entry = endpoints.get(key) if isinstance(endpoints, dict) else None
        value = entry.get(attr) if isinstance(entry, dict) else None
        if not isinstance(value, str) or not value:
            raise _Skip(f"endpoints.{key}.{attr} is missing (see discovery.endpoints)")
        return urljoin(self.found()[1].url, value)

    def limit(self, name: str) -> int | None:
        limits = self.v1().get("limits")
        value = limits.get(name) if isinstance(limits, dict) else None
        return value if _is_int(value) and value > 0 else None

    @property
    def start_budget(self) -> int:
        return self.limit("max_chat_starts_per_hour_per_ip") or DEFAULT_START_BUDGET

    @property
    def message_budget(self) -> int:
        return self.limit("max_messages_per_chat") or DEFAULT_MESSAGE_BUDGET

    def fit(self, message: str) -> str:
        """A normal shopper turn, cut to the store's message length limit."""
        limit = self.limit("max_message_length_chars")
        return message[:limit] if limit else message

    # -- catalog and chat ----------------------------------------------------------------------

    @_memo
    def catalog(self) -> _Exchange:
        return self.get(self.endpoint("catalog", "url"), "catalog")

    def catalog_products(self) -> list[Any] | None:
        exchange = self.catalog()
        if exchange.status != 200 or not exchange.is_json:
            return None
        body = exchange.json
        if isinstance(body, dict):
            body = body.get("products")
        return body if isinstance(body, list) else None

    @_memo
    def chat_product(self) -> str:
        if self.product_id:
            return self.product_id
        product_id = _first_product_id(self.v1().get("products"))
        if product_id is None:  # the descriptor lists none: ask the catalog
            try:
                product_id = _first_product_id(self.catalog_products())
            except (_Skip, _Fail, _Halted):
                pass
        if product_id is None:
            raise _Skip("no product to chat about (products is empty); pass a product id")
        return product_id

    def start_url(self, product_id: str) -> str:
        template = self.endpoint("start_chat", "url_template")
        return fill_template(template, product_id=product_id)

    def use_start(self, why: str) -> None:
        if self.starts >= self.start_budget:
            raise _Skip(f"{why} would be chat start #{self.starts + 1}, over the store's published limit of "
                        f"{self.start_budget} per hour per IP")
        self.starts += 1

    def _start_chat(self, why: str) -> _Chat:
        product_id = self.chat_product()
        url = self.start_url(product_id)
        self.use_start(why)
        chat = _Chat(start=self.get(url, "start"), product_id=product_id)
        body = chat.start.object or {}
        if chat.start.status == 201 and isinstance(body.get("session_id"), str) and body["session_id"]:
            chat.session_id = body["session_id"]
            self._take_next(chat, "start", chat.start, body.get("next", _MISSING))
        return chat

    @_memo
    def chat(self) -> _Chat:
        """Start the one chat the checker holds."""
        return self._start_chat("starting the chat")

    @_memo
    def deal_chat(self) -> _Chat:
        """nash.v1 only: a second chat, accepted at once, to see the reply that closes it with a deal."""
        if self.version() != NASH_PROTOCOL:
            raise _Skip(f"the store names {self.version()}; the top-level checkout_url is nash.v1's")
        self._after(self.chat)  # the main chat starts first, whichever check asks first
        chat = self._start_chat("the deal probe")
        if chat.session_id is None or chat.next_url is None:
            raise _Skip("the deal probe's chat did not start with a usable next URL (see chat.start)")
        for _ in range(ACCEPT_TURNS):
            if chat.closed_by is not None or chat.next_url is None or len(chat.accepted) >= self.message_budget:
                break
            self.say(chat, self.fit(ACCEPT))
        return chat

    def open_chat(self) -> _Chat:
        chat = self.chat()
        if chat.session_id is None:
            raise _Skip("no chat was started (see chat.start)")
        return chat

    def _take_next(self, chat: _Chat, where: str, exchange: _Exchange, raw: Any) -> None:
        chat.nexts.append((where, raw))
        if isinstance(raw, str) and raw:
            # Be lenient to keep going (a relative next is resolved; chat.next_absolute reports it).
            resolved = urljoin(exchange.url, raw)
            if PLACEHOLDER not in resolved:
                try:
                    resolved = self.say_template(chat)
                except _Skip:
                    return
            chat.next_url = resolved
        elif raw is None:
            chat.next_url = None
        else:
            try:
                chat.next_url = self.say_template(chat)
            except _Skip:
                chat.next_url = None

    def say_template(self, chat: _Chat) -> str:
        template = self.endpoint("send_message", "url_template")
        return fill_template(template, session_id=chat.session_id or "")

    def say(self, chat: _Chat, message: str) -> _Exchange:
        """Send one turn on ``next``; follow what comes back."""
        assert chat.next_url is not None
        if len(chat.accepted) >= self.message_budget:
            raise _Skip(f"another turn would exceed the store's limit of {self.message_budget} messages per chat")
        before = chat.next_url
        exchange = self.get(before.replace(PLACEHOLDER, quote(message, safe="")), "say")
        chat.says.append((message, exchange))
        body = exchange.object or {}
        if exchange.status == 200:
            chat.accepted.append(message)
            if body.get("closed") is True:
                chat.closed_by = exchange
                chat.last_open_next = before
            self._take_next(chat, f"say #{len(chat.accepted)}", exchange, body.get("next", _MISSING))
            if chat.closed_by is not None:
                chat.next_url = None
        return exchange

    # The chat's steps, in this order whichever check asks first: first turn, history, length
    # probe, walking away, a turn after the close. Each step runs the earlier ones first.

    def _after(self, *steps: Callable[[], Any]) -> None:
        for step in steps:
            try:
                step()
            except (_Skip, _Fail):
                pass  # reported by the step's own check; _Halted propagates

    @_memo
    def turn(self) -> _Exchange:
        """One ordinary shopper turn, sent by following the start's next."""
        chat = self.open_chat()
        if chat.next_url is None:
            raise _Skip("the start gave no usable next URL (see chat.start)")
        return self.say(chat, self.fit(FIRST_TURN))

    @_memo
    def history(self) -> tuple[list[str], _Exchange]:
        """The chat's history, read after the first turn: (shopper turns sent so far, response)."""
        chat = self.open_chat()
        self._after(self.turn)
        template = self.endpoint("read_history", "url_template")
        sent = list(chat.accepted)
        return sent, self.get(fill_template(template, session_id=chat.session_id or ""), "history")

    @_memo
    def length_probe(self) -> tuple[int, _Exchange]:
        """One deliberately over-long turn (limit + 1 characters) on the open chat."""
        limit = self.limit("max_message_length_chars")
        if limit is None:
            raise _Skip("limits.max_message_length_chars is not published (see discovery.limits)")
        if limit + 1 > MAX_PROBE_LENGTH:
            raise _Skip(f"the limit ({limit} chars) is too long to probe in a URL")
        chat = self.open_chat()
        self._after(self.turn, self.history)
        if chat.next_url is None:
            raise _Skip("the chat is already closed")
        return limit, self.say(chat, "x" * (limit + 1))

    @_memo
    def walk_away(self) -> _Chat:
        """Say goodbye (up to a few times) until the store closes the chat."""
        chat = self.open_chat()
        self._after(self.turn, self.history, self.length_probe)
        for _ in range(WALK_AWAY_TURNS):
            if chat.closed_by is not None or chat.next_url is None:
                break
            if len(chat.accepted) >= self.message_budget:
                break
            self.say(chat, self.fit(WALK_AWAY))
        return chat

    @_memo
    def after_close(self) -> _Exchange:
        chat = self.walk_away()
        if chat.closed_by is None or chat.last_open_next is None:
            raise _Skip("the chat never closed (see chat.walk_away)")
        return self.get(chat.last_open_next.replace(PLACEHOLDER, quote(self.fit("hello again?"), safe="")), "say")

    def unknown_session_id(self) -> str:
        return "nosuchsession" + secrets.token_hex(8)


# -- the checks ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    id: str
    title: str
    section: str
    level: Level
    run: Callable[[_Ctx], "Outcome"]


#: A check returns None (pass), a detail string (fail), or (status, detail).
Outcome = Union[None, str, tuple[Status, str]]

CHECKS: list[Check] = []


CheckFn = Callable[[_Ctx], Outcome]


def check(check_id: str, title: str, section: str, level: Level) -> Callable[[CheckFn], CheckFn]:
    """Register a check; the registration order is the report's order."""
    def register(fn: CheckFn) -> CheckFn:
        CHECKS.append(Check(check_id, title, section, level, fn))
        return fn
    return register


# §2 Discovery

@check("discovery.document", "a descriptor (a JSON object) at /nash.json, /.well-known/nash.json, /negotiate.json "
       "or /.well-known/negotiate.json, the first that answers JSON", "§2", "MUST")
def _discovery(ctx: _Ctx) -> Outcome:
    fetched = ctx.discovery()
    served = [(path, e) for path, e in fetched if e.status == 200]
    if not served:
        return "; ".join(f"{e.label} answered {e.status}" for _, e in fetched)
    try:
        path, exchange = ctx.found()
    except _Skip:
        path, exchange = served[0]
        return f"{exchange.label} is not JSON: {exchange.snippet()}"
    if not isinstance(exchange.json, dict):
        return f"{exchange.label} is JSON but not an object"
    return "pass", f"found at {path}"


def _served_names(ctx: _Ctx) -> dict[str, list[tuple[str, _Exchange]]]:
    """The discovery files served, grouped by name: "nash.json", "negotiate.json"."""
    names: dict[str, list[tuple[str, _Exchange]]] = {}
    for path, exchange in ctx.discovery_responses():
        names.setdefault(path.rsplit("/", 1)[1], []).append((path, exchange))
    return names


@check("discovery.well_known", "each discovery file served is also served at the other place (base and "
       "/.well-known/)", "§2", "SHOULD")
def _well_known(ctx: _Ctx) -> Outcome:
    names = _served_names(ctx)
    if not names:
        raise _Skip("no discovery document is served")
    served = {path for files in names.values() for path, _ in files}
    missing = [path for path in DISCOVERY_FILES if path.rsplit("/", 1)[1] in names and path not in served]
    statuses = {path: e.status for path, e in ctx.discovery()}
    if missing:
        return "warn", "; ".join(f"GET {path} answered {statuses.get(path, 'nothing')}" for path in missing)
    return None


@check("discovery.identical", "a discovery file and its /.well-known/ mirror return identical content", "§2", "MUST")
def _identical(ctx: _Ctx) -> Outcome:
    pairs = [files for files in _served_names(ctx).values() if len(files) == 2]
    if not pairs:
        raise _Skip("no discovery file is served at both places")
    problems = []
    for (path_a, first), (path_b, second) in pairs:
        if first.content != second.content:
            problems.append(f"{path_a} and {path_b} differ{_differing(first, second, ignore=())}")
    return "; ".join(problems) or None


@check("discovery.names_agree", "nash.json and negotiate.json, when both are served, describe the same store "
       "(apart from the version key)", "§2", "SHOULD")
def _names_agree(ctx: _Ctx) -> Outcome:
    names = _served_names(ctx)
    if len(names) < 2:
        raise _Skip("only one discovery name is served" if names else "no discovery document is served")
    (path_a, first), (path_b, second) = names["nash.json"][0], names["negotiate.json"][0]
    a, b = first.object, second.object
    if a is None or b is None:
        raise _Skip("a discovery file is not a JSON object (see discovery.document)")
    if {k: v for k, v in a.items() if k not in PROTOCOL_KEYS} != {k: v for k, v in b.items() if k not in PROTOCOL_KEYS}:
        return f"{path_a} and {path_b} differ{_differing(first, second, ignore=PROTOCOL_KEYS)}"
    return None


def _differing(first: _Exchange, second: _Exchange, *, ignore: tuple[str, ...]) -> str:
    """Which top-level keys two discovery documents disagree on, for a failure's detail."""
    a, b = first.object, second.object
    if a is None or b is None:
        return ""
    keys = sorted(k for k in set(a) | set(b) if k not in ignore and a.get(k) != b.get(k))
    return f" (differing keys: {', '.join(keys)})" if keys else " (same JSON, different bytes)"


@check("discovery.content_type", "Content-Type: application/json; charset=utf-8", "§2", "MUST")
def _content_type(ctx: _Ctx) -> Outcome:
    served = ctx.discovery_responses()
    if not served:
        raise _Skip("no discovery document is served")
    problems = []
    for _, exchange in served:
        header = exchange.headers.get("content-type")
        if not _is_json_utf8(header):
            problems.append(f"{exchange.label}: Content-Type {header!r}" if header else
                            f"{exchange.label}: no Content-Type")
    return "; ".join(problems) or None


@check("discovery.cors", "Access-Control-Allow-Origin: * (asked without an Origin header)", "§2", "MUST")
def _cors(ctx: _Ctx) -> Outcome:
    served = ctx.discovery_responses()
    if not served:
        raise _Skip("no discovery document is served")
    problems = []
    for _, exchange in served:
        value = exchange.headers.get("access-control-allow-origin")
        if value is None or value.strip() != "*":
            problems.append(f"{exchange.label}: Access-Control-Allow-Origin {value!r}" if value is not None else
                            f"{exchange.label}: no Access-Control-Allow-Origin header")
    return "; ".join(problems) or None


@check("discovery.protocol", 'nash_protocol or negotiate_protocol is "nash.v1" or "negotiate.v1"', "§2", "MUST")
def _protocol(ctx: _Ctx) -> Outcome:
    descriptor = ctx.descriptor()
    key = next((k for k in PROTOCOL_KEYS if descriptor.get(k)), None)
    if key is None:
        return ("nash_protocol and negotiate_protocol are missing; a shopper must refuse this store "
                "(later checks skipped)")
    if descriptor[key] not in PROTOCOLS:
        return f"{key} is {descriptor[key]!r}; a shopper must refuse this store (later checks skipped)"
    return "pass", f"{key}: {descriptor[key]}"


@check("discovery.required_fields", "store, endpoints, products and limits are present", "§2", "MUST")
def _required(ctx: _Ctx) -> Outcome:
    descriptor = ctx.v1()
    problems = []
    store = descriptor.get("store")
    if not isinstance(store, dict):
        problems.append("store is missing" if store is None else "store is not an object")
    elif not isinstance(store.get("name"), str) or not store["name"]:
        problems.append("store.name is missing")
    for key, kind, name in (("endpoints", dict, "an object"), ("products", list, "an array"),
                            ("limits", dict, "an object")):
        value = descriptor.get(key)
        if value is None:
            problems.append(f"{key} is missing")
        elif not isinstance(value, kind):
            problems.append(f"{key} is not {name}")
    return "; ".join(problems) or None


_ENDPOINTS = (
    ("start_chat", "url_template", ("{product_id}",)),
    ("send_message", "url_template", ("{session_id}", PLACEHOLDER)),
    ("read_history", "url_template", ("{session_id}",)),
    ("catalog", "url", ()),
)


@check("discovery.endpoints", "the four endpoints: GET, absolute URLs, RFC 6570 placeholders", "§2", "MUST")
def _endpoints(ctx: _Ctx) -> Outcome:
    endpoints = ctx.v1().get("endpoints")
    if not isinstance(endpoints, dict):
        raise _Skip("no endpoints object (see discovery.required_fields)")
    problems = []
    for key, attr, placeholders in _ENDPOINTS:
        entry = endpoints.get(key)
        if not isinstance(entry, dict):
            problems.append(f"endpoints.{key} is missing")
            continue
        method = entry.get("method")
        if not isinstance(method, str) or method.upper() != "GET":
            problems.append(f"endpoints.{key}.method is {method!r}, not 'GET'")
        url = entry.get(attr)
        if not isinstance(url, str) or not url:
            problems.append(f"endpoints.{key}.{attr} is missing")
            continue
        if not _is_absolute(url):
            problems.append(f"endpoints.{key}.{attr} is not absolute: {url}")
        missing = [p for p in placeholders if p not in url]
        if missing:
            problems.append(f"endpoints.{key}.{attr} lacks {', '.join(missing)}: {url}")
        if not placeholders and re.search(r"\{[^}]*\}", url):
            problems.append(f"endpoints.{key}.{attr} has a placeholder but takes none: {url}")
    return "; ".join(problems) or None


@check("discovery.products", "products have id, name, list_price, currency, start_chat_url", "§2", "MUST")
def _products(ctx: _Ctx) -> Outcome:
    products = ctx.v1().get("products")
    if not isinstance(products, list):
        raise _Skip("no products array (see discovery.required_fields)")
    problems = []
    for i, product in enumerate(products):
        if not isinstance(product, dict):
            problems.append(f"products[{i}] is not an object")
            continue
        where = f"products[{i}]" + (f" ({product['id']})" if isinstance(product.get("id"), str) else "")
        for key in ("id", "name", "currency", "start_chat_url"):
            if not isinstance(product.get(key), str) or not product[key]:
                problems.append(f"{where}.{key} is missing")
        if not _is_number(product.get("list_price")):
            problems.append(f"{where}.list_price is missing or not a number")
        url = product.get("start_chat_url")
        if isinstance(url, str) and url and not _is_absolute(url):
            problems.append(f"{where}.start_chat_url is not absolute: {url}")
    return _first(problems)


@check("discovery.product_page_url", "products have a page_url", "§2", "SHOULD")
def _page_url(ctx: _Ctx) -> Outcome:
    products = ctx.v1().get("products")
    if not isinstance(products, list):
        raise _Skip("no products array (see discovery.required_fields)")
    missing = [str(p.get("id", i)) for i, p in enumerate(products)
               if isinstance(p, dict) and (not isinstance(p.get("page_url"), str) or not p["page_url"])]
    if missing:
        return "warn", f"no page_url for {len(missing)} of {len(products)} products: {', '.join(missing[:5])}"
    return None


@check("discovery.limits", "limits has its five fields with sane values", "§2", "MUST")
def _limits(ctx: _Ctx) -> Outcome:
    limits = ctx.v1().get("limits")
    if not isinstance(limits, dict):
        raise _Skip("no limits object (see discovery.required_fields)")
    problems = []
    missing = [name for name in (*LIMIT_FIELDS, "currency") if name not in limits]
    if missing:
        problems.append(f"limits lacks {', '.join(missing)}")
    for name in LIMIT_FIELDS:
        if name in limits and not (_is_int(limits[name]) and limits[name] > 0):
            problems.append(f"limits.{name} is {limits[name]!r}, not a positive integer")
    if "currency" in limits and not (isinstance(limits["currency"], str) and limits["currency"].strip()):
        problems.append(f"limits.currency is {limits['currency']!r}, not a currency code")
    return "; ".join(problems) or None


@check("catalog.products", "the catalog endpoint returns the products", "§2", "MUST")
def _catalog(ctx: _Ctx) -> Outcome:
    exchange = ctx.catalog()
    if exchange.status != 200:
        return f"{exchange.label} answered {exchange.status}: {exchange.snippet()}"
    if not exchange.is_json:
        return f"{exchange.label} is not JSON: {exchange.snippet()}"
    products = ctx.catalog_products()
    if products is None:
        return f"{exchange.label} has no products array"
    without_id = [i for i, p in enumerate(products) if not (isinstance(p, dict) and isinstance(p.get("id"), str))]
    if without_id:
        return f"{len(without_id)} catalog products have no id (first: products[{without_id[0]}])"
    return None


# §3 Chat flow

@check("chat.start", "starting a chat answers 201 with session_id, greeting, next", "§3.1", "MUST")
def _start(ctx: _Ctx) -> Outcome:
    chat = ctx.chat()
    exchange = chat.start
    body = _json_object(exchange, 201)
    problems = [f"{key} is missing or not a string" for key in ("session_id", "greeting", "next")
                if not isinstance(body.get(key), str) or not body[key]]
    return "; ".join(problems) or None


@check("chat.next_absolute", "next is absolute and keeps the literal {url_encoded_message}", "§3.1", "MUST")
def _next_absolute(ctx: _Ctx) -> Outcome:
    chat = ctx.open_chat()
    ctx._after(ctx.walk_away)  # every next the store gives in the chat is checked, up to the close
    urls = [(where, raw) for where, raw in chat.nexts if isinstance(raw, str) and raw]
    if not urls:
        raise _Skip("the store gave no next URL (see chat.start)")
    problems: dict[str, list[str]] = {}
    for where, raw in urls:
        if not _is_absolute(raw):
            problems.setdefault(f"next is relative: {raw}", []).append(where)
        elif PLACEHOLDER not in raw:
            problems.setdefault(f"next lacks the literal {PLACEHOLDER}: {raw}", []).append(where)
    return _first([f"{problem} (in {', '.join(wheres)})" if wheres != ["start"] else problem
                   for problem, wheres in problems.items()])


@check("chat.say", "a turn answers 200 with message, closed, next", "§3.2", "MUST")
def _say(ctx: _Ctx) -> Outcome:
    exchange = ctx.turn()
    body = _json_object(exchange, 200)
    problems = []
    if not isinstance(body.get("message"), str):
        problems.append("message is missing or not a string")
    if not isinstance(body.get("closed"), bool):
        problems.append(f"closed is {body.get('closed')!r}, not true/false")
    if "next" not in body:
        problems.append("next is missing")
    elif body.get("closed") is False and not isinstance(body["next"], str):
        problems.append(f"next is {body['next']!r} while the chat is open")
    return "; ".join(problems) or None


@check("chat.checkout_url", "nash.v1: the reply that closes a chat with a deal has an absolute top-level "
       "checkout_url", "§3.2", "SHOULD")
def _checkout_url(ctx: _Ctx) -> Outcome:
    """SHOULD, as pier39's connector treats it: it reads the field when present and works without
    it (it is optional in its reply model), but a shopper then has no link to pay at."""
    chat = ctx.deal_chat()
    if chat.closed_by is None:
        raise _Skip(f"the chat did not close after the shopper said {ctx.fit(ACCEPT)!r}; no deal to check")
    body = chat.closed_by.object or {}
    url = body.get("checkout_url", _MISSING)
    if url is _MISSING or url is None:
        deal = body.get("deal")
        inside = " (only deal.checkout_url has one)" if isinstance(deal, dict) and deal.get("checkout_url") else ""
        return f"the reply closing the chat after {ctx.fit(ACCEPT)!r} has no checkout_url{inside}"
    if not isinstance(url, str) or not _is_absolute(url):
        return f"checkout_url is not an absolute URL: {url!r}"
    return "pass", url


@check("chat.walk_away", 'walking away ("no thanks, goodbye") closes the chat', "§3.2", "SHOULD")
def _walk_away(ctx: _Ctx) -> Outcome:
    chat = ctx.walk_away()
    if chat.closed_by is None:
        goodbyes = sum(1 for message, _ in chat.says if message == ctx.fit(WALK_AWAY))
        if not goodbyes:
            raise _Skip(f"no turn left to walk away with (max_messages_per_chat: {ctx.message_budget})")
        return "warn", f"still open after saying {ctx.fit(WALK_AWAY)!r} {goodbyes} time{'s' if goodbyes > 1 else ''}"
    return None


@check("chat.closed_next_null", "next is null once closed is true", "§3.2", "MUST")
def _closed_next_null(ctx: _Ctx) -> Outcome:
    chat = ctx.walk_away()
    if chat.closed_by is None:
        raise _Skip("the chat never closed (see chat.walk_away)")
    body = chat.closed_by.json
    if body.get("next", _MISSING) is not None:
        return f"closed is true but next is {body.get('next', '(missing)')!r}"
    return None


@check("chat.closed_rejects", 'a turn after the close answers 400 {"error": "this chat is closed"}', "§3.2", "MUST")
def _closed_rejects(ctx: _Ctx) -> Outcome:
    exchange = ctx.after_close()
    if exchange.status != 400:
        return f"{exchange.label} on a closed chat answered {exchange.status} (expected 400): {exchange.snippet()}"
    body = exchange.object
    if body is not None and "error" in body and body["error"] != CLOSED_ERROR:
        return f"error is {body['error']!r}, not {CLOSED_ERROR!r}"
    return None  # a body that is not JSON at all is errors.json_bodies' to report


@check("chat.history", "history is {session_id, history: [{speaker, message}]} with the turns sent", "§3.3", "MUST")
def _history(ctx: _Ctx) -> Outcome:
    chat = ctx.open_chat()
    expected, exchange = ctx.history()
    body = _json_object(exchange, 200)
    problems = []
    if body.get("session_id") != chat.session_id:
        problems.append(f"session_id is {body.get('session_id')!r}, not {chat.session_id!r}")
    history = body.get("history")
    if not isinstance(history, list):
        return "; ".join([*problems, "history is missing or not an array"])
    bad = [i for i, entry in enumerate(history)
           if not (isinstance(entry, dict) and isinstance(entry.get("speaker"), str)
                   and isinstance(entry.get("message"), str))]
    if bad:
        problems.append(f"history[{bad[0]}] is not {{speaker, message}}")
    said = [e.get("message") for e in history if isinstance(e, dict) and e.get("speaker") == "shopper"]
    it = iter(said)
    if not all(any(m == s for s in it) for m in expected):
        problems.append(f"the shopper turns sent ({expected!r}) are not in the history (shopper turns there: "
                        f"{said!r})")
    return "; ".join(problems) or None


# §6 Errors

@check("errors.unknown_product", "an unknown product_id answers 404", "§6", "MUST")
def _unknown_product(ctx: _Ctx) -> Outcome:
    url = ctx.start_url(f"no-such-product-{secrets.token_hex(6)}")
    ctx.use_start("the unknown-product probe")
    return _expect_404(ctx.get(url, "start"), "product_id")


@check("errors.unknown_session_say", "a turn on an unknown session answers 404", "§6", "MUST")
def _unknown_session_say(ctx: _Ctx) -> Outcome:
    template = ctx.endpoint("send_message", "url_template")
    url = fill_template(template, session_id=ctx.unknown_session_id(), url_encoded_message="hello")
    return _expect_404(ctx.get(url, "say"), "session")


@check("errors.unknown_session_history", "history of an unknown session answers 404", "§6", "MUST")
def _unknown_session_history(ctx: _Ctx) -> Outcome:
    template = ctx.endpoint("read_history", "url_template")
    exchange = ctx.get(fill_template(template, session_id=ctx.unknown_session_id()), "history")
    if exchange.status == 200:
        body = exchange.object
        if body is not None and body.get("history") == []:
            return f"200 with an empty history for an unknown session (a known defect): {exchange.snippet()}"
    return _expect_404(exchange, "session")


def _expect_404(exchange: _Exchange, unknown: str) -> Outcome:
    """The verdict on a request for something that does not exist; 400 is a known defect."""
    if exchange.status == 404:
        return None
    if exchange.status == 400:
        return f"400 instead of 404 for an unknown {unknown} (a known defect): {exchange.snippet()}"
    return f"{exchange.label} answered {exchange.status} (expected 404): {exchange.snippet()}"


@check("errors.message_too_long", "a message over max_message_length_chars answers 400", "§6", "MUST")
def _too_long(ctx: _Ctx) -> Outcome:
    limit, exchange = ctx.length_probe()
    if exchange.status == 400:
        return None
    return f"a {limit + 1}-character message (limit {limit}) answered {exchange.status} (expected 400)"


@check("limits.rate_limit_xff", "chat starts are limited per client, not per X-Forwarded-For", "§6", "MUST")
def _rate_limit_xff(ctx: _Ctx) -> Outcome:
    if not ctx.probe_rate_limit:
        return "skip", ("not probed (opt in with probe_rate_limit; the probe uses up this address's chat starts "
                        "for an hour)")
    limit = ctx.limit("max_chat_starts_per_hour_per_ip")
    if limit is None:
        raise _Skip("limits.max_chat_starts_per_hour_per_ip is not published (see discovery.limits)")
    attempts = limit + 1
    if attempts > MAX_PROBE_STARTS:
        raise _Skip(f"the published limit ({limit} per hour) is too high to probe")
    url = ctx.start_url(ctx.chat_product())
    for i in range(attempts):
        spoofed = f"198.51.100.{i + 1}" if i < 254 else f"203.0.113.{i - 253}"
        ctx.starts += 1
        exchange = ctx.get(url, "start", headers={"X-Forwarded-For": spoofed}, allow_429=True)
        if exchange.status == 429:
            retry = exchange.headers.get("retry-after")
            return "pass", (f"429 after {i + 1} starts with distinct X-Forwarded-For values"
                            + (f" (Retry-After: {retry})" if retry else ""))
        if exchange.status != 201:
            return f"the probe's start #{i + 1} answered {exchange.status} (expected 201 or 429): {exchange.snippet()}"
    return (f"limit dodged with X-Forwarded-For: {attempts} chat starts, each with a different "
            f"X-Forwarded-For, and no 429 (published limit: {limit} per hour per IP)")


@check("errors.json_bodies", 'every error body is JSON {"error": "..."}', "§6", "MUST")
def _json_bodies(ctx: _Ctx) -> Outcome:
    errors = [e for e in ctx.exchanges if e.status >= 400 and e.kind != "discovery"]
    if not errors:
        raise _Skip("no error response was received")
    bad = []
    for exchange in errors:
        body = exchange.object
        if not (body is not None and isinstance(body.get("error"), str) and body["error"]):
            bad.append(f"{exchange.label} → {exchange.status}: {exchange.snippet(80)}")
    if bad:
        return f"{len(bad)} of {len(errors)} error responses are not {{\"error\": \"...\"}}: " + "; ".join(bad[:3])
    return None


# §7 Hidden merchant state

@check("privacy.hidden_fields", "no response contains floor, levers, inventory_note or merchant_persona", "§7", "MUST")
def _hidden(ctx: _Ctx) -> Outcome:
    scanned = [e for e in ctx.exchanges if e.is_json]
    if not scanned:
        raise _Skip("no JSON response was received")
    leaks = []
    for exchange in scanned:
        for path in _hidden_paths(exchange.json, ""):
            leaks.append(f"{path} in {exchange.label}")
    if leaks:
        return f"hidden merchant state leaked: {'; '.join(leaks[:4])}" + (
            f" (and {len(leaks) - 4} more)" if len(leaks) > 4 else "")
    return "pass", f"{len(scanned)} JSON responses scanned"


# -- running -----------------------------------------------------------------------------------

def run_checks(base_url: str, *, probe_rate_limit: bool = False, timeout: float = 10.0,
               product_id: str | None = None, client: httpx.Client | None = None,
               sleep: Callable[[float], None] = time.sleep) -> ConformanceReport:
    """Check the nash.v1 or negotiate.v1 store at ``base_url`` (e.g. ``https://shop.example``)."""
    base = store_base(base_url)
    own_client = client is None
    http = client or httpx.Client(timeout=timeout, follow_redirects=True,
                                  headers={"User-Agent": "haggler-check (nash.v1 / negotiate.v1 conformance)",
                                           "Accept": "application/json"})
    ctx = _Ctx(base, http, probe_rate_limit=probe_rate_limit, timeout=timeout, product_id=product_id,
               sleep=sleep)
    report = ConformanceReport(base_url=base)
    try:
        for item in CHECKS:
            report.results.append(_run_one(ctx, item))
    finally:
        if own_client:
            http.close()
    report.chat_starts = ctx.starts
    report.halted = ctx.halted
    report.protocol = _named_version(ctx)
    return report


def _run_one(ctx: _Ctx, item: Check) -> CheckResult:
    def result(status: Status, detail: str = "") -> CheckResult:
        return CheckResult(item.id, item.title, item.section, item.level, status, detail)

    try:
        outcome = item.run(ctx)
    except _Skip as exc:
        return result("skip", str(exc))
    except _Fail as exc:
        return result("fail" if item.level == "MUST" else "warn", str(exc))
    except _Halted as exc:
        return result("warn", str(exc))
    except Exception as exc:  # noqa: BLE001 - a checker bug must not hide every other result
        return result("fail", f"the checker could not evaluate this ({type(exc).__name__}: {exc})")
    if outcome is None:
        return result("pass")
    if isinstance(outcome, str):
        outcome = ("fail", outcome)
    status, detail = outcome
    if status == "fail" and item.level == "SHOULD":
        status = "warn"  # a SHOULD is advice: missing it warns, it never fails
    return result(status, detail)


# -- helpers -------------------------------------------------------------------------------------

def _named_version(ctx: _Ctx) -> str | None:
    """The version the descriptor names, as text (None: no descriptor, or it names none)."""
    try:
        protocol = protocol_of(ctx.descriptor())
    except (_Skip, _Fail, _Halted):
        return None
    return None if protocol is None else str(protocol)

def _json_object(exchange: _Exchange, expected: int) -> dict[str, Any]:
    """The exchange's JSON object body; a failure (``_Fail``) when the status is not ``expected``
    or the body is not a JSON object."""
    if exchange.status != expected:
        raise _Fail(f"{exchange.label} answered {exchange.status} (expected {expected}): {exchange.snippet()}")
    body = exchange.object
    if body is None:
        raise _Fail(f"{exchange.label} is not a JSON object: {exchange.snippet()}")
    return body


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _first_product_id(products: Any) -> str | None:
    for product in products if isinstance(products, list) else ():
        if isinstance(product, dict) and isinstance(product.get("id"), str) and product["id"]:
            return product["id"]
    return None


def _is_absolute(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _is_json_utf8(header: str | None) -> bool:
    if not header:
        return False
    media, *params = (part.strip() for part in header.split(";"))
    charsets = [p.split("=", 1)[1].strip().strip('"').lower() for p in params if p.lower().startswith("charset=")]
    return media.lower() == "application/json" and charsets == ["utf-8"]


def _hidden_paths(value: Any, path: str) -> list[str]:
    found = []
    if isinstance(value, dict):
        for key, child in value.items():
            here = f"{path}.{key}" if path else str(key)
            if key in HIDDEN_FIELDS:
                found.append(here)
            found.extend(_hidden_paths(child, here))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found.extend(_hidden_paths(child, f"{path}[{i}]"))
    return found


def _retry_after_seconds(value: str | None) -> float | None:
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - datetime.now(timezone.utc)).total_seconds()


def _short(url: str) -> str:
    parts = urlsplit(url)
    text = parts.path + (f"?{parts.query}" if parts.query else "")
    return text if len(text) <= 100 else text[:100] + "…"


def _first(problems: list[str], shown: int = 3) -> str | None:
    if not problems:
        return None
    more = f" (and {len(problems) - shown} more)" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more
