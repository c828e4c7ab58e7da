"""The buyer's order confirmation, by email, for an order from any door.

UCP's checkout.md ("Guidelines") says the business MUST send a confirmation email once a checkout
is completed, and the deal's checkout page tells the buyer one will come. Every order placed with a
buyer's address owes one (``orders.insert_order`` records it, in the order's own transaction, as an
event of the door ``mail`` in ``commerce/order_events.py``), so a crash or a mail server that is
down for a while loses none: the store's sweep sends what is due, as it does the platforms' webhooks.

The store sends through the operator's SMTP server (``HAGGLER_SMTP_URL``, read from the environment
only, since it holds the password): ``smtp://`` with STARTTLS, required,
``smtps://`` with TLS from the start, ``smtp+plain://`` never encrypted (a relay on this machine).
A store without one sends no mail; its events wait a day and are let go.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formataddr, make_msgid
from urllib.parse import unquote, urlsplit

from haggler.commerce.order_events import MAIL, Event, Outgoing
from haggler.money import decimal_string
from haggler.orders import Order, order_for
from haggler.storage.database import Database

log = logging.getLogger("haggler")

#: The door of confirmation mails among the order events.
DOOR = MAIL
_SCHEMES = {"smtp": 587, "smtps": 465, "smtp+plain": 25}


@dataclass(frozen=True)
class MailSettings:
    """The SMTP server (``smtp_url``: ``smtp[s|+plain]://[user:password@]host[:port]``) and the
    sender's address (``sender``); None: the store sends no mail."""

    smtp_url: str | None = None
    sender: str | None = None
    timeout_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.smtp_url is None:
            return
        parts = urlsplit(self.smtp_url)
        if parts.scheme not in _SCHEMES or not parts.hostname:
            raise ValueError("HAGGLER_SMTP_URL must be smtp://, smtps:// or smtp+plain:// with a host, e.g. "
                             "smtp://user:password@mail.example.com:587")
        if not self.sender or "@" not in self.sender:
            raise ValueError("--mail-from (HAGGLER_MAIL_FROM) must be the address confirmations are sent from")

    @property
    def enabled(self) -> bool:
        return self.smtp_url is not None


class SmtpSender:
    """``order_events``' :class:`Sender` for mail: ``mailto:`` URLs through the SMTP server, one
    connection a message. Only the buyer's side can make a mail undeliverable for good (the server
    refuses the recipient, or the message itself with a 5xx, or the address cannot be written in
    SMTP): that is logged and counted as done, as sending it again would be refused again. Anything
    else (a refused login or sender, a server without STARTTLS, no answer) is the store's to fix,
    so it is logged as a warning and the mail waits to be sent again."""

    def __init__(self, settings: MailSettings) -> None:
        parts = urlsplit(settings.smtp_url or "")
        self._scheme = parts.scheme
        self._host = parts.hostname or ""
        self._port = parts.port or _SCHEMES.get(parts.scheme, 25)
        self._login = (unquote(parts.username), unquote(parts.password or "")) if parts.username else None
        self._timeout = settings.timeout_seconds
        self._sender = settings.sender or ""

    def post(self, url: str, body: bytes, sign: Callable[[bytes], Mapping[str, str]], what: str) -> bool:
        recipient = url.removeprefix("mailto:")
        try:
            with self._connect() as smtp:
                if self._login is not None:
                    smtp.login(*self._login)
                smtp.sendmail(self._sender, [recipient], body)
            return True
        except smtplib.SMTPRecipientsRefused:
            log.warning("mail %s: the server refuses the recipient %s: not sent", what, recipient)
            return True
        except smtplib.SMTPDataError as exc:
            if 500 <= exc.smtp_code < 600:
                log.warning("mail %s to %s refused for good (%d): not sent", what, recipient, exc.smtp_code)
                return True
            log.info("mail %s to %s refused for now (%d)", what, recipient, exc.smtp_code)
        except UnicodeError:
            log.warning("mail %s: the address %r cannot be sent through this server: not sent", what, recipient)
            return True
        except (smtplib.SMTPAuthenticationError, smtplib.SMTPSenderRefused, smtplib.SMTPNotSupportedError) as exc:
            log.warning("mail %s not sent, check HAGGLER_SMTP_URL and --mail-from: %s", what,
                        type(exc).__name__)
        except (smtplib.SMTPException, OSError) as exc:
            log.info("mail %s to %s not sent: %s", what, recipient, exc)
        return False

    def _connect(self) -> smtplib.SMTP:
        """A connection ready to log in: TLS from the start (``smtps``), or STARTTLS, which
        ``smtp://`` requires (a server that does not offer it is refused: the password would travel
        in the clear), or neither (``smtp+plain``: a relay on this machine)."""
        if self._scheme == "smtps":
            return smtplib.SMTP_SSL(self._host, self._port, timeout=self._timeout,
                                    context=ssl.create_default_context())
        smtp = smtplib.SMTP(self._host, self._port, timeout=self._timeout)
        try:
            if self._scheme == "smtp":
                smtp.ehlo()
                if not smtp.has_extn("starttls"):
                    raise smtplib.SMTPNotSupportedError("the server does not offer STARTTLS (smtp:// requires it; "
                                                        "smtp+plain:// is for a relay on this machine)")
                smtp.starttls(context=ssl.create_default_context())
        except BaseException:
            smtp.close()
            raise
        return smtp


class OrderMail:
    """``order_events``' :class:`Door` for confirmations: the order as placed, to the buyer's address."""

    def __init__(self, settings: MailSettings, db: Database, store_name: str) -> None:
        self.delivery = SmtpSender(settings)
        self._sender = settings.sender or ""
        self._db = db
        self._store = store_name

    def outgoing(self, event: Event, base: str | None) -> Outgoing | None:
        with self._db.read() as conn:
            order = order_for(conn, order_id=event.order_id)
        email = order.buyer.email if order is not None and order.buyer is not None else ""
        if order is None or not email:
            return None
        message = confirmation(order, self._store, self._sender, event.id)
        return Outgoing(f"mailto:{email}", message.as_bytes(policy=message.policy.clone(linesep="\r\n")),
                        lambda _: {})


def confirmation(order: Order, store: str, sender: str, event_id: str) -> EmailMessage:
    """The confirmation of ``order``: what was bought at what price, the total, where it goes."""
    assert order.buyer is not None
    message = EmailMessage()
    message["Subject"] = f"Your order {order.id} at {store}"
    message["From"] = formataddr((store, sender))
    message["To"] = order.buyer.email
    message["Message-ID"] = make_msgid(idstring=event_id, domain=sender.rpartition("@")[2])
    lines = "\n".join(f"  {line.quantity} × {line.name}: {decimal_string(line.line_total_cents)} {line.currency}"
                      + (" (negotiated price)" if line.negotiated else "") for line in order.lines)
    ship_to = f"\nShipping to:\n  {order.buyer.address}\n" if order.buyer.address else ""
    message.set_content(f"Hello {order.buyer.name or 'there'},\n\nthank you for your order {order.id}, placed "
                        f"{order.placed_at:%Y-%m-%d %H:%M} UTC.\n\n{lines}\n\nTotal: "
                        f"{decimal_string(order.total_cents)} {order.currency}\n{ship_to}\n— {store}\n")
    return message


__all__ = ["DOOR", "MailSettings", "OrderMail", "SmtpSender", "confirmation"]
