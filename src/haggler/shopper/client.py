"""A client for any nash.v1 or negotiate.v1 store, sync and async.

nash.v1 is negotiate.v1 under its successor name: the client looks for ``/nash.json`` and
``/.well-known/nash.json`` first, then the negotiate.v1 files, as pier39's connector does, and
reads either version's key. The wire after discovery is the same.

Every flow (discover, start, say, history, resume) is written once, as a sans-I/O generator
that yields instructions — fetch this URL, sleep this long — and receives the results. The
sync and async clients are small drivers that carry those instructions out, so the two APIs
cannot drift apart.

    with NegotiateClient() as client:
        store = client.discover("shop.example.com")
        chat = client.start(store, store.products[0].id)
        reply = client.say(store, chat.next_url, "Would you take $450?")
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Generator, Iterator, TypeVar
from urllib.parse import quote, urlsplit

import httpx

from haggler import __version__
from haggler.money import cents_or_none
from haggler.shopper.errors import (
    BadResponse,
    ChatClosed,
    MessageTooLong,
    NotFound,
    NotNegotiable,
    RateLimited,
    ShopperError,
    StoreError,
    StoreUnavailable,
    UnsupportedProtocol,
)
from haggler.shopper.models import (
    ChatStarted,
    Endpoints,
    History,
    HistoryEntry,
    Limits,
    Listing,
    Reply,
    StoreInfo,
    parse_deal,
    parse_offer,
)
from haggler.shopper.pinned import pinned_async_client, pinned_client
from haggler.shopper.urls import URLPolicy

PROTOCOL = "negotiate.v1"
NASH_PROTOCOL = "nash.v1"
#: The versions this client speaks, and the keys a descriptor may name its version under. Any
#: key may carry any of the values (pier39's directory asks stores for
#: ``negotiate_protocol: "nash.v1"``); ``nash_protocol`` is read first when both are present.
PROTOCOLS = (NASH_PROTOCOL, PROTOCOL)
PROTOCOL_KEYS = ("nash_protocol", "negotiate_protocol")
#: Where a descriptor is looked for under a store's base, in this order (§4 step 1, nash first).
DISCOVERY_FILES = ("/nash.json", "/.well-known/nash.json", "/negotiate.json", "/.well-known/negotiate.json")
PLACEHOLDER = "{url_encoded_message}"
T = TypeVar("T")


# -- instructions the flows yield -------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Fetch:
    url: str


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: httpx.Headers
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise BadResponse(f"the store answered {self.status} with a body that is not JSON", status=self.status) from exc


Flow = Generator["Fetch | Sleep", "Response | None", T]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How 429s are handled: wait as the store's ``Retry-After`` says, up to ``max_wait``
    seconds each time and ``max_retries`` times, then raise :class:`RateLimited`."""

    max_retries: int = 3
    max_wait: float = 30.0
    default_wait: float = 1.0


# -- pure helpers ---------------------------------------------------------------------------

_THIS_MACHINE = ("localhost", "127.0.0.1", "[::1]")


def _with_scheme(target: str) -> str:
    """A bare domain gets https (http for this machine)."""
    target = target.strip()
    if "://" in target:
        return target
    host = target.split("/", 1)[0].split(":", 1)[0]
    return f"{'http' if host in _THIS_MACHINE else 'https'}://{target}"


def store_base(target: str) -> str:
    """A store's base URL from what people type: a bare domain, a URL, or its descriptor's URL."""
    parts = urlsplit(_with_scheme(target))
    if not parts.netloc:
        raise NotNegotiable(f"not a store address: {target!r}")
    path = parts.path.rstrip("/")
    # The longest match: "/.well-known/nash.json" also ends with "/nash.json".
    suffix = max((s for s in DISCOVERY_FILES if path.endswith(s)), key=len, default="")
    path = path[: len(path) - len(suffix)]
    return f"{parts.scheme}://{parts.netloc}{path.rstrip('/')}"


def discovery_urls(target: str) -> list[str]:
    """Where to look for a store's descriptor, given a bare domain or a URL (§4 step 1): a
    descriptor's own URL as given, else each of :data:`DISCOVERY_FILES` under the store's base."""
    url = _with_scheme(target)
    if urlsplit(url).netloc and urlsplit(url).path.endswith(".json"):
        return [url]
    base = store_base(url)
    return [base + suffix for suffix in DISCOVERY_FILES]


def fill_template(template: str, **values: str) -> str:
    """Substitute URL-template placeholders, percent-encoding each value."""
    url = template
    for key, value in values.items():
        url = url.replace("{" + key + "}", quote(value, safe=""))
    return url


def say_url(next_url: str, message: str) -> str:
    if PLACEHOLDER not in next_url:
        raise BadResponse(f"the store's next URL has no {PLACEHOLDER} placeholder: {next_url}")
    return next_url.replace(PLACEHOLDER, quote(message, safe=""))


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def protocol_of(doc: dict[str, Any]) -> Any:
    """The version a descriptor names: ``nash_protocol``, else ``negotiate_protocol`` (None if
    neither is there). Not checked here: see :func:`parse_descriptor`."""
    return next((doc[key] for key in PROTOCOL_KEYS if doc.get(key)), None)


def parse_descriptor(doc: Any, discovery_url: str) -> StoreInfo:
    """Parse and check a descriptor. Refuses versions other than nash.v1 and negotiate.v1 (§8)."""
    if not isinstance(doc, dict):
        raise BadResponse(f"{discovery_url} is not a JSON object")
    protocol = protocol_of(doc)
    if protocol not in PROTOCOLS:
        raise UnsupportedProtocol(protocol)
    store = doc.get("store") if isinstance(doc.get("store"), dict) else {}
    endpoints = doc.get("endpoints") if isinstance(doc.get("endpoints"), dict) else {}

    def endpoint(key: str, field: str) -> str | None:
        entry = endpoints.get(key)
        return _str_or_none(entry.get(field)) if isinstance(entry, dict) else None

    start, send, history = (endpoint("start_chat", "url_template"), endpoint("send_message", "url_template"),
                            endpoint("read_history", "url_template"))
    if not (start and send and history):
        raise BadResponse(f"{discovery_url}: endpoints must include start_chat, send_message and read_history")
    limits_raw = doc.get("limits") if isinstance(doc.get("limits"), dict) else {}
    limits = Limits(
        max_chat_starts_per_hour_per_ip=_int_or_none(limits_raw.get("max_chat_starts_per_hour_per_ip")),
        max_messages_per_chat=_int_or_none(limits_raw.get("max_messages_per_chat")),
        session_idle_ttl_seconds=_int_or_none(limits_raw.get("session_idle_ttl_seconds")),
        max_message_length_chars=_int_or_none(limits_raw.get("max_message_length_chars")),
        currency=_str_or_none(limits_raw.get("currency")),
    )
    currency = limits.currency or "USD"
    return StoreInfo(
        discovery_url=discovery_url,
        protocol=protocol,
        name=str(store.get("name", "")),
        rep_name=_str_or_none(store.get("rep_name")),
        policy=_str_or_none(store.get("policy")),
        endpoints=Endpoints(start, send, history, endpoint("catalog", "url")),
        products=parse_listings(doc.get("products"), currency),
        limits=limits,
        raw=doc,
    )


def parse_listings(raw: Any, currency: str) -> tuple[Listing, ...]:
    listings = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        listings.append(Listing(
            id=item["id"], name=str(item.get("name", item["id"])),
            list_price_cents=cents_or_none(item.get("list_price")),
            currency=str(item.get("currency") or currency),
            subtitle=str(item.get("subtitle") or ""),
            kind=_str_or_none(item.get("kind")),
            page_url=_str_or_none(item.get("page_url")),
            start_chat_url=_str_or_none(item.get("start_chat_url")),
            description=_str_or_none(item.get("description")),
        ))
    return tuple(listings)


def _currency(store: StoreInfo) -> str:
    return store.limits.currency or "USD"


def _require_str(body: dict[str, Any], key: str, what: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise BadResponse(f"{what}: the store's answer has no string '{key}'")
    return value


def parse_reply(body: Any, currency: str) -> Reply:
    if not isinstance(body, dict):
        raise BadResponse("say: the store's answer is not a JSON object")
    closed = body.get("closed")
    if not isinstance(closed, bool):
        raise BadResponse("say: the store's answer has no boolean 'closed'")
    next_url = body.get("next")
    return Reply(message=_require_str(body, "message", "say"), closed=closed,
                 next_url=next_url if isinstance(next_url, str) and not closed else None,
                 offer=parse_offer(body.get("offer"), currency), deal=parse_deal(body.get("deal"), currency),
                 checkout_url=_str_or_none(body.get("checkout_url")) if closed else None)


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def error_from(response: Response, what: str) -> ShopperError:
    store_error = None
    try:
        body = json.loads(response.body)
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            store_error = body["error"]
    except ValueError:
        pass
    detail = f": {store_error}" if store_error else ""
    message = f"{what} failed with HTTP {response.status}{detail}"
    if response.status == 404:
        return NotFound(message, status=404, store_error=store_error)
    if response.status == 400 and store_error and "closed" in store_error.lower():
        return ChatClosed(message, status=400, store_error=store_error)
    if response.status == 429:
        return RateLimited(message, retry_after=retry_after_seconds(response.headers.get("retry-after")),
                           store_error=store_error)
    return StoreError(message, status=response.status, store_error=store_error)


# -- flows --------------------------------------------------------------------------------------

def fetch(url: str, what: str, retry: RetryPolicy, *, ok: tuple[int, ...] = (200,)) -> Flow[Response]:
    """GET ``url``, waiting out 429s as the store asks; raise typed errors for other failures."""
    for attempt in range(retry.max_retries + 1):
        response = yield Fetch(url)
        assert response is not None
        if response.status in ok:
            return response
        error = error_from(response, what)
        if not isinstance(error, RateLimited) or attempt == retry.max_retries:
            raise error
        wait = error.retry_after if error.retry_after is not None else retry.default_wait
        if wait > retry.max_wait:
            raise error
        yield Sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


def discover_flow(target: str, retry: RetryPolicy) -> Flow[StoreInfo]:
    """The first of :func:`discovery_urls` that answers with JSON is the descriptor. A failure or
    a body that is not JSON (a site's catch-all page at ``/nash.json``) moves on to the next
    URL; a JSON document decides, and an unknown version in it is refused, not skipped."""
    problems = []
    for url in discovery_urls(target):
        try:
            response = yield from fetch(url, "discovery", retry)
            doc = response.json()
        except (StoreError, StoreUnavailable, BadResponse) as exc:
            problems.append(f"{url}: {exc.message}")
            continue
        return parse_descriptor(doc, url)
    raise NotNegotiable(f"no nash.v1 or negotiate.v1 descriptor found ({'; '.join(problems)})")


def products_flow(store: StoreInfo, retry: RetryPolicy) -> Flow[tuple[Listing, ...]]:
    if not store.endpoints.catalog:
        return store.products
    body = (yield from fetch(store.endpoints.catalog, "catalog", retry)).json()
    raw = body.get("products") if isinstance(body, dict) else body
    return parse_listings(raw, _currency(store))


def start_flow(store: StoreInfo, product_id: str, retry: RetryPolicy) -> Flow[ChatStarted]:
    url = fill_template(store.endpoints.start_chat, product_id=product_id)
    body = (yield from fetch(url, "start chat", retry, ok=(200, 201))).json()
    if not isinstance(body, dict):
        raise BadResponse("start chat: the store's answer is not a JSON object")
    return ChatStarted(session_id=_require_str(body, "session_id", "start chat"),
                       greeting=_require_str(body, "greeting", "start chat"),
                       next_url=_require_str(body, "next", "start chat"),
                       offer=parse_offer(body.get("offer"), _currency(store)))


def history_flow(store: StoreInfo, session_id: str, retry: RetryPolicy) -> Flow[History]:
    url = fill_template(store.endpoints.read_history, session_id=session_id)
    body = (yield from fetch(url, "read history", retry)).json()
    if not isinstance(body, dict) or not isinstance(body.get("history"), list):
        raise BadResponse("read history: the store's answer has no 'history' list")
    entries = tuple(HistoryEntry(str(e.get("speaker", "")), str(e.get("message", "")))
                    for e in body["history"] if isinstance(e, dict))
    closed = body.get("closed") if isinstance(body.get("closed"), bool) else None
    return History(session_id, entries, closed, parse_deal(body.get("deal"), _currency(store)))


def check_length(store: StoreInfo, message: str) -> None:
    limit = store.limits.max_message_length_chars
    if not message:
        raise MessageTooLong("a turn cannot be empty")
    if limit is not None and len(message) > limit:
        raise MessageTooLong(f"message is {len(message)} characters; the store accepts at most {limit}")


def say_flow(store: StoreInfo, next_url: str, message: str, retry: RetryPolicy, *, recover: bool) -> Flow[Reply]:
    """Send one turn. If the connection is lost, read the history to learn whether the turn
    arrived: if it did, answer with the merchant's recorded reply; if not, send it once more."""
    check_length(store, message)
    url = say_url(next_url, message)
    try:
        response = yield from fetch(url, "say", retry)
    except StoreUnavailable:
        if not recover:
            raise
        session_id = session_from_next(store, next_url)
        history = yield from history_flow(store, session_id, retry)
        recorded = recorded_reply(history, message)
        if recorded is not None:
            return Reply(recorded, closed=bool(history.closed), next_url=None if history.closed else next_url,
                         deal=history.deal)
        response = yield from fetch(url, "say", retry)
    return parse_reply(response.json(), _currency(store))


def session_from_next(store: StoreInfo, next_url: str) -> str:
    """Recover the session id from a `next` URL by matching it against the send_message template."""
    template = store.endpoints.send_message
    prefix, _, rest = template.partition("{session_id}")
    suffix = rest.split("{url_encoded_message}")[0]
    if next_url.startswith(prefix):
        tail = next_url[len(prefix):]
        end = tail.find(suffix) if suffix else len(tail)
        if end > 0:
            return tail[:end]
    raise BadResponse(f"cannot find the session id in {next_url}")


def recorded_reply(history: History, message: str) -> str | None:
    """The merchant's reply to ``message`` if it is the last shopper turn in ``history``."""
    entries = history.entries
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].speaker == "shopper":
            if entries[i].message == message and i + 1 < len(entries):
                return entries[i + 1].message
            return None
    return None


# -- drivers ------------------------------------------------------------------------------------

def advance(flow: Flow[T], result: Response | None = None, error: ShopperError | None = None) -> tuple[bool, Any]:
    """Move a flow one step: ``(True, value)`` when it finished, else ``(False, instruction)``."""
    try:
        return False, (flow.throw(error) if error is not None else flow.send(result))
    except StopIteration as stop:
        return True, stop.value


@contextmanager
def transport_errors(url: str, timeout: float) -> Iterator[None]:
    """httpx's transport failures as :class:`StoreUnavailable`."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise StoreUnavailable(f"timed out after {timeout:g}s: {url}") from exc
    except httpx.HTTPError as exc:
        raise StoreUnavailable(f"cannot reach the store: {exc}") from exc


def _headers() -> dict[str, str]:
    return {"User-Agent": f"haggler-shopper/{__version__}", "Accept": "application/json"}


class _Base:
    def __init__(self, *, timeout: float, retry: RetryPolicy | None, url_policy: URLPolicy | None,
                 transport: object | None) -> None:
        """With a ``url_policy``, connections go only to the addresses it judged
        (``shopper/pinned.py``); a transport of the caller's would bypass that, so not both."""
        if url_policy is not None and transport is not None:
            raise ValueError("a client with a URL policy connects through its own transport; pass one or the other")
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.url_policy = url_policy

    def _check(self, url: str) -> None:
        if self.url_policy is not None:
            self.url_policy.check(url)


class NegotiateClient(_Base):
    """The synchronous client."""

    def __init__(self, *, timeout: float = 15.0, retry: RetryPolicy | None = None, url_policy: URLPolicy | None = None,
                 transport: httpx.BaseTransport | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(timeout=timeout, retry=retry, url_policy=url_policy, transport=transport)
        self._http = pinned_client(url_policy, timeout=timeout, headers=_headers()) if url_policy is not None else \
            httpx.Client(timeout=timeout, headers=_headers(), transport=transport, follow_redirects=False)
        self._sleep = sleep

    def _run(self, flow: Flow[T]) -> T:
        done, step = advance(flow)
        while not done:
            try:
                result = self._carry_out(step)
            except ShopperError as exc:
                done, step = advance(flow, error=exc)
            else:
                done, step = advance(flow, result)
        return step

    def _carry_out(self, instruction: Fetch | Sleep) -> Response | None:
        if isinstance(instruction, Sleep):
            self._sleep(instruction.seconds)
            return None
        self._check(instruction.url)
        with transport_errors(instruction.url, self.timeout):
            r = self._http.get(instruction.url)
        return Response(r.status_code, r.headers, r.content)

    def discover(self, target: str) -> StoreInfo:
        return self._run(discover_flow(target, self.retry))

    def products(self, store: StoreInfo, *, live: bool = False) -> tuple[Listing, ...]:
        return self._run(products_flow(store, self.retry)) if live else store.products

    def start(self, store: StoreInfo, product_id: str) -> ChatStarted:
        return self._run(start_flow(store, product_id, self.retry))

    def say(self, store: StoreInfo, next_url: str, message: str, *, recover: bool = True) -> Reply:
        return self._run(say_flow(store, next_url, message, self.retry, recover=recover))

    def history(self, store: StoreInfo, session_id: str) -> History:
        return self._run(history_flow(store, session_id, self.retry))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "NegotiateClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncNegotiateClient(_Base):
    """The asynchronous client: the same flows, awaited."""

    def __init__(self, *, timeout: float = 15.0, retry: RetryPolicy | None = None, url_policy: URLPolicy | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(timeout=timeout, retry=retry, url_policy=url_policy, transport=transport)
        self._http = pinned_async_client(url_policy, timeout=timeout, headers=_headers()) if url_policy is not None else \
            httpx.AsyncClient(timeout=timeout, headers=_headers(), transport=transport, follow_redirects=False)

    async def _run(self, flow: Flow[T]) -> T:
        done, step = advance(flow)
        while not done:
            try:
                result = await self._carry_out(step)
            except ShopperError as exc:
                done, step = advance(flow, error=exc)
            else:
                done, step = advance(flow, result)
        return step

    async def _carry_out(self, instruction: Fetch | Sleep) -> Response | None:
        if isinstance(instruction, Sleep):
            await asyncio.sleep(instruction.seconds)
            return None
        self._check(instruction.url)
        with transport_errors(instruction.url, self.timeout):
            r = await self._http.get(instruction.url)
        return Response(r.status_code, r.headers, r.content)

    async def discover(self, target: str) -> StoreInfo:
        return await self._run(discover_flow(target, self.retry))

    async def products(self, store: StoreInfo, *, live: bool = False) -> tuple[Listing, ...]:
        return await self._run(products_flow(store, self.retry)) if live else store.products

    async def start(self, store: StoreInfo, product_id: str) -> ChatStarted:
        return await self._run(start_flow(store, product_id, self.retry))

    async def say(self, store: StoreInfo, next_url: str, message: str, *, recover: bool = True) -> Reply:
        return await self._run(say_flow(store, next_url, message, self.retry, recover=recover))

    async def history(self, store: StoreInfo, session_id: str) -> History:
        return await self._run(history_flow(store, session_id, self.retry))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncNegotiateClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
