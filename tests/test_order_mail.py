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
from haggler.order_mail import MailSettings
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


def mails(store, order_id: str) -> list:
    with store.app.state.order_events.db.read() as conn:
        return conn.execute(select(order_events).where(order_events.c.order_id == order_id,
                                                       order_events.c.door == MAIL)).all()


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
        deal = close_a_deal(store.http, store.catalog.products[0])
        assert store.http.post(urlsplit(deal["checkout_url"]).path, data=FORM).status_code == 303
        events = store.app.state.order_events
        assert events.deliver_due() == 0 and server.refused == 1 and server.messages == []
        assert events.deliver_due() == 0  # not due again yet
        store.clock.advance(seconds=31)
        assert events.deliver_due() == 1 and len(server.messages) == 1


def test_a_mail_refused_for_good_is_not_sent_again(make_store, tmp_path):
    with MailServer("550 5.1.1 no such mailbox") as server:
        store = mailing_store(make_store, tmp_path, server)
        deal = close_a_deal(store.http, store.catalog.products[0])
        assert store.http.post(urlsplit(deal["checkout_url"]).path, data=FORM).status_code == 303
        events = store.app.state.order_events
        events.deliver_due()
        store.clock.advance(hours=2)
        events.deliver_due()
        assert server.refused == 1 and server.messages == []


def test_a_store_without_a_mail_server_sends_nothing_and_lets_the_owed_mails_go(make_store, tmp_path):
    url = f"sqlite:///{tmp_path}/nomail.db"
    seed(url)
    store = make_store(db_url=url, ucp=UcpSettings(simulation_secret=SECRET))
    deal = close_a_deal(store.http, store.catalog.products[0])
    assert store.http.post(urlsplit(deal["checkout_url"]).path, data=FORM).status_code == 303
    events = store.app.state.order_events
    assert events.deliver_due() == 0
    store.clock.advance(hours=25)
    events.deliver_due()
    with events.db.read() as conn:
        [row] = conn.execute(select(order_events).where(order_events.c.door == MAIL)).all()
    assert row.gave_up_at is not None and row.sent_at is None


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
