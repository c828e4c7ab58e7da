"""What a Matrix event says to the market, and what the market bot says back (docs/market-matrix.md).

A market message travels as the content of an ``m.room.message`` event in one of two forms, both
read the same way:

* **structured**: ``{"msgtype": "org.haggler.market", "body": "<a line for people>",
  "org.haggler.market": "<the message as JSON text>"}``. Clients that do not know the msgtype
  show ``body``; the bot reads only what is under :data:`CONTENT_KEY`, never the ``body``. The
  message travels as JSON *text* because Matrix's canonical JSON has no fractional numbers (a
  homeserver refuses an event with ``170.5`` in it) and market amounts have cents; a JSON object
  there is read too, for messages without one.
* **JSON body**: an ordinary ``m.text`` (or ``m.notice``) whose whole ``body`` is a JSON object.

The bot's own payloads (answers, inbox deliveries, public views, deals) are JSON text under
their keys for the same reason (:func:`carry`, :func:`uncarry`).

Anything else is text: a ``SELLING:``/``BUYING:`` line is a plain-text classified ad (the spec's
backward compatibility, read by the language layer and never bound by a mandate), the rest is
chat the bot leaves alone; notices are never read as text (they are other bots' voices). Edits (``m.replace``) are not read: a message acts once, as it was
first sent, so an edit of an offer cannot change what was offered.

The bot's own answers are ``m.notice`` events (so bots do not answer bots) carrying the market's
answer under :data:`ANSWER_KEY`: the HTTP status the API would have given and the API's own JSON
body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

#: The msgtype of a structured market message, and the key its message sits under.
MSGTYPE = "org.haggler.market"
CONTENT_KEY = "org.haggler.market"
#: Where a bot answer carries the market's answer: ``{"status": <the API's HTTP status>, "body":
#: <the API's JSON body>}``.
ANSWER_KEY = "org.haggler.market.answer"
#: Where a relayed inbox delivery sits in a notice to an agent (``{"cursor", "kind", "body"}``).
INBOX_KEY = "org.haggler.market.inbox"
#: The largest market message the bot reads (a listing is about 2 KiB): a bigger one is refused
#: with a reply rather than parsed. Half the homeserver's own 64 KiB cap on a whole event, so the
#: limit is the market's to enforce and explain, not the homeserver's to hit first.
MAX_MESSAGE_BYTES = 32 * 1024
#: Nesting past this is refused before parsing goes deep (the API's own limit).
MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class Structured:
    """A market message (a JSON object); its schema and signature are the market's to check."""
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text from a person or a plain-text agent: a ``SELLING:``/``BUYING:`` classified ad
    if the language layer reads one in it, chat otherwise."""
    text: str


@dataclass(frozen=True, slots=True)
class Malformed:
    """Meant for the market but unreadable: the reply names why, like the API's 400."""
    reason: str


@dataclass(frozen=True, slots=True)
class Edit:
    """An edit of an earlier event (``m.replace``): not read, answered once."""
    target: str


Reading = Structured | Text | Malformed | Edit | None


def read_content(content: Mapping[str, Any]) -> Reading:
    """What a message event's content says to the market; None for chat and for what is not a
    message (the bot ignores both)."""
    relates = content.get("m.relates_to")
    if isinstance(relates, Mapping) and relates.get("rel_type") == "m.replace":
        target = relates.get("event_id")
        return Edit(target if isinstance(target, str) else "")
    msgtype = content.get("msgtype")
    if msgtype == MSGTYPE:
        carried = content.get(CONTENT_KEY)
        if isinstance(carried, str):
            try:
                carried = _loads(carried)
            except ValueError as exc:
                return Malformed(f"{CONTENT_KEY} is not valid JSON: {exc}")
        return _message(carried, f"{CONTENT_KEY} must be a JSON object (or its JSON text): the market message")
    body = content.get("body")
    if msgtype not in ("m.text", "m.notice") or not isinstance(body, str):
        return None
    text = _without_reply_fallback(body).strip()
    if text.startswith("{"):
        try:
            parsed = _loads(text)
        except ValueError as exc:
            return Malformed(f"the body is not valid JSON: {exc}")
        return _message(parsed, "the body must be a JSON object: the market message")
    return Text(text) if msgtype == "m.text" and text else None


def _message(value: object, wrong_shape: str) -> Structured | Malformed:
    if not isinstance(value, dict):
        return Malformed(wrong_shape)
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > MAX_MESSAGE_BYTES:
        return Malformed(f"the message is {size} bytes; the market reads at most {MAX_MESSAGE_BYTES}")
    if _depth(value) > MAX_DEPTH:
        return Malformed(f"the message nests deeper than {MAX_DEPTH} levels")
    return Structured(value)


def _loads(text: str) -> Any:
    if len(text.encode()) > MAX_MESSAGE_BYTES:
        raise ValueError(f"longer than {MAX_MESSAGE_BYTES} bytes")
    return json.loads(text, parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: object, level: int = 1) -> int:
    if level > MAX_DEPTH:
        return level
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return max((_depth(child, level + 1) for child in children), default=level)


def _without_reply_fallback(body: str) -> str:
    """A reply's body quotes what it answers on leading ``> `` lines (the Matrix reply fallback);
    only the text after them is the sender's."""
    lines = body.splitlines()
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines)


def market_content(message: Mapping[str, Any], body: str) -> dict[str, Any]:
    """A structured market message as event content, with ``body`` for people."""
    return {"msgtype": MSGTYPE, "body": body, CONTENT_KEY: carry(message)}


def answer_content(status: int, answer: Mapping[str, Any], body: str, *,
                   about: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The bot's answer to event ``about`` (its ``event_id`` and ``content``): a notice replying to
    it, see :func:`reply_to`."""
    return notice(body, about=about, **{ANSWER_KEY: carry({"status": status, "body": dict(answer)})})


def notice(body: str, *, about: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A notice from the bot, replying to event ``about`` when given."""
    content: dict[str, Any] = {"msgtype": "m.notice", "body": body, **extra}
    if about is not None:
        content["m.relates_to"] = reply_to(about["event_id"], about.get("content") or {})
    return content


def reply_to(event_id: str, content: Mapping[str, Any]) -> dict[str, Any]:
    """How an answer relates to the event it answers: in the event's thread (in a busy room the
    answer sits under what it answers: a message that is in no thread opens one), or, for an
    event that already relates to another in some other way (an edit, a plain reply), as a plain
    reply: the homeserver refuses a thread rooted at such an event."""
    thread = thread_of(content)
    if thread is None and "m.relates_to" in content:
        return {"m.in_reply_to": {"event_id": event_id}}
    return {"rel_type": "m.thread", "event_id": thread or event_id, "is_falling_back": True,
            "m.in_reply_to": {"event_id": event_id}}


def carry(value: Any) -> str:
    """``value`` as the JSON text a Matrix event can hold whatever numbers it has."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def uncarry(raw: object) -> Any:
    """What :func:`carry` made, read back (an object given as is is taken as is); None for
    anything unreadable: the reader treats it as absent."""
    if isinstance(raw, str):
        try:
            return _loads(raw)
        except ValueError:
            return None
    return raw


def thread_of(content: Mapping[str, Any]) -> str | None:
    """The thread root an event belongs to, if it is in a thread."""
    relates = content.get("m.relates_to")
    if isinstance(relates, Mapping) and relates.get("rel_type") == "m.thread":
        root = relates.get("event_id")
        return root if isinstance(root, str) else None
    return None
