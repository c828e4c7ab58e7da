"""Payments without a plain yes or no, through UCP over real HTTP: a processor that does not answer,
one that sends the buyer to authenticate (3-D Secure), and a total that changed after the agent saw
it. Money that may have moved keeps the stock and the deal held until the same completion settles it."""

from __future__ import annotations

from urllib.parse import urlsplit

from sqlalchemy import delete, select

from dataclasses import replace

from haggler.payments.handler import Acquirer, AuthenticationRequest, ChargeResult, PaymentOutcome, PaymentUnavailable
from haggler.payments.simulated import AUTHENTICATION_TOKEN
from haggler.storage.schema import commerce_discounts, deal_redemptions, orders

try:
    from tests.support.checkout import close_a_deal
    from tests.support.processors import Scripted
    from tests.support.ucp import create_body, headers, pay, ready_checkout, shipping_to
except ImportError:  # pragma: no cover
    from support.checkout import close_a_deal  # type: ignore[no-redef]
    from support.processors import Scripted  # type: ignore[no-redef]
    from support.ucp import create_body, headers, pay, ready_checkout, shipping_to  # type: ignore[no-redef]

FORM = {"name": "Other", "email": "o@example.com", "address": "2 Road\nTown"}
THREE_DS = ChargeResult(PaymentOutcome.ACTION_REQUIRED, "pi_1", reason="The card issuer asks the buyer to authenticate",
                        action_url="https://pay.example/3ds/pi_1")


def use(store, processor: Scripted) -> Scripted:
    store.app.state.ucp.sessions.handlers[processor.id] = processor
    return processor


def rows(store, table) -> list:
    with store.app.state.ucp.db.read() as conn:
        return conn.execute(select(table)).all()


def complete(store, session_id: str, token: str = "success_token"):
    return store.http.post(f"/checkout-sessions/{session_id}/complete", headers=headers(), json=pay(token))


def deal_checkout(store) -> tuple[dict, dict]:
    product = store.catalog.products[0]
    deal = close_a_deal(store.http, product)
    body = store.http.post("/checkout-sessions", headers=headers(), json=create_body(
        product.id, 1, discounts={"codes": [deal["id"]]}, fulfillment=shipping_to("US", "ground"))).json()
    assert body["discounts"]["applied"][0]["code"] == deal["id"]
    return deal, body


def test_no_answer_holds_the_deal_until_the_same_completion_settles_it(ucp_store):
    """A processor that did not answer may have taken the money: the deal stays redeemed (its own
    page refuses another buyer), another card is refused, and the same completion sent again gets the
    processor's real answer and places the one order."""
    processor = use(ucp_store, Scripted(PaymentUnavailable("timeout"), ChargeResult(PaymentOutcome.SUCCEEDED, "ch_1")))
    deal, body = deal_checkout(ucp_store)
    first = complete(ucp_store, body["id"])
    assert first.status_code == 503 and first.headers.get("Retry-After")
    assert len(rows(ucp_store, deal_redemptions)) == 1
    assert ucp_store.http.post(urlsplit(deal["checkout_url"]).path, data=FORM).status_code == 409
    assert ucp_store.http.get(f"/checkout-sessions/{body['id']}", headers=headers()).json()["status"] == \
        "complete_in_progress"
    other = complete(ucp_store, body["id"], "another_token")
    assert other.status_code == 409 and other.json()["messages"][0]["code"] == "conflict"
    done = complete(ucp_store, body["id"])
    assert done.status_code == 200 and done.json()["status"] == "completed"
    assert len(processor.charges) == 2 and len({c.idempotency_key for c in processor.charges}) == 1  # one payment
    [order] = rows(ucp_store, orders)
    assert order.deal_id == deal["id"] and order.payment_reference == "ch_1"


def test_three_d_secure_escalates_with_the_stores_page_as_continue_url(ucp_store):
    """checkout.md, "Continue URL": the business MUST provide continue_url with requires_escalation
    (the store's own page, server-side state behind an opaque URL: it finalizes the checkout, see
    test_ucp_continue.py), and MUST include a message whose severity escalates. The processor is
    told to bring the buyer back there. The hold stays while the buyer authenticates; the same
    completion sent again afterwards places the order too (as a new request: under the first one's
    idempotency key it would replay the escalation)."""
    processor = use(ucp_store, Scripted(THREE_DS))
    checkout = ready_checkout(ucp_store.http, "mug", 1)
    answer = complete(ucp_store, checkout["id"])
    assert answer.status_code == 200, answer.text
    body = answer.json()
    page = f"{ucp_store.base}/pay/{checkout['id']}"
    assert body["status"] == "requires_escalation" and body["continue_url"] == page
    assert [c.return_url for c in processor.charges] == [page]
    [message] = [m for m in body["messages"] if m["type"] == "error"]
    # requires_buyer_review: the checkout is complete, the buyer authorizes it (checkout.md, "Error Handling")
    assert (message["code"], message["severity"]) == ("requires_3ds", "requires_buyer_review")
    assert "order" not in body and rows(ucp_store, orders) == []
    again = ucp_store.http.get(f"/checkout-sessions/{checkout['id']}", headers=headers()).json()
    assert again["status"] == "requires_escalation" and again["continue_url"] == page
    assert ucp_store.http.post(f"/checkout-sessions/{checkout['id']}/cancel", headers=headers()).status_code == 409
    processor.settle_all(ChargeResult(PaymentOutcome.SUCCEEDED, "pi_1"))  # the buyer authenticated
    done = complete(ucp_store, checkout["id"])
    assert done.status_code == 200 and done.json()["status"] == "completed" and "continue_url" not in done.json()
    assert [c.return_url for c in processor.charges] == [page, page]  # the same request under the same key
    [order] = rows(ucp_store, orders)
    assert order.payment_reference == "pi_1"


def test_a_handler_that_could_hand_3ds_to_an_agent_still_escalates_to_a_page_in_ucp(ucp_store):
    """UCP's agents do not run 3-D Secure (ACP's authentication_required is ACP's): a processor answer
    that says how an agent could is still requires_escalation with the page, nothing more."""
    asked = AuthenticationRequest(Acquirer("412345", "US", "acq-1", "Tea Shop"), "visa")
    use(ucp_store, Scripted(replace(THREE_DS, authentication=asked)))
    checkout = ready_checkout(ucp_store.http, "mug", 1)
    body = complete(ucp_store, checkout["id"]).json()
    assert body["status"] == "requires_escalation" and body["continue_url"] == f"{ucp_store.base}/pay/{checkout['id']}"
    assert "authentication_metadata" not in body and rows(ucp_store, orders) == []


def test_the_simulated_3ds_card_has_no_page_so_ucp_declines_it_and_holds_nothing(ucp_store):
    checkout = ready_checkout(ucp_store.http, "mug", 1)
    declined = complete(ucp_store, checkout["id"], AUTHENTICATION_TOKEN)
    assert declined.status_code == 402 and "no page" in declined.text
    again = ucp_store.http.get(f"/checkout-sessions/{checkout['id']}", headers=headers()).json()
    assert again["status"] == "ready_for_complete" and rows(ucp_store, orders) == []


def test_a_code_withdrawn_after_the_review_is_not_charged_at_full_price(ucp_store):
    """The total charged is the one last answered: a code withdrawn meanwhile refuses the completion
    (409 ``total_changed``, nothing charged) until the platform has read the checkout again."""
    checkout = ready_checkout(ucp_store.http, "mug", 2, discounts={"codes": ["TENOFF"]})
    shown = checkout["totals"][-1]["amount"]
    with ucp_store.app.state.ucp.db.write() as conn:
        conn.execute(delete(commerce_discounts))
    refused = complete(ucp_store, checkout["id"])
    assert refused.status_code == 409 and refused.json()["messages"][0]["code"] == "total_changed"
    assert rows(ucp_store, orders) == []
    read = ucp_store.http.get(f"/checkout-sessions/{checkout['id']}", headers=headers()).json()
    assert read["totals"][-1]["amount"] > shown
    done = complete(ucp_store, checkout["id"])
    assert done.status_code == 200 and done.json()["totals"][-1]["amount"] == read["totals"][-1]["amount"]
