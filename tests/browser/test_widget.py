"""The haggling chat widget in Chromium, against real stores: a shopper haggles to a deal, and
the widget holds up when the chat closes, the page reloads, the connection drops, the store says
"too many", the mouse is gone, or the widget sits on another site."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from playwright.sync_api import expect

from haggler.protocols.negotiate_v1.settings import StoreLimits
from tests.browser.driver import (
    DEAL_PRODUCT,
    LOW_OFFER,
    Widget,
    focused,
    haggle_to_deal,
    open_product,
    server_history,
    tab_to,
)
from tests.support.servers import FakeClock

#: Where the browser's clock starts when a test drives it.
BROWSER_TIME = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def _requests(page, path_end: str) -> list[str]:
    """The store requests the page makes whose path ends with ``path_end``, as they go out."""
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.method) if request.url.endswith(path_end) else None)
    return seen


def test_a_shopper_haggles_to_a_deal_and_the_checkout_link_is_the_deals(page, live_store) -> None:
    store = live_store()
    checkout = haggle_to_deal(page, store)
    widget = Widget(page)
    history = server_history(store, widget.session_id())
    assert history["closed"] is True
    assert checkout == history["deal"]["checkout_url"]
    assert checkout.startswith(f"{store.base}/checkout/deal_")
    said = [line["message"] for line in history["history"] if line["speaker"] == "shopper"]
    assert said == ["How about $350?", "What's your best price?", "Deal!"]
    assert widget.transcript() == history["history"]
    deal = history["deal"]
    assert widget.host.locator(".deal").inner_text().startswith(f"Deal! ${deal['price']:,}")
    expect(widget.input).to_be_disabled()


def test_the_offer_shows_as_price_and_extras_chips(page, live_store) -> None:
    store = live_store()
    widget = open_product(page, store)
    widget.start()
    expect(widget.price).to_have_text("$499")
    expect(widget.chips).to_have_count(0)
    widget.say(LOW_OFFER)
    offer = server_history(store, widget.session_id())["offer"]
    assert offer["extras"], "the seller put an extra on the table"
    expect(widget.chips).to_have_text(offer["extras"])
    expect(widget.price).to_have_text(f"${offer['price']:,}")
    expect(widget.accept_button).to_have_text(f"Accept ${offer['price']:,}")


def test_walking_away_closes_the_chat_and_a_new_chat_starts_fresh(page, live_store) -> None:
    store = live_store()
    widget = open_product(page, store)
    widget.start()
    first = widget.session_id()
    widget.walk_button.click()
    expect(widget.closed_note).to_have_text("You walked away from this chat.")
    expect(widget.input).to_be_disabled()
    expect(widget.walk_button).to_be_hidden()
    assert focused(page) == "Start a new chat"
    assert server_history(store, first)["closed"] is True

    widget.new_chat_button.click()
    expect(widget.lines).to_have_count(1)
    expect(widget.input).to_be_enabled()
    expect(widget.closed_note).to_be_hidden()
    second = widget.session_id()
    assert second != first and server_history(store, second)["closed"] is False
    widget.say("Is shipping included?")


def test_a_chat_closed_in_another_tab_answers_400_and_the_widget_says_so(new_page, live_store) -> None:
    store = live_store()
    first = new_page()
    widget = open_product(first, store)
    widget.start()
    second = first.context.new_page()  # same browser storage: the same chat
    other = open_product(second, store)
    expect(other.lines).to_have_count(1)
    widget.walk_button.click()
    expect(widget.closed_note).to_be_visible()

    other.input.fill(LOW_OFFER)
    other.send_button.click()
    expect(other.closed_note).to_have_text("This chat is closed: it ended, or sat idle too long.")
    expect(other.input).to_be_disabled()
    history = server_history(store, widget.session_id())
    assert other.transcript() == history["history"]  # the walk-away, read back
    assert "How about $350?" not in [line["message"] for line in history["history"]]


def test_a_reload_mid_chat_restores_transcript_and_offer_without_sending_anything(page, live_store,
                                                                                 traffic) -> None:
    store = live_store()
    widget = open_product(page, store)
    starts = _requests(page, "/api/store/chat/start")
    widget.start()
    widget.say(LOW_OFFER)
    widget.quick_reply("Shipping?")
    before = server_history(store, widget.session_id())

    traffic.settle(page)
    page.reload()
    widget = Widget(page)
    expect(widget.lines).to_have_count(len(before["history"]))
    assert widget.transcript() == before["history"]
    expect(widget.price).to_have_text(f"${before['offer']['price']:,}")
    expect(widget.chips).to_have_text(before["offer"]["extras"])
    assert server_history(store, widget.session_id()) == before  # nothing sent, nothing lost
    assert starts == ["POST"]

    widget.say("Is there a warranty?")  # the chat carries on where it was
    after = server_history(store, widget.session_id())
    assert after["history"][:len(before["history"])] == before["history"]
    assert len(after["history"]) == len(before["history"]) + 2
    assert widget.transcript() == after["history"]


def test_offline_the_message_waits_and_goes_exactly_once_when_back(page, live_store) -> None:
    store = live_store()
    widget = open_product(page, store)
    widget.start()
    posts = _requests(page, "/message")
    page.context.set_offline(True)
    widget.input.fill(LOW_OFFER)
    widget.send_button.click()
    expect(widget.status).to_contain_text("offline")
    page.context.set_offline(False)
    expect(widget.lines).to_have_count(3)
    history = server_history(store, widget.session_id())
    assert [line["message"] for line in history["history"]].count("How about $350?") == 1
    assert widget.transcript() == history["history"]
    assert posts == ["POST", "POST"]  # the first never reached the store; the history said so


def test_a_reply_lost_on_the_way_back_is_read_from_history_not_sent_again(page, live_store) -> None:
    store = live_store()
    widget = open_product(page, store)
    widget.start()
    posts = _requests(page, "/message")

    def lose_the_answer(route) -> None:
        route.fetch()  # the store takes the turn ...
        route.abort("connectionreset")  # ... and its answer never arrives

    page.route("**/message", lose_the_answer, times=1)
    widget.input.fill(LOW_OFFER)
    widget.send_button.click()
    expect(widget.lines).to_have_count(3)
    history = server_history(store, widget.session_id())
    assert [line["message"] for line in history["history"]].count("How about $350?") == 1
    assert widget.transcript() == history["history"]
    assert posts == ["POST"]
    expect(widget.price).to_have_text(f"${history['offer']['price']:,}")


def test_the_keyboard_alone_haggles_to_a_deal_and_reaches_checkout(page, live_store, traffic) -> None:
    store = live_store()
    widget = open_product(page, store)
    tab_to(page, "Start haggling")
    page.keyboard.press("Enter")
    expect(widget.lines).to_have_count(1)
    expect(widget.input).to_be_focused()
    page.keyboard.type(LOW_OFFER)
    page.keyboard.press("Enter")
    expect(widget.lines).to_have_count(3)
    expect(widget.input).to_be_focused()
    tab_to(page, "Best price?")
    page.keyboard.press("Enter")
    expect(widget.lines).to_have_count(5)
    tab_to(page, "Accept")
    page.keyboard.press("Enter")
    expect(widget.checkout_link).to_be_focused()
    checkout = widget.checkout_link.get_attribute("href")
    assert checkout == server_history(store, widget.session_id())["deal"]["checkout_url"]
    traffic.settle(page)  # keep the chat's responses for the hidden-state scan
    page.keyboard.press("Enter")
    page.wait_for_url(checkout)


def _embedding(store, product_id: str = DEAL_PRODUCT) -> str:
    """Another shop's page with the store's widget on it, and styles that would break an
    unisolated widget."""
    return (f"<!doctype html><html lang=en><head><title>Another shop</title>"
            f"<style>button{{background:rgb(255,0,0)}} li{{display:none}}</style></head>"
            f"<body><main><h1>Another shop</h1>"
            f"<script src='{store.base}/widget.js' data-product='{product_id}'></script></main></body></html>")


def test_embedded_on_another_site_the_widget_haggles_with_its_own_store(page, live_store, other_site) -> None:
    store = live_store()
    site = other_site(_embedding(store))
    assert not site.startswith(store.base)
    page.goto(site)
    widget = Widget(page)
    checkout = widget.haggle_to_deal()
    assert checkout == server_history(store, widget.session_id())["deal"]["checkout_url"]
    assert widget.send_button.evaluate("b => getComputedStyle(b).backgroundColor") != "rgb(255, 0, 0)"
    expect(widget.lines.first).to_be_visible()


def test_too_many_chats_the_widget_counts_down_and_retries_after_retry_after(new_page, live_store,
                                                                              other_site) -> None:
    clock = FakeClock()
    store = live_store(clock=clock, limits=StoreLimits(max_chat_starts_per_hour_per_ip=1, limit_loopback=True))
    open_product(new_page(), store).start()  # the one chat this address may start this hour

    page = new_page()
    page.clock.install(time=BROWSER_TIME)
    starts = _requests(page, "/api/store/chat/start")
    page.goto(other_site(_embedding(store)))  # on another origin: Retry-After must be readable there
    page.clock.pause_at(BROWSER_TIME + timedelta(minutes=1))  # from now on time moves only when told
    widget = Widget(page)
    widget.start_button.click()
    expect(widget.status).to_have_text("Too many chats have been started from your address in the last hour. "
                                       "The chat will try again by itself in 1 hour.")
    expect(widget.countdown).to_have_text("Trying again in 1 hour.")
    assert starts == ["POST"]

    page.clock.fast_forward(3590 * 1000)  # Retry-After is 3601 seconds
    expect(widget.countdown).to_have_text("Trying again in 11 seconds.")
    assert starts == ["POST"]  # not before its time
    expect(widget.lines).to_have_count(0)

    clock.advance(hours=1)  # the store's hour passes too
    page.clock.fast_forward(15 * 1000)
    expect(widget.lines).to_have_count(1)
    assert starts == ["POST", "POST"]
    expect(widget.countdown).to_be_hidden()
    expect(widget.input).to_be_focused()


def test_a_lost_connection_after_waiting_out_a_429_says_so(new_page, live_store) -> None:
    clock = FakeClock()
    store = live_store(clock=clock, limits=StoreLimits(max_chat_starts_per_hour_per_ip=1, limit_loopback=True))
    open_product(new_page(), store).start()  # the one chat this address may start this hour

    page = new_page()
    page.clock.install(time=BROWSER_TIME)
    widget = open_product(page, store)
    page.clock.pause_at(BROWSER_TIME + timedelta(minutes=1))
    widget.start_button.click()
    expect(widget.countdown).to_have_text("Trying again in 1 hour.")
    page.route("**/api/store/chat/start", lambda route: route.abort())  # the retry finds no store
    clock.advance(hours=1)
    page.clock.fast_forward(3605 * 1000)
    expect(widget.status).to_have_text("Couldn't reach the store. Check your connection, then start again.")
    expect(widget.lines).to_have_count(0)

