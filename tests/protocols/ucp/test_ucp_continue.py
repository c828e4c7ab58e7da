"""The store's page at a checkout's continue_url, over real HTTP (checkout.md, "Continue URL": the
handoff lets the buyer "continue and finalize the checkout session", and SHOULD preserve its state
on the server behind an opaque URL). A processor that answers from a script stands in for 3-D Secure;
tests/payments/test_stripe_store.py walks the same page through Stripe's fake."""

from __future__ import annotations

from sqlalchemy import select

from haggler.money import format_money
from haggler.payments.handler import ChargeResult, PaymentOutcome
from haggler.storage.schema import commerce_inventory, deal_redemptions, orders

try:
    from tests.support.checkout import close_a_deal
    from tests.support.processors import Scripted
    from tests.support.ucp import create_body, headers, pay, ready_checkout, shipping_to
except ImportError:  # pragma: no cover
    from support.checkout import close_a_deal  # type: ignore[no-redef]
    from support.processors import Scripted  # type: ignore[no-redef]
    from support.ucp import create_body, headers, pay, ready_checkout, shipping_to  # type: ignore[no-redef]

PAGE = "https://pay.example/3ds/pi_1"
THREE_DS = ChargeResult(PaymentOutcome.ACTION_REQUIRED, "pi_1", reason="The card issuer asks the buyer to authenticate",
                        action_url=PAGE)
BUYER = {"first_name": "Ada", "last_name": "Lovelace", "email": "ada@example.com"}


def escalated(store, platform=None, **extra) -> tuple[Scripted, dict, str]:
    """A checkout of one mug whose completion met 3-D Secure: the processor, the checkout as the
    completion answered it, and its continue_url."""
    processor = Scripted(THREE_DS)
    store.app.state.ucp.sessions.handlers[processor.id] = processor
    profile = platform.profile_url if platform else "https://platform.example/profile.json"
    checkout = ready_checkout(store.http, "mug", 1, profile=profile, buyer=BUYER, **extra)
    body = store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=headers(profile),
                           json=pay()).json()
    assert body["status"] == "requires_escalation", body
    return processor, body, body["continue_url"]


def visit(store, url: str):
    """The buyer's browser at the page, not following the redirect to the processor."""
    return store.http.get(url, follow_redirects=False)


def status(store, checkout_id: str) -> dict:
    return store.http.get(f"/checkout-sessions/{checkout_id}", headers=headers()).json()


def rows(store, table) -> list:
    with store.app.state.ucp.db.read() as conn:
        return conn.execute(select(table)).all()


def mugs(store) -> int:
    with store.app.state.ucp.db.read() as conn:
        return conn.execute(select(commerce_inventory.c.quantity)
                            .where(commerce_inventory.c.product_id == "mug")).scalar_one()


def test_continue_url_is_the_stores_page_which_sends_a_buyer_yet_to_act_on_to_the_processor(ucp_store):
    """checkout.md, "Continue URL": an absolute URL on the business's origin, holding only the
    session's id (the state stays on the server); while the buyer has yet to authenticate, the page
    sends them to the processor's (303), kept by no cache, and changes nothing."""
    processor, body, url = escalated(ucp_store)
    assert url == f"{ucp_store.base}/pay/{body['id']}"
    sent = visit(ucp_store, url)
    assert (sent.status_code, sent.headers["location"]) == (303, PAGE)
    assert sent.headers["cache-control"] == "no-store" and sent.headers["referrer-policy"] == "no-referrer"
    assert processor.reads == ["pi_1"] and status(ucp_store, body["id"])["status"] == "requires_escalation"


def test_back_from_the_processor_paid_the_page_finalizes_the_checkout_once(make_ucp_store, db_url, platform):
    """checkout.md, "Continue URL" ("finalize the checkout session"): the buyer back from 3-D Secure,
    the page reads the payment, places the one order and says so, and the platform is sent
    order_placed (order.md, "Events") as after a completion; loading the page again changes nothing
    and announces nothing more (SQLite and PostgreSQL)."""
    store = make_ucp_store(db_url=db_url)
    processor, body, url = escalated(store, platform)
    processor.settle_all(ChargeResult(PaymentOutcome.SUCCEEDED, "pi_1"))  # the buyer authenticated
    done = visit(store, url)
    assert done.status_code == 200 and "Payment complete" in done.text
    checkout = status(store, body["id"])
    assert checkout["status"] == "completed" and "continue_url" not in checkout
    paid = format_money(next(t["amount"] for t in checkout["totals"] if t["type"] == "total"), "USD")
    assert checkout["order"]["id"] in done.text and f"{paid} was paid" in done.text
    assert not any(value in done.text for value in (*BUYER.values(), "9 Quay Rd"))  # nothing of the buyer's
    event = platform.wait_for("order_placed")
    assert event["id"] == checkout["order"]["id"] and event["checkout_id"] == body["id"]
    again = visit(store, url)
    assert again.status_code == 200 and checkout["order"]["id"] in again.text
    [order] = rows(store, orders)
    assert (order.id, order.payment_reference) == (checkout["order"]["id"], "pi_1")
    assert len(processor.charges) == 1 and processor.reads == ["pi_1"]  # read once, never charged again
    assert [e["event_type"] for e in platform.events] == ["order_placed"]


def test_back_from_a_failed_authentication_the_deal_and_the_stock_go_back(ucp_store):
    """Nothing was taken: the page says so in the processor's words, the checkout is ready for another
    payment (as after a decline), the deal may be bought again and the mug is back on the shelf."""
    product = ucp_store.catalog.products[0]
    deal = close_a_deal(ucp_store.http, product)
    processor = Scripted(THREE_DS)
    ucp_store.app.state.ucp.sessions.handlers[processor.id] = processor
    created = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body(
        product.id, 1, discounts={"codes": [deal["id"]]}, fulfillment=shipping_to("US", "ground"))).json()
    url = ucp_store.http.post(f"/checkout-sessions/{created['id']}/complete", headers=headers(),
                              json=pay()).json()["continue_url"]
    assert len(rows(ucp_store, deal_redemptions)) == 1
    processor.settle_all(ChargeResult(PaymentOutcome.DECLINED, "pi_1", reason="The card failed authentication."))
    failed = visit(ucp_store, url)
    assert failed.status_code == 200 and "did not go through" in failed.text
    assert "The card failed authentication." in failed.text
    assert status(ucp_store, created["id"])["status"] == "ready_for_complete"
    assert rows(ucp_store, orders) == [] and rows(ucp_store, deal_redemptions) == []


def test_a_processor_that_does_not_answer_is_a_page_to_try_later_and_the_hold_stays(ucp_store, platform):
    processor, body, url = escalated(ucp_store, platform)
    held = mugs(ucp_store)
    processor.unreachable = True
    later = visit(ucp_store, url)
    assert later.status_code == 503 and later.headers["retry-after"] and "in a moment" in later.text
    assert status(ucp_store, body["id"])["status"] == "requires_escalation" and mugs(ucp_store) == held
    assert rows(ucp_store, orders) == [] and platform.events == []


def test_an_unknown_session_is_a_page_not_found(ucp_store):
    unknown = visit(ucp_store, "/pay/chk_000000000000000000000000")
    assert unknown.status_code == 404 and "not known" in unknown.text
    assert unknown.headers["content-type"].startswith("text/html")
