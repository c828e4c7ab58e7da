"""A hash chain over JSON events: tamper evidence that anyone can check without our code.

The rules are exact so that a verifier in any language reproduces every hash:

* an event is a JSON object; its hash is the SHA-256 hex of its RFC 8785 canonical JSON,
  taken over the event exactly as published (``prev_hash`` included);
* ``prev_hash`` is the previous event's hash, ``""`` for the first event;
* the chain's root is the SHA-256 hex of the event hashes (hex strings) concatenated in
  order; with no events it is the SHA-256 of the empty string.

Signing the root (``trust.signatures``) then vouches for every event and their order. The
checks here go further than "valid or not": each ``prev_hash`` is a witness of the previous
event's hash at signing time, so a broken chain can usually say which event was altered,
removed or moved. Events are named in messages by position and, when they have one, by
their ``event_id``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from haggler.trust.canonical import canonical_json


def event_hash(event: Mapping[str, Any]) -> str:
    """SHA-256 hex of the event's RFC 8785 canonical JSON, ``prev_hash`` included."""
    return hashlib.sha256(canonical_json(event)).hexdigest()


def chain_events(raw_events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the events, in order, each with ``prev_hash`` set to the previous one's hash."""
    return chain_with_hashes(raw_events)[0]


def chain_with_hashes(raw_events: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """:func:`chain_events`, and the chained events' hashes, which chaining works out anyway:
    the root (:func:`root_of`) needs them again, and hashing an event is most of the cost."""
    chained: list[dict[str, Any]] = []
    hashes: list[str] = []
    prev = ""
    for raw in raw_events:
        event = {**raw, "prev_hash": prev}
        prev = event_hash(event)
        chained.append(event)
        hashes.append(prev)
    return chained, hashes


def root_hash(events: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 hex of the events' hashes concatenated (as hex ASCII) in order."""
    return root_of(event_hash(event) for event in events)


def root_of(hashes: Iterable[str]) -> str:
    """The root over event hashes already computed."""
    return hashlib.sha256("".join(hashes).encode("ascii")).hexdigest()


def describe_event(events: Sequence[Mapping[str, Any]], index: int) -> str:
    """How reports name an event: its position and its ``event_id``."""
    return f"event {index} (id {events[index].get('event_id')!r})"


def link_problems(events: Sequence[Mapping[str, Any]], hashes: Sequence[str]) -> list[str]:
    """One message per ``prev_hash`` that does not link to the event before it, saying what that suggests.

    ``hashes`` are the events' own hashes, in order; an empty list means the chain is intact.
    """
    where = {digest: index for index, digest in enumerate(hashes)}
    problems = []
    for index, event in enumerate(events):
        found = event["prev_hash"]
        expected = hashes[index - 1] if index else ""
        if found == expected:
            continue
        this = describe_event(events, index)
        if index == 0:
            message = f"{this} should start the chain with prev_hash \"\" but has {found!r}"
        else:
            message = (
                f"{this} prev_hash does not match the hash of {describe_event(events, index - 1)}: "
                f"expected {expected}, found {found!r}"
            )
        if found == "":
            message += "; it claims to be the first event, so the events look reordered"
        elif found in where:
            message += f"; it matches the hash of {describe_event(events, where[found])}, so the events look reordered"
        elif index == 0:
            message += "; it matches no event here, so events before it were removed"
        else:
            message += (
                f"; it matches no event here, so {describe_event(events, index - 1)} was altered"
                " or events between the two were removed"
            )
        problems.append(message)
    return problems


def explain_root_mismatch(
    events: Sequence[Mapping[str, Any]], hashes: list[str], stated_root: str, signed: Callable[[str], bool]
) -> str:
    """Name what changed when the events no longer hash to ``stated_root``.

    ``signed(root)`` says whether the chain's signature verifies over ``root`` (False when
    there is no usable key). Each prev_hash records the previous event's hash at signing
    time, so a chain rebuilt from those records that reproduces the signed root pins down
    the altered event, the removed event, or the signed order.
    """
    if signed(root_of(hashes)):
        return "the signature is valid for the events' hash, so root_hash itself was altered"

    # recorded[i] is event i's hash as event i+1 recorded it; the last has no witness.
    recorded = [event["prev_hash"] for event in events[1:]] + hashes[-1:]
    mismatched = [i for i in range(len(events)) if recorded[i] != hashes[i]]
    # One altered event at a time first: an altered prev_hash field breaks two
    # links, and only the genuine record of the two restores the signed root.
    for positions in [[i] for i in mismatched] + [mismatched]:
        restored = [recorded[i] if i in positions else digest for i, digest in enumerate(hashes)]
        if positions and root_of(restored) == stated_root:
            return "; ".join(
                f"{describe_event(events, i)} was altered after signing (its content hashes to {hashes[i]},"
                f" the chain recorded {recorded[i]})"
                for i in positions
            )

    order = _signed_order(events, hashes)
    if order is not None and order != list(range(len(events))) and root_of(hashes[i] for i in order) == stated_root:
        ids = ", ".join(repr(events[i]["event_id"]) for i in order)
        return f"the events are genuine but were reordered; the signed order is {ids}"

    for index, event in enumerate(events):
        missing = event["prev_hash"]
        if missing and missing not in hashes:
            restored = hashes[:index] + [missing] + hashes[index:]
            if root_of(restored) == stated_root:
                return f"an event with hash {missing} was removed just before {describe_event(events, index)}"

    if not events:
        return "the artifact has no events, so its events were removed or root_hash was altered"
    if not mismatched:
        last = f"the last event, {describe_event(events, len(events) - 1)},"
        if signed(stated_root):
            return (
                f"the links are intact and root_hash is validly signed, so {last} was altered"
                " or events after it were removed"
            )
        return f"the links are intact, so {last} was altered, events after it were removed, or root_hash was altered"
    return "events were altered, removed, inserted or reordered (see the broken links above)"


def _signed_order(events: Sequence[Mapping[str, Any]], hashes: Sequence[str]) -> list[int] | None:
    """Follow prev_hash links from the event with prev_hash "" to recover the order they record."""
    successor = {event["prev_hash"]: index for index, event in enumerate(events)}
    order: list[int] = []
    link = ""
    while link in successor and len(order) < len(events):
        order.append(successor[link])
        link = hashes[order[-1]]
    return order if sorted(order) == list(range(len(events))) else None
