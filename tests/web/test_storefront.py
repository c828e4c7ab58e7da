"""The storefront over HTTP, without a browser: the pages, the widget's script as served, and
what each carries (public facts, the embed line) and does not (the merchant's hidden state)."""

from __future__ import annotations

from importlib import resources

from haggler.money import format_money
from tests.support.hidden_state import assert_no_hidden_state
from tests.support.html_tags import Tags


def test_the_front_page_lists_every_product_with_its_page_and_list_price(store) -> None:
    response = store.http.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    tags = Tags(response.text)
    assert [name for name, _ in tags.tags if name in {"header", "main", "footer"}] == ["header", "main", "footer"]
    links = {attrs["href"] for attrs in tags.all("a")}
    for product in store.catalog.products:
        assert f"/store/p/{product.id}" in links
        assert format_money(product.list_price_cents, product.currency) in response.text
    assert not tags.all("script")  # the front has no chat: nothing to load


def test_a_product_page_embeds_the_widget_as_any_site_would(store) -> None:
    product = store.catalog.products[3]
    response = store.http.get(f"/store/p/{product.id}")
    assert response.status_code == 200
    scripts = Tags(response.text).all("script")
    assert scripts == [{"src": f"{store.base}/widget.js", "data-product": product.id}]
    assert product.name in response.text and format_money(product.list_price_cents) in response.text


def test_an_unknown_product_page_is_a_404_naming_it(store) -> None:
    response = store.http.get("/store/p/no-such-thing")
    assert response.status_code == 404
    assert response.json()["error"] == "unknown product_id: no-such-thing"


def test_the_widget_script_is_served_as_javascript_to_any_origin_with_cache_headers(store) -> None:
    response = store.http.get("/widget.js", headers={"Origin": "https://another-shop.example"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/javascript; charset=utf-8"
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["cross-origin-resource-policy"] == "cross-origin"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "public, max-age=600"
    assert response.content == resources.files("haggler.web").joinpath("widget.js").read_bytes()
    etag = response.headers["etag"]
    again = store.http.get("/widget.js", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    assert store.http.get("/widget.js", headers={"If-None-Match": '"stale"'}).status_code == 200


def test_the_widget_never_parses_what_it_is_sent_as_html(store) -> None:
    """Server text reaches the page as text: the script has no HTML-parsing sink at all."""
    script = store.http.get("/widget.js").text
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink


def test_no_storefront_page_or_script_carries_hidden_state(store) -> None:
    products = store.catalog.products
    for path in ["/", "/widget.js", *(f"/store/p/{p.id}" for p in products)]:
        response = store.http.get(path)
        assert response.status_code == 200, path
        assert_no_hidden_state(response.text, products)


def test_the_openapi_document_describes_the_storefront(store) -> None:
    paths = store.http.get("/openapi.json").json()["paths"]
    assert set(paths["/widget.js"]["get"]["responses"]["200"]["content"]) == {"text/javascript"}
    assert set(paths["/store/p/{product_id}"]["get"]["responses"]) == {"200", "404"}
    assert "text/html" in paths["/"]["get"]["responses"]["200"]["content"]
