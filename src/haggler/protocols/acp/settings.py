"""What an operator sets for the ACP merchant."""

from __future__ import annotations

from dataclasses import dataclass

#: The ACP release this merchant implements; ``API-Version`` must name it.
ACP_VERSION = "2026-04-17"
#: Every release this merchant accepts in ``API-Version``, oldest first (discovery's
#: ``supported_versions``): only the one it implements, since earlier ones have other shapes.
SUPPORTED_VERSIONS = (ACP_VERSION,)
#: The shortest key accepted: a Bearer key is all that stands between the internet and checkout.
SHORTEST_KEY = 16


@dataclass(frozen=True)
class AcpSettings:
    #: The Bearer key agents present (``HAGGLER_ACP_API_KEY``). None: the store does not serve ACP
    #: (its routes and ``/.well-known/acp.json`` answer 404, which discovery defines as "the
    #: seller does not support ACP").
    api_key: str | None = None

    @property
    def enabled(self) -> bool:
        return self.api_key is not None

    def __post_init__(self) -> None:
        if self.api_key is not None and (len(self.api_key) < SHORTEST_KEY or self.api_key != self.api_key.strip()):
            raise ValueError(f"--acp-api-key (HAGGLER_ACP_API_KEY) must be at least {SHORTEST_KEY} characters, "
                             "without surrounding spaces")
