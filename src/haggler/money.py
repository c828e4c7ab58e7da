"""Money as integer minor units (cents), converted only at the edges.

Catalog files and negotiate.v1 responses carry decimal prices (``579`` or ``1299.99``);
everything inside haggler holds integer cents so that no float rounding can move a price
across a floor or a budget.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, ROUND_HALF_UP, Decimal, InvalidOperation

from haggler.iso4217 import MINOR_UNITS

#: No price haggler handles comes near this; beyond it Decimal arithmetic would lose digits.
MAX_AMOUNT = Decimal(10) ** 15

CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "CAD": "CA$", "AUD": "A$", "JPY": "¥"}


def currency_problem(code: object) -> str | None:
    """Why a store cannot price in ``code``, or None when it can: ``code`` must be a current
    ISO 4217 code with 2 minor units, because every amount here is held in hundredths — a yen
    price read as cents would be a hundred times off, a dinar's third decimal lost. The message
    completes a sentence naming the field."""
    if not isinstance(code, str):
        return f"must be a three-letter ISO 4217 code such as 'USD', got {code!r}"
    if code not in MINOR_UNITS:
        if code.strip().upper() in MINOR_UNITS:
            return f"{code!r} is not an ISO 4217 code as written: write {code.strip().upper()!r}"
        return f"{code!r} is not a current ISO 4217 currency code"
    units = MINOR_UNITS[code]
    if units != 2:
        has = "no minor unit in ISO 4217" if units is None else f"{units} minor unit{'' if units == 1 else 's'}"
        return (f"{code!r} has {has}, and haggler holds every price in hundredths: it serves only "
                "currencies with 2 minor units")
    return None


def to_cents(value: object, *, rounding: str = ROUND_HALF_UP) -> int:
    """Convert a decimal amount (int, str, float or Decimal) to integer cents, a fraction of a
    cent rounded half up unless ``rounding`` (a :mod:`decimal` mode) says otherwise.

    Raises ValueError for anything that is not a finite number.
    """
    if isinstance(value, bool):
        raise ValueError("a boolean is not an amount")
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError) as exc:
        raise ValueError(f"not an amount: {value!r}") from exc
    if not amount.is_finite():
        raise ValueError(f"not a finite amount: {value!r}")
    if abs(amount) >= MAX_AMOUNT:
        raise ValueError(f"amount out of range: {value!r}")
    return int((amount * 100).quantize(Decimal(1), rounding=rounding))


def amount_cents(value: object, *, allow_strings: bool = False, rounding: str = ROUND_HALF_UP) -> int:
    """Validate an amount someone supplied (a catalog price, a structured offer, a scenario
    file) and return cents, of any sign. The ValueError's message completes a sentence naming
    the field: "must be ..."."""
    kinds = (int, float, str) if allow_strings else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ValueError(f"must be a number, got {value!r}")
    try:
        return to_cents(value, rounding=rounding)
    except ValueError as exc:
        raise ValueError(f"must be a finite number, got {value!r}") from exc


def is_exact_cents(value: object, cents: int) -> bool:
    """Whether ``cents`` (what :func:`amount_cents` made of ``value``) is ``value`` exactly, with
    no fraction of a cent rounded away: where an amount is a limit, 150.001 must be refused, not
    read as 150.00."""
    return Decimal(str(value).strip()) * 100 == cents


def cents_or_none(value: object) -> int | None:
    """An amount read off the wire (a number, a numeric string or a Decimal) as cents, or None
    when it is not one: for parsing what others send, where a bad field is simply absent."""
    try:
        return amount_cents(str(value) if isinstance(value, Decimal) else value, allow_strings=True)
    except ValueError:
        return None


def positive_cents(value: object, *, allow_strings: bool = False, rounding: str = ROUND_HALF_UP) -> int:
    """:func:`amount_cents`, for amounts that must be greater than zero (prices)."""
    cents = amount_cents(value, allow_strings=allow_strings, rounding=rounding)
    if cents <= 0:
        raise ValueError(f"must be greater than 0, got {value!r}")
    return cents


def offered_cents(value: object) -> int:
    """A price a shopper offers, in cents: a fraction of a cent is dropped, never rounded up, so
    an offer of 599.995 is an offer of 599.99 — rounding up would have the store take a price
    nobody offered (and an offer a hair under the floor would clear it)."""
    return positive_cents(value, rounding=ROUND_FLOOR)


def price_unit(list_price_cents: int) -> int:
    """The granularity of round prices people say for an item: $10 on a $1,899 item, $5 on
    $649, $1 on $379 — never coarser than 1% of the list price."""
    for unit in (1_000, 500, 100, 10):
        if unit * 100 <= list_price_cents:
            return unit
    return 1


def to_decimal_number(cents: int) -> int | float:
    """The wire form of an amount: a whole number when there are no cents, else 2 decimals."""
    if cents % 100 == 0:
        return cents // 100
    return round(cents / 100, 2)


def decimal_string(cents: int) -> str:
    """Cents as an exact decimal string (``8900`` → ``"89.00"``): JSON numbers would invite floats."""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{whole}.{frac:02d}"


def format_money(cents: int, currency: str = "USD") -> str:
    """Render an amount the way a person writes it: ``$1,299.99``, ``$579``."""
    symbol = CURRENCY_SYMBOLS.get(currency.upper(), "")
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    text = f"{whole:,}" if frac == 0 else f"{whole:,}.{frac:02d}"
    if symbol:
        return f"{sign}{symbol}{text}"
    return f"{sign}{text} {currency.upper()}"
