"""`haggler mcp` driven by the MCP SDK's own client over stdio, against a real store."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from haggler.protocols.negotiate_v1.settings import StoreLimits


def _server(*flags: str) -> StdioServerParameters:
    """The server as a child process with this process's environment: the SDK passes only a few
    variables by default, and without PYTHONPATH the child may import another checkout's haggler."""
    return StdioServerParameters(command=sys.executable, args=["-m", "haggler", "mcp", *flags], env=dict(os.environ))


def _payload(result: Any) -> Any:
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if isinstance(content, dict) and set(content) == {"result"} else content
    return json.loads(result.content[0].text)


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_tools_are_listed():
    async def go() -> set[str]:
        async with Client(_server()) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert asyncio.run(go()) >= {"discover_store", "list_products", "start_negotiation", "send_message",
                                 "read_history", "negotiate"}


def test_a_negotiation_turn_by_turn_over_stdio(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=50))

    async def go() -> tuple[Any, ...]:
        async with Client(_server("--allow-private")) as client:
            found = _payload(await client.call_tool("discover_store", {"store": store.base}))
            products = _payload(await client.call_tool("list_products", {"store": store.base, "live": True}))
            started = _payload(await client.call_tool("start_negotiation",
                                                      {"store": store.base, "product_id": products[0]["id"]}))
            reply = _payload(await client.call_tool("send_message", {
                "store": store.base, "next_url": started["next"], "message": "Would you take $450?"}))
            done = _payload(await client.call_tool("send_message", {
                "store": store.base, "next_url": reply["next"], "message": "deal"}))
            history = _payload(await client.call_tool("read_history",
                                                      {"store": store.base, "session_id": started["session_id"]}))
            return found, products, started, reply, done, history

    found, products, started, reply, done, history = asyncio.run(go())
    assert found["name"] == store.catalog.store.name and found["protocol"] == "nash.v1"
    assert [p["id"] for p in products] == [p.id for p in store.catalog.products]
    assert started["next"].endswith("{url_encoded_message}")
    assert reply["closed"] is False
    assert done["closed"] is True and done["deal"]["checkout_url"].startswith(store.base)
    assert done["checkout_url"] == done["deal"]["checkout_url"] and reply["checkout_url"] is None
    assert len(history["history"]) == 5 and history["deal"]["id"] == done["deal"]["id"]


def test_private_addresses_are_refused_unless_allowed(store):
    async def go() -> Any:
        async with Client(_server()) as client:
            return await client.call_tool("discover_store", {"store": store.base})

    result = asyncio.run(go())
    assert result.is_error and "loopback" in _text(result)


def test_a_crafted_next_url_cannot_reach_elsewhere(store):
    async def go() -> list[Any]:
        async with Client(_server("--allow-private")) as client:
            await client.call_tool("discover_store", {"store": store.base})
            results = []
            for url in ("http://127.0.0.1:1/admin?x={url_encoded_message}", "file:///etc/passwd",
                        "http://169.254.169.254/latest/meta-data/{url_encoded_message}"):
                results.append(await client.call_tool("send_message",
                                                      {"store": store.base, "next_url": url, "message": "hi"}))
            return results

    for result in asyncio.run(go()):
        assert result.is_error and "does not belong" in _text(result)


def test_store_errors_come_back_as_tool_errors(store):
    async def go() -> Any:
        async with Client(_server("--allow-private")) as client:
            return await client.call_tool("start_negotiation", {"store": store.base, "product_id": "nope"})

    result = asyncio.run(go())
    assert result.is_error and "unknown product_id" in _text(result)


def test_negotiate_runs_the_shopper_agent_end_to_end(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=50))
    product = store.catalog.products[0]
    budget = (product.floor_cents + product.list_price_cents) / 200  # dollars, inside the zone

    async def go() -> tuple[Any, Any]:
        async with Client(_server("--allow-private")) as client:
            ok = await client.call_tool("negotiate", {"store": store.base, "product_id": product.id,
                                                      "budget": budget, "values": {"battery": 80}})
            bad = await client.call_tool("negotiate", {"store": store.base, "product_id": product.id, "budget": -5})
            return ok, bad

    ok, bad = asyncio.run(go())
    result = _payload(ok)
    assert result["outcome"] == "deal"
    assert product.floor_cents <= round(result["price"] * 100) <= budget * 100
    shopper_lines = [line["message"] for line in result["transcript"] if line["speaker"] == "shopper"]
    assert shopper_lines and not any(f"{budget:g}" in line for line in shopper_lines)
    assert bad.is_error and "budget" in _text(bad)


def test_streamable_http_transport(store, tmp_path):
    import subprocess
    import time

    import httpx

    try:
        from tests.support.servers import free_port
    except ImportError:  # pragma: no cover
        from support.servers import free_port  # type: ignore[no-redef]

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "haggler", "mcp", "--http", "--port", str(port), "--allow-private"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60  # generous: a loaded machine is slow, not wrong
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)

        async def go() -> Any:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                return _payload(await client.call_tool("discover_store", {"store": store.base}))

        assert asyncio.run(go())["name"] == store.catalog.store.name
    finally:
        proc.terminate()
        proc.wait(timeout=10)
