"""The merchant's data for the checkout protocols: what is sold, at what price, how much is on hand,
which discount codes and promotions exist, what shipping costs where, and who the known customers are
with their saved addresses.

Loaded once from a data set in the UCP conformance suite's CSV layout (``haggler ucp seed``), read on
every checkout request. The tables are small; each read is one indexed statement.
"""

from __future__ import annotations

import csv
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, delete, func, insert, select, update

from haggler.errors import InvalidInput
from haggler.storage.schema import (
    commerce_addresses,
    commerce_customers,
    commerce_discounts,
    commerce_inventory,
    commerce_payment_instruments,
    commerce_products,
    commerce_promotions,
    commerce_shipping_rates,
)

#: The currency of a data set whose products name none (the UCP suite's: integer cents in USD).
DEFAULT_CURRENCY = "USD"


@dataclass(frozen=True, slots=True)
class Product:
    id: str
    title: str
    price_cents: int
    currency: str
    image_url: str | None


@dataclass(frozen=True, slots=True)
class Discount:
    code: str
    kind: str  # percentage | fixed_amount
    value: int  # percent, or minor units
    description: str


@dataclass(frozen=True, slots=True)
class Promotion:
    id: str
    kind: str  # free_shipping
    min_subtotal_cents: int | None
    eligible_item_ids: tuple[str, ...]
    description: str


@dataclass(frozen=True, slots=True)
class ShippingRate:
    id: str
    country_code: str  # ISO 3166 alpha-2, or "default"
    service_level: str
    price_cents: int
    title: str


@dataclass(frozen=True, slots=True)
class Address:
    """A postal address, with the id the store or the buyer's agent gave it."""

    id: str | None
    street_address: str | None = None
    locality: str | None = None
    region: str | None = None
    postal_code: str | None = None
    country: str | None = None
    full_name: str | None = None

    def same_place(self, other: Address) -> bool:
        """Whether both name the same place, compared field by field without case or spacing."""
        def norm(value: str | None) -> str:
            return " ".join((value or "").lower().split())
        fields = ("street_address", "locality", "region", "postal_code", "country")
        return all(norm(getattr(self, f)) == norm(getattr(other, f)) for f in fields)

    def one_line(self) -> str:
        return ", ".join(part for part in (self.full_name, self.street_address, self.locality, self.region,
                                           self.postal_code, self.country) if part)


@dataclass(frozen=True, slots=True)
class Instrument:
    id: str
    kind: str
    brand: str | None
    last_digits: str | None
    token: str
    handler_id: str


# -- reads -----------------------------------------------------------------------------------------


def product(conn: Connection, product_id: str) -> Product | None:
    """The product of the merchant's data with this id, or None."""
    row = conn.execute(select(commerce_products).where(commerce_products.c.id == product_id)).first()
    return Product(row.id, row.title, row.price_cents, row.currency, row.image_url) if row else None


def stock(conn: Connection, product_id: str) -> int | None:
    """Units on hand, or None when the product's stock is not tracked."""
    return conn.execute(select(commerce_inventory.c.quantity)
                        .where(commerce_inventory.c.product_id == product_id)).scalar_one_or_none()


def take_stock(conn: Connection, product_id: str, quantity: int) -> bool:
    """Take ``quantity`` units, if that many are on hand (always, for an untracked product): one
    conditional update, so two checkouts racing for the last units cannot both have them."""
    if stock(conn, product_id) is None:
        return True
    done = conn.execute(update(commerce_inventory)
                        .where(commerce_inventory.c.product_id == product_id,
                               commerce_inventory.c.quantity >= quantity)
                        .values(quantity=commerce_inventory.c.quantity - quantity))
    return done.rowcount == 1


def return_stock(conn: Connection, product_id: str, quantity: int) -> None:
    """Put back units taken for a checkout whose payment did not go through."""
    conn.execute(update(commerce_inventory).where(commerce_inventory.c.product_id == product_id)
                 .values(quantity=commerce_inventory.c.quantity + quantity))


def discount(conn: Connection, code: str) -> Discount | None:
    """The discount a code names, matched without regard to case."""
    row = conn.execute(select(commerce_discounts).where(commerce_discounts.c.code_key == code.lower())).first()
    return Discount(row.code, row.kind, row.value, row.description) if row else None


def promotions(conn: Connection) -> tuple[Promotion, ...]:
    """Every promotion, in id order (read per pricing: the table is a handful of rows)."""
    return tuple(Promotion(r.id, r.kind, r.min_subtotal_cents, tuple(json.loads(r.eligible_item_ids or "[]")),
                           r.description)
                 for r in conn.execute(select(commerce_promotions).order_by(commerce_promotions.c.id)))


def shipping_rates(conn: Connection) -> tuple[ShippingRate, ...]:
    """Every shipping rate, in id order (read per pricing: the table is a handful of rows)."""
    return tuple(ShippingRate(r.id, r.country_code, r.service_level, r.price_cents, r.title)
                 for r in conn.execute(select(commerce_shipping_rates).order_by(commerce_shipping_rates.c.id)))


def instrument(conn: Connection, instrument_id: str) -> Instrument | None:
    """The payment instrument on file under this id, or None."""
    row = conn.execute(select(commerce_payment_instruments)
                       .where(commerce_payment_instruments.c.id == instrument_id)).first()
    return Instrument(row.id, row.kind, row.brand, row.last_digits, row.token, row.handler_id) if row else None


def _customer_id(conn: Connection, email: str) -> str | None:
    return conn.execute(select(commerce_customers.c.id)
                        .where(func.lower(commerce_customers.c.email) == email.lower())).scalar_one_or_none()


def saved_addresses(conn: Connection, email: str) -> tuple[Address, ...]:
    """The addresses saved for the customer with this email (none for an unknown one), oldest first."""
    customer = _customer_id(conn, email)
    if customer is None:
        return ()
    rows = conn.execute(select(commerce_addresses).where(commerce_addresses.c.customer_id == customer)
                        .order_by(commerce_addresses.c.id))
    return tuple(Address(r.id, r.street_address, r.locality, r.region, r.postal_code, r.country) for r in rows)


def remember_address(conn: Connection, email: str, name: str | None, address: Address) -> Address:
    """The saved address for this place if the customer has one (its id reused), otherwise the
    address saved for them under a new id; an unknown email becomes a customer."""
    for saved in saved_addresses(conn, email):
        if saved.same_place(address):
            return Address(saved.id, saved.street_address, saved.locality, saved.region, saved.postal_code,
                           saved.country, address.full_name)
    customer = _customer_id(conn, email)
    if customer is None:
        customer = "cust_" + secrets.token_hex(8)
        conn.execute(insert(commerce_customers).values(id=customer, name=name, email=email))
    new_id = "addr_" + secrets.token_hex(8)
    conn.execute(insert(commerce_addresses).values(
        id=new_id, customer_id=customer, street_address=address.street_address, locality=address.locality,
        region=address.region, postal_code=address.postal_code, country=address.country))
    return Address(new_id, address.street_address, address.locality, address.region, address.postal_code,
                   address.country, address.full_name)


# -- seeding ---------------------------------------------------------------------------------------

#: The files of a data set, in the order they are loaded (addresses after their customers).
SEED_FILES = ("products.csv", "inventory.csv", "discounts.csv", "promotions.csv", "shipping_rates.csv",
              "customers.csv", "addresses.csv", "payment_instruments.csv")

_TABLES = (commerce_payment_instruments, commerce_addresses, commerce_customers, commerce_shipping_rates,
           commerce_promotions, commerce_discounts, commerce_inventory, commerce_products)


def read_seed(directory: Path) -> dict[str, list[dict[str, str]]]:
    """Every CSV file of a data set, as rows; a missing file is an empty one, a file that is not
    there at all for every name is refused (a wrong directory)."""
    found = {name: directory / name for name in SEED_FILES}
    if not any(path.exists() for path in found.values()):
        raise InvalidInput(f"{directory}: none of {', '.join(SEED_FILES)} is there")
    data: dict[str, list[dict[str, str]]] = {}
    for name, path in found.items():
        if path.exists():
            with path.open(newline="", encoding="utf-8") as f:
                data[name] = list(csv.DictReader(f))
        else:
            data[name] = []
    return data


def _int(row: Mapping[str, str], field: str, where: str) -> int:
    try:
        return int(row[field])
    except (KeyError, TypeError, ValueError):
        raise InvalidInput(f"{where}: {field} must be a whole number, got {row.get(field)!r}") from None


def _optional(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None


def load_seed(conn: Connection, data: Mapping[str, Iterable[Mapping[str, str]]]) -> dict[str, int]:
    """Replace the merchant's data with a data set (as :func:`read_seed` reads it), in the caller's
    transaction: all of it or, on the first bad row, nothing. Returns the rows loaded per file."""
    for table in _TABLES:
        conn.execute(delete(table))
    counts: dict[str, int] = {}

    def load(name: str, rows: list[dict[str, object]], table: object) -> None:
        if rows:
            conn.execute(insert(table), rows)  # type: ignore[arg-type]
        counts[name] = len(rows)

    products_rows = [dict(r) for r in data.get("products.csv", ())]
    load("products.csv", [{"id": r["id"], "title": r["title"], "price_cents": _int(r, "price", f"products.csv {r['id']}"),
                           "currency": _optional(r.get("currency")) or DEFAULT_CURRENCY,
                           "image_url": _optional(r.get("image_url"))} for r in products_rows], commerce_products)
    load("inventory.csv", [{"product_id": r["product_id"],
                            "quantity": _int(r, "quantity", f"inventory.csv {r['product_id']}")}
                           for r in data.get("inventory.csv", ())], commerce_inventory)
    discounts_rows = []
    for r in data.get("discounts.csv", ()):
        if r["type"] not in ("percentage", "fixed_amount"):
            raise InvalidInput(f"discounts.csv {r['code']}: type must be percentage or fixed_amount, got {r['type']!r}")
        discounts_rows.append({"code_key": r["code"].lower(), "code": r["code"], "kind": r["type"],
                               "value": _int(r, "value", f"discounts.csv {r['code']}"),
                               "description": r.get("description") or r["code"]})
    load("discounts.csv", discounts_rows, commerce_discounts)
    promotion_rows = []
    for r in data.get("promotions.csv", ()):
        eligible = _optional(r.get("eligible_item_ids"))
        try:
            items = json.loads(eligible) if eligible else []
        except ValueError:
            raise InvalidInput(f"promotions.csv {r['id']}: eligible_item_ids must be a JSON list") from None
        minimum = _optional(r.get("min_subtotal"))
        promotion_rows.append({"id": r["id"], "kind": r["type"], "eligible_item_ids": json.dumps(items),
                               "min_subtotal_cents": _int(r, "min_subtotal", f"promotions.csv {r['id']}")
                               if minimum else None, "description": r.get("description") or r["id"]})
    load("promotions.csv", promotion_rows, commerce_promotions)
    load("shipping_rates.csv", [{"id": r["id"], "country_code": r["country_code"], "service_level": r["service_level"],
                                 "price_cents": _int(r, "price", f"shipping_rates.csv {r['id']}"), "title": r["title"]}
                                for r in data.get("shipping_rates.csv", ())], commerce_shipping_rates)
    load("customers.csv", [{"id": r["id"], "name": _optional(r.get("name")), "email": r["email"]}
                           for r in data.get("customers.csv", ())], commerce_customers)
    load("addresses.csv", [{"id": r["id"], "customer_id": r["customer_id"], "street_address": _optional(r.get("street_address")),
                            "locality": _optional(r.get("city")), "region": _optional(r.get("state")),
                            "postal_code": _optional(r.get("postal_code")), "country": _optional(r.get("country"))}
                           for r in data.get("addresses.csv", ())], commerce_addresses)
    load("payment_instruments.csv", [{"id": r["id"], "kind": r["type"], "brand": _optional(r.get("brand")),
                                      "last_digits": _optional(r.get("last_digits")), "token": r["token"],
                                      "handler_id": r["handler_id"]}
                                     for r in data.get("payment_instruments.csv", ())], commerce_payment_instruments)
    return counts
