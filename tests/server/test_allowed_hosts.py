"""``--allowed-host``: a store answers only to the hosts its operator allowed, so that no request's
Host header writes the links it hands out (and a shared cache in front of it cannot be poisoned
with them). Over real HTTP, on every surface; and the ``haggler serve`` option itself."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from haggler.protocols.agents_json.capabilities import API
from haggler.server.clientip import parse_networks
from haggler.server.hosts import AllowedHosts, split_host
from tests.support.error_bodies import error_body
from tests.support.rawhttp import exchange
from tests.support.servers import ProcessServer

SURFACES = [("/negotiate.json", False), (f"{API}/search?q=vacuum", True), ("/v1/services", False)]


def get(store, path: str, host: str, **headers: str) -> httpx.Response:
    return store.http.get(path, headers={"Host": host, **headers})


@pytest.mark.parametrize(("path", "envelope"), SURFACES, ids=["store", "agents.json", "exchange"])
def test_a_host_not_allowed_is_400_in_the_surfaces_shape_saying_how_to_allow_it(store, path, envelope):
    response = get(store, path, "evil.example")
    assert response.status_code == 400
    message = response.json()["error"]
    assert response.json() == error_body(response, message, envelope)
    assert "'evil.example'" in message and "--allowed-host evil.example" in message


def test_by_default_the_loopback_names_are_allowed_on_any_port(store):
    port = store.server.port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "localhost", "LOCALHOST:1"):
        response = get(store, "/negotiate.json", host)
        assert response.status_code == 200, (host, response.text)
        assert response.json()["endpoints"]["catalog"]["url"] == f"http://{host}/api/store/catalog"


def test_a_refused_host_never_reaches_the_links_of_later_responses(store):
    """The descriptor is cached per base URL: a refused host must not get into that cache."""
    assert get(store, "/negotiate.json", "evil.example").status_code == 400
    assert "evil" not in store.http.get("/negotiate.json").text
    started = store.http.get("/api/store/chat/start", params={"product_id": store.catalog.products[0].id},
                             headers={"Host": "evil.example"})
    assert started.status_code == 400
    assert store.start().json()["next"].startswith(f"http://127.0.0.1:{store.server.port}/")


def test_allowed_hosts_replace_the_default_and_build_the_links(make_store):
    store = make_store(allowed_hosts=("shop.example", "api.example:8443"))
    said = get(store, "/negotiate.json", "shop.example:9000")
    assert said.status_code == 200
    assert said.json()["endpoints"]["catalog"]["url"] == "http://shop.example:9000/api/store/catalog"
    assert get(store, "/negotiate.json", "api.example:8443").status_code == 200
    assert get(store, "/negotiate.json", "api.example:8444").status_code == 400  # that name on that port only
    assert get(store, "/negotiate.json", f"127.0.0.1:{store.server.port}").status_code == 400


def test_with_a_public_url_its_host_is_the_default_and_the_links_use_it(make_store):
    store = make_store(public_url="https://shop.example.com/")
    response = get(store, "/negotiate.json", "shop.example.com")
    assert response.status_code == 200
    assert response.json()["endpoints"]["catalog"]["url"] == "https://shop.example.com/api/store/catalog"
    refused = store.http.get("/negotiate.json")  # 127.0.0.1:PORT
    assert refused.status_code == 400 and "--allowed-host 127.0.0.1" in refused.json()["error"]


def test_from_a_trusted_proxy_x_forwarded_host_is_checked_and_builds_the_links(make_store):
    store = make_store(allowed_hosts=("shop.example",), trusted_proxies=parse_networks(["127.0.0.0/8"]))
    proxied = get(store, "/negotiate.json", "10.0.0.2:8000", **{"X-Forwarded-Host": "shop.example",
                                                                "X-Forwarded-Proto": "https"})
    assert proxied.status_code == 200
    assert proxied.json()["endpoints"]["catalog"]["url"] == "https://shop.example/api/store/catalog"
    forged = get(store, "/negotiate.json", "shop.example", **{"X-Forwarded-Host": "evil.example"})
    assert forged.status_code == 400
    assert forged.json()["error"].startswith("X-Forwarded-Host 'evil.example'")
    odd_scheme = get(store, "/negotiate.json", "shop.example", **{"X-Forwarded-Proto": "javascript"})
    assert odd_scheme.json()["endpoints"]["catalog"]["url"] == "http://shop.example/api/store/catalog"


def test_x_forwarded_host_from_anyone_else_is_ignored(make_store):
    store = make_store(allowed_hosts=("shop.example",))
    response = get(store, "/negotiate.json", "shop.example", **{"X-Forwarded-Host": "evil.example"})
    assert response.status_code == 200
    assert response.json()["endpoints"]["catalog"]["url"] == "http://shop.example/api/store/catalog"


def test_a_request_with_two_host_headers_is_400(store):
    port = store.server.port
    response = exchange(port, f"GET /negotiate.json HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.example")
    assert response.status == 400
    assert response.json()["error"] == "the request has more than one Host header"


@pytest.mark.parametrize(("value", "expected"), [
    ("Shop.Example:8000", ("shop.example", "8000")),
    ("localhost", ("localhost", None)),
    ("[::1]:8000", ("[::1]", "8000")),
    ("::1", ("[::1]", None)),
    ("my_service", ("my_service", None)),
    ("evil.example/path", None),
    ("a@b", None),
    ("host:", None),
    ("host:port", None),
    ("", None),
])
def test_split_host(value, expected):
    assert split_host(value) == expected


def test_allowed_hosts_refuses_what_is_not_a_host_naming_it():
    with pytest.raises(ValueError, match="'shop example'"):
        AllowedHosts(["shop.example", "shop example"])
    assert AllowedHosts.for_store((), "https://user@shop.example:8443/base").allows("shop.example:8443")
    assert not AllowedHosts.for_store((), "https://shop.example:8443").allows("shop.example:443")


@pytest.mark.slow
def test_serve_takes_allowed_hosts_and_refuses_a_bad_one(tmp_path):
    with ProcessServer("--allowed-host", "shop.example", "--allowed-host", "127.0.0.1", cwd=tmp_path) as server:
        said = httpx.get(f"{server.base}/negotiate.json", headers={"Host": "shop.example"})
        assert said.json()["endpoints"]["catalog"]["url"] == "http://shop.example/api/store/catalog"
        assert httpx.get(f"{server.base}/negotiate.json", headers={"Host": "localhost"}).status_code == 400
    refused = subprocess.run([sys.executable, "-m", "haggler", "serve", "--allowed-host", "shop example"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "'shop example'" in refused.stderr and "Traceback" not in refused.stderr
    help_text = subprocess.run([sys.executable, "-m", "haggler", "serve", "--help"], cwd=tmp_path,
                               capture_output=True, text=True, timeout=60).stdout
    assert "--allowed-host" in help_text


def test_a_host_value_that_is_no_host_name_is_400_saying_so(store):
    response = get(store, "/negotiate.json", "evil.example/x")
    assert response.status_code == 400
    assert response.json()["error"] == "Host 'evil.example/x' is not a host name"
