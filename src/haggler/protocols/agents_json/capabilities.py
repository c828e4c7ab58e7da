"""The store's agents.json capabilities, declared once: the manifest publishes these
declarations and the API enforces them, so what an agent reads is exactly what it gets.

Each :class:`Param` carries the descriptor fields agents.json publishes (type, required,
default, enum, description) plus bounds (``minimum``/``maximum``) that the schema has no field
for: they are enforced here and stated in the published description instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from haggler.errors import InvalidInput

__all__ = [
    "API", "MAX_LIMIT", "MAX_QUANTITY", "SESSION_PATH", "AUDIT_PATH", "Capability", "Param", "parse_params",
    "store_capabilities",
]

#: Where the agents.json API lives (the spec's example layout).
API = "/.well-known/agents/api"
SESSION_PATH = f"{API}/session"
AUDIT_PATH = f"{API}/audit"
#: The most results one page may hold.
MAX_LIMIT = 100
#: The most units one cart line may hold (the cart enforces it too: CartService.max_quantity).
MAX_QUANTITY = 99
SORTS = ("price_asc", "price_desc", "newest")

_INTEGER = re.compile(r"[+-]?\d{1,18}")
_BOOLEANS = {"true": True, "false": False, "1": True, "0": False}


@dataclass(frozen=True)
class Param:
    type: str
    description: str = ""
    required: bool = False
    default: Any = None
    enum: tuple[Any, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    max_length: int = 500

    def published(self) -> dict[str, Any]:
        """The agents.json parameter descriptor (only the fields the schema allows)."""
        out: dict[str, Any] = {"type": self.type}
        bounds = _bounds_text(self.minimum, self.maximum)
        description = f"{self.description} ({bounds})" if bounds else self.description
        if description:
            out["description"] = description
        if self.required:
            out["required"] = True
        if self.default is not None:
            out["default"] = self.default
        if self.enum is not None:
            out["enum"] = list(self.enum)
        return out


def _bounds_text(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"{minimum} to {maximum}"
    if minimum is not None:
        return f"at least {minimum}"
    if maximum is not None:
        return f"at most {maximum}"
    return ""


@dataclass(frozen=True)
class Capability:
    name: str
    description: str
    endpoint: str
    method: str
    params: Mapping[str, Param] = field(default_factory=dict)
    requires_session: bool = False
    human_handoff: bool = False

    def published(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "endpoint": self.endpoint,
                               "method": self.method}
        if self.params:
            out["params"] = {name: p.published() for name, p in self.params.items()}
        out["requires_session"] = self.requires_session
        if self.human_handoff:
            out["human_handoff"] = True
        return out

    @property
    def params_in_query(self) -> bool:
        """GET (and DELETE) take query parameters; POST, PUT and PATCH a JSON body."""
        return self.method in ("GET", "DELETE")


def _page() -> Param:
    return Param("integer", "Page number", default=1, minimum=1, maximum=10_000)


def _limit() -> Param:
    return Param("integer", "Results per page", default=20, minimum=1, maximum=MAX_LIMIT)


def store_capabilities(categories: tuple[str, ...]) -> tuple[Capability, ...]:
    """Everything a haggler store offers agents; ``categories`` are the catalog's kinds."""
    item = Param("string", "Product ID", required=True, max_length=100)
    return (
        Capability("search", "Search the product catalog by words in a product's name, subtitle, "
                   "description or category", f"{API}/search", "GET",
                   {"q": Param("string", "Search query", required=True), "page": _page(), "limit": _limit()}),
        Capability("browse", "List products, optionally of one category, in an order", f"{API}/browse", "GET",
                   {"category": Param("string", "Filter by category", enum=categories),
                    "sort": Param("string", "Order: by price, or newest (most recent year made) first",
                                  default="newest", enum=SORTS),
                    "page": _page(), "limit": _limit()}),
        Capability("detail", "Get full details for a product", f"{API}/detail", "GET", {"id": item}),
        Capability("negotiate", "Haggle over a product's price with the store's merchant agent: returns the "
                   "negotiate.v1 chat to start for it; a deal closed there can be redeemed with cart.add",
                   f"{API}/negotiate", "GET", {"id": item}),
        Capability("cart.add", "Add a product to the cart, at the list price or at the price of a deal "
                   "negotiated for it", f"{API}/cart", "POST",
                   {"item_id": item,
                    "quantity": Param("integer", "Quantity to add (1 with a deal_id)", required=True,
                                      minimum=1, maximum=MAX_QUANTITY),
                    "deal_id": Param("string", "A negotiate.v1 deal for this product: one unit at the agreed "
                                     "price and extras; redeemable once, before it expires", max_length=64)},
                   requires_session=True),
        Capability("cart.view", "View the current cart", f"{API}/cart", "GET", requires_session=True),
        Capability("cart.update", "Update quantity of a cart item", f"{API}/cart", "PATCH",
                   {"item_id": item,
                    "quantity": Param("integer", "New quantity (0 to remove)", required=True, minimum=0,
                                      maximum=MAX_QUANTITY)},
                   requires_session=True),
        Capability("cart.remove", "Remove an item from the cart", f"{API}/cart", "DELETE",
                   {"item_id": Param("string", "Product ID to remove", required=True, max_length=100)},
                   requires_session=True),
        Capability("checkout", "Start checkout and get a URL for the human to review the cart, with its "
                   "negotiated prices, and place the order", f"{API}/checkout", "POST",
                   requires_session=True, human_handoff=True),
    )


def parse_params(capability: Capability, raw: Mapping[str, Any], *, from_query: bool) -> dict[str, Any]:
    """Check ``raw`` against the capability's declared params; returns every declared param
    (defaults filled in, None when optional and absent). Query values arrive as strings and
    are converted; JSON body values must already have the declared type. Unknown parameters
    are refused, so that a misspelt one does not silently fall back to a default."""
    unknown = sorted(set(raw) - set(capability.params))
    if unknown:
        known = ", ".join(capability.params) or "none"
        raise InvalidInput(f"unknown parameter {unknown[0]!r} for {capability.name} (parameters: {known})")
    out: dict[str, Any] = {}
    for name, param in capability.params.items():
        value = raw.get(name)
        if value is None or (from_query and value == "" and not param.required):
            if param.required:
                raise InvalidInput(f"missing required parameter {name!r}")
            out[name] = param.default
            continue
        out[name] = _checked(name, param, _converted(name, param, value) if from_query else value)
    return out


def _converted(name: str, param: Param, value: Any) -> Any:
    text = str(value)
    if param.type == "integer":
        if not _INTEGER.fullmatch(text.strip()):
            raise InvalidInput(f"parameter {name!r} must be an integer, not {text[:40]!r}")
        return int(text)
    if param.type == "boolean":
        if text.lower() not in _BOOLEANS:
            raise InvalidInput(f"parameter {name!r} must be true or false, not {text[:40]!r}")
        return _BOOLEANS[text.lower()]
    return text


def _checked(name: str, param: Param, value: Any) -> Any:
    if param.type == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"parameter {name!r} must be an integer")
        if param.minimum is not None and value < param.minimum:
            raise InvalidInput(f"parameter {name!r} must be at least {param.minimum}, not {value}")
        if param.maximum is not None and value > param.maximum:
            raise InvalidInput(f"parameter {name!r} must be at most {param.maximum}, not {value}")
    elif param.type == "string":
        if not isinstance(value, str):
            raise InvalidInput(f"parameter {name!r} must be a string")
        if len(value) > param.max_length:
            raise InvalidInput(f"parameter {name!r} is too long (at most {param.max_length} characters)")
    elif param.type == "boolean" and not isinstance(value, bool):
        raise InvalidInput(f"parameter {name!r} must be true or false")
    if param.enum is not None and value not in param.enum:
        allowed = ", ".join(map(str, param.enum)) or "(none)"
        raise InvalidInput(f"parameter {name!r} must be one of {allowed}, not {str(value)[:40]!r}")
    return value
