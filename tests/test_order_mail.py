"""Buyers' order confirmations by email (haggler/order_mail.py), through a real SMTP server on
loopback: UCP's checkout.md, "Guidelines": the business MUST send a confirmation email after the
checkout has been completed; the deal's checkout page promises one too. Each order with a buyer's
address gets one, whatever its door, sent by the store's sweep, kept until the server takes it."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from sqlalchemy import select

from haggler.commerce.order_events import MAIL
from haggler.order_mail import MailSettings, SmtpSender
from haggler.protocols.ucp.settings import UcpSettings
from haggler.server.threaded import free_port
from haggler.storage.schema import order_events

try:
    from tests.support.checkout import close_a_deal
    from tests.support.smtp import MailServer
    from tests.support.ucp import SECRET, headers, pay, ready_checkout, seed
except ImportError:  # pragma: no cover
    from support.checkout import close_a_deal  # type: ignore[no-redef]
    from support.smtp import MailServer  # type: ignore[no-redef]
    from support.ucp import SECRET, headers, pay, ready_checkout, seed  # type: ignore[no-redef]

FORM = {"name": "Grace Hopper", "email": "grace@example.com", "address": "1 Compiler Court\nArlington, VA"}
SENDER = "orders@tea.example"


@pytest.fixture
def mail_server():
    with MailServer() as server:
        yield server


def mailing_store(make_store, tmp_path, server: MailServer, **config):
    url = f"sqlite:///{tmp_path}/mail-{id(server)}.db"
    seed(url)
    return make_store(db_url=url, ucp=UcpSettings(simulation_secret=SECRET),
                      mail=MailSettings(smtp_url=server.url, sender=SENDER), **config)


def buy_a_deal_at_its_page(store):
    """A deal closed in chat and bought at its page by ``FORM``'s buyer; the store's order events."""
    deal = close_a_deal(store.http, store.catalog.products[0])
    assert store.http.post(urlsplit(deal["checkout_url"]).path, data=FORM).status_code == 303
    return store.app.state.order_events


def test_an_order_bought_at_a_deals_page_is_confirmed_by_mail(make_store, tmp_path, mail_server):
    store = mailing_store(make_store, tmp_path, mail_server)
    product = store.catalog.products[0]
    deal = close_a_deal(store.http, product)
    assert store.http.post(urlsplit(deal["checkout_url"]).path, data=FORM).status_code == 303
    assert store.app.state.order_events.deliver_due() == 1
    [message] = mail_server.messages
    [(envelope_from, recipients)] = mail_server.envelopes
    assert envelope_from == SENDER and recipients == ["grace@example.com"]
    assert message["To"] == "grace@example.com" and SENDER in message["From"]
    text = message.get_content()
    price = f"{deal['price']:.2f}"
    assert "Grace Hopper" in text and price in text and "negotiated price" in text and "Arlington, VA" in text
    order_id = message["Subject"].split()[2]
    assert order_id.startswith("ord_") and order_id in text
    assert store.app.state.order_events.deliver_due() == 0 and len(mail_server.messages) == 1  # once


def test_a_ucp_checkout_completed_is_confirmed_by_mail(make_store, tmp_path, mail_server):
    """checkout.md, "Guidelines": MUST send a confirmation email after the checkout has been completed."""
    store = mailing_store(make_store, tmp_path, mail_server)
    checkout = ready_checkout(store.http, buyer={"email": "ada@example.com", "first_name": "Ada"})
    done = store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=headers(), json=pay())
    assert done.status_code == 200, done.text
    store.app.state.order_events.deliver_due()
    [message] = mail_server.messages
    assert message["To"] == "ada@example.com" and done.json()["order"]["id"] in message["Subject"]


def test_a_mail_server_that_cannot_take_it_now_gets_it_again_later(make_store, tmp_path):
    with MailServer("451 4.3.0 try again later") as server:
        store = mailing_store(make_store, tmp_path, server)
        events = buy_a_deal_at_its_page(store)
        assert events.deliver_due() == 0 and server.refused == 1 and server.messages == []
        assert events.deliver_due() == 0  # not due again yet
        store.clock.advance(seconds=31)
        assert events.deliver_due() == 1 and len(server.messages) == 1


def test_a_mail_refused_for_good_is_not_sent_again(make_store, tmp_path):
    with MailServer("550 5.1.1 no such mailbox") as server:
        store = mailing_store(make_store, tmp_path, server)
        events = buy_a_deal_at_its_page(store)
        events.deliver_due()
        store.clock.advance(hours=2)
        events.deliver_due()
        assert server.refused == 1 and server.messages == []


def test_a_store_without_a_mail_server_sends_nothing_and_lets_the_owed_mails_go(make_store, tmp_path):
    url = f"sqlite:///{tmp_path}/nomail.db"
    seed(url)
    store = make_store(db_url=url, ucp=UcpSettings(simulation_secret=SECRET))
    events = buy_a_deal_at_its_page(store)
    assert events.deliver_due() == 0
    store.clock.advance(hours=25)
    events.deliver_due()
    with events.db.read() as conn:
        [row] = conn.execute(select(order_events).where(order_events.c.door == MAIL)).all()
    assert row.gave_up_at is not None and row.sent_at is None


def _sent_with(settings: MailSettings, to: str = "grace@example.com") -> bool:
    """One confirmation-like message through ``settings``' server, as the sweep sends it."""
    return SmtpSender(settings).post(f"mailto:{to}", b"Subject: test\r\n\r\nhello\r\n", lambda _: {}, "a test")


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")  # the server under test
def test_smtp_without_starttls_is_refused_before_the_password_leaves():
    """``smtp://`` requires STARTTLS: a server (or a man in the middle) that does not offer it never
    sees the password, and the mail waits to be sent again."""
    with MailServer(login=("orders", "s3cret-pass")) as server:
        url = server.url.replace("smtp+plain://", "smtp://orders:s3cret-pass@")
        assert not _sent_with(MailSettings(smtp_url=url, sender=SENDER))
        assert server.logins == [] and server.messages == []
        plain = server.url.replace("smtp+plain://", "smtp+plain://orders:s3cret-pass@")
        assert _sent_with(MailSettings(smtp_url=plain, sender=SENDER)) and server.logins == [("orders", "s3cret-pass")]


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")  # the server under test
def test_a_login_the_server_refuses_is_not_taken_for_a_sent_mail():
    """A wrong password is the store's to fix: the mail is kept for later, not counted as sent."""
    with MailServer(login=("orders", "s3cret-pass")) as server:
        wrong = server.url.replace("smtp+plain://", "smtp+plain://orders:wrong@")
        assert not _sent_with(MailSettings(smtp_url=wrong, sender=SENDER)) and server.messages == []


def test_an_address_smtp_cannot_carry_ends_that_mail_and_no_other(make_store, tmp_path, mail_server):
    """A buyer's address the form took but SMTP cannot write (non-ASCII) is given up alone: the
    sweep goes on to the other confirmations."""
    store = mailing_store(make_store, tmp_path, mail_server)
    for email in ("jö@example.com", "grace@example.com"):
        deal = close_a_deal(store.http, store.catalog.products[0])
        assert store.http.post(urlsplit(deal["checkout_url"]).path, data={**FORM, "email": email}).status_code == 303
    store.app.state.order_events.deliver_due()
    assert [m["To"] for m in mail_server.messages] == ["grace@example.com"]
    store.clock.advance(hours=2)
    assert store.app.state.order_events.deliver_due() == 0 and len(mail_server.messages) == 1


@pytest.mark.parametrize("settings, problem", [
    ({"smtp_url": "http://mail.example.com", "sender": SENDER}, "smtp://"),
    ({"smtp_url": "smtp://", "sender": SENDER}, "with a host"),
    ({"smtp_url": "smtp://mail.example.com"}, "--mail-from"),
    ({"smtp_url": "smtp://mail.example.com", "sender": "orders"}, "--mail-from"),
])
def test_mail_settings_that_cannot_work_are_refused(settings, problem):
    with pytest.raises(ValueError, match=problem):
        MailSettings(**settings)


def test_serve_refuses_a_mail_server_without_a_sender(tmp_path):
    env = {**os.environ, "HAGGLER_SMTP_URL": "smtp://user:secret-password@mail.example.com"}
    env.pop("HAGGLER_MAIL_FROM", None)
    done = subprocess.run([sys.executable, "-m", "haggler", "serve", "--port", str(free_port())], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    said = " ".join(done.stderr.replace("│", " ").split())
    assert done.returncode == 2 and "--mail-from" in said and "secret-password" not in said
