"""negotiate.v1's operator settings: the limits a store publishes and enforces (kept apart from the service so that
configuration imports nothing heavy)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class StoreLimits:
    """The ``limits`` block of the descriptor; every field is enforced. ``limit_loopback`` is not
    published: it only says whether clients on this machine count too (the limit holds for every
    other client either way, so the published figure stays true)."""

    max_chat_starts_per_hour_per_ip: int = 8
    max_messages_per_chat: int = 30
    session_idle_ttl_seconds: int = 3600
    max_message_length_chars: int = 2000
    #: Whether a client on this machine (loopback, see ``server/clientip.py``) is held to the
    #: chat-start limit too. Off by default: a developer running ``haggler check`` or a demo
    #: against their own store would otherwise be locked out after a few runs, for an hour,
    #: across restarts (the starts are kept in the database).
    limit_loopback: bool = False

    def __post_init__(self) -> None:
        for name in ("max_chat_starts_per_hour_per_ip", "max_messages_per_chat",
                     "session_idle_ttl_seconds", "max_message_length_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


#: How the store's merchant is run: ``deterministic`` (the default, no model), ``llm-voice``
#: (the deterministic merchant decides, a model words the replies) or ``llm`` (a model proposes
#: the moves within the guards); see agents/llm_merchant.py.
MERCHANT_MODES = ("deterministic", "llm-voice", "llm")


@dataclass(frozen=True, slots=True)
class MerchantSkill:
    """A merchant skill file in the reference store's format (``SKILL.md``: a front matter with
    ``name`` and ``description``, then the instructions): the ``llm`` mode's instructions, and
    the ``merchant_skill`` the descriptor publishes (name and description only)."""

    name: str
    description: str
    instructions: str


@dataclass(frozen=True, slots=True)
class MerchantSettings:
    """How the store's merchant works and guards what it keeps hidden (none of it is published)."""

    #: The merchant sells no lower than its floor plus a secret share of the room between floor
    #: and list price, up to this fraction of it, drawn once per product from the store's secret:
    #: what it accepts and refuses then reveals that price, never the floor. 0 switches it off
    #: (the merchant then takes anything at or above the floor, and a patient shopper can find it).
    floor_margin: float = 0.05
    mode: str = "deterministic"
    #: Tokens one chat may spend on the model before the deterministic merchant takes over
    #: (None: no limit).
    token_budget: int | None = 40_000
    skill: MerchantSkill | None = None

    def __post_init__(self) -> None:
        if self.mode not in MERCHANT_MODES:
            raise ValueError(f"unknown merchant mode {self.mode!r}: use one of {', '.join(MERCHANT_MODES)}")
        if self.token_budget is not None and self.token_budget < 1:
            raise ValueError(f"the merchant's token budget must be at least 1, got {self.token_budget}")
        if not 0 <= self.floor_margin <= 0.5:
            raise ValueError(f"floor_margin must be between 0 and 0.5 (a share of list price minus floor), "
                             f"got {self.floor_margin}")


def load_skill(path: Path) -> MerchantSkill:
    """A merchant skill from ``path``: a ``SKILL.md`` (or a directory holding one) in the
    reference store's format, or any text file (then named after the file). ValueError names
    what is wrong."""
    file = path / "SKILL.md" if path.is_dir() else path
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the merchant skill {file}: {exc}") from None
    fields: dict[str, str] = {}
    body = text
    match = _FRONT_MATTER.match(text)
    if match:
        body = text[match.end():]
        for line in match.group(1).splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() in ("name", "description"):
                fields[key.strip()] = value.strip().strip("\"'")
    if not body.strip():
        raise ValueError(f"the merchant skill {file} has no instructions")
    name = fields.get("name") or file.stem
    return MerchantSkill(name, fields.get("description", ""), body.strip())


_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.DOTALL)
