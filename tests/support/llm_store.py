"""A real store whose merchant runs on a model, over real HTTP, its model a local fake provider.

``llm_store(fake, mode, provider, tmp_path)`` serves the demo catalog with ``--merchant <mode>``
on a free loopback port; its backend is the real ``anthropic`` or ``openai`` SDK client pointed at
the ``FakeLLM`` (tests/support/fake_llm.py), or none (``fake=None``) for the deterministic mode. ``Shop`` drives one chat through the store's own
``next`` links, and ``stored`` reads back what the store committed (messages, deal, usage).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from haggler.catalog import Catalog, Product, load_catalog
from haggler.llm import make_backend
from haggler.protocols.negotiate_v1.settings import MerchantSettings, MerchantSkill, StoreLimits
from haggler.server.app import create_app
from haggler.server.config import StoreConfig
from haggler.server.threaded import ThreadedServer
from haggler.storage import chats as repo
from haggler.storage.database import open_database
from tests.support.fake_llm import FakeLLM


@dataclass(frozen=True)
class LLMStore:
    base: str
    catalog: Catalog
    db_url: str

    def product(self, product_id: str) -> Product:
        product = self.catalog.product(product_id)
        assert product is not None
        return product

    def usage(self, session_id: str) -> repo.ModelUsageRow:
        db = open_database(self.db_url)
        try:
            with db.read() as conn:
                return repo.model_usage(conn, session_id)
        finally:
            db.dispose()


def backend_for(fake: FakeLLM, provider: str, *, timeout: float = 2.0) -> Any:
    base = fake.base if provider == "anthropic" else f"{fake.base}/v1"
    return make_backend(provider, "fake-model", api_key="test-key", base_url=base, timeout=timeout, max_retries=0)


@contextmanager
def llm_store(fake: FakeLLM | None, mode: str, provider: str, tmp_path: Path, *, floor_margin: float = 0.0,
              max_messages: int = 30, timeout: float = 2.0, token_budget: int | None = 40_000,
              skill: MerchantSkill | None = None) -> Iterator[LLMStore]:
    db_url = f"sqlite:///{tmp_path / 'store.db'}"
    config = StoreConfig(
        catalog=load_catalog(None), db_url=db_url, data_dir=tmp_path / "data", seed=7,
        limits=StoreLimits(max_chat_starts_per_hour_per_ip=10_000, max_messages_per_chat=max_messages),
        merchant=MerchantSettings(floor_margin=floor_margin, mode=mode, token_budget=token_budget, skill=skill),
        merchant_model=backend_for(fake, provider, timeout=timeout) if fake is not None else None,
        sweep_interval_seconds=None)
    with ThreadedServer(create_app(config)) as server:
        yield LLMStore(server.base, config.catalog, db_url)


class Shop:
    """One shopper's chat with the store, through the links the store hands out."""

    def __init__(self, store: LLMStore, product_id: str) -> None:
        self.store = store
        self.client = httpx.Client(timeout=30)
        response = self.client.get(f"{store.base}/api/store/chat/start", params={"product_id": product_id})
        assert response.status_code == 201, response.text
        body = response.json()
        self.session_id: str = body["session_id"]
        self.next: str | None = body["next"]
        self.replies: list[dict[str, Any]] = [body]

    def say(self, message: str) -> dict[str, Any]:
        assert self.next is not None, "the chat is closed"
        response = self.client.get(self.next.split("?")[0], params={"message": message})
        assert response.status_code == 200, response.text
        body = response.json()
        self.next = body.get("next")
        self.replies.append(body)
        return body

    def history(self) -> dict[str, Any]:
        response = self.client.get(f"{self.store.base}/api/store/chat/{self.session_id}")
        assert response.status_code == 200
        return response.json()

    def merchant_texts(self) -> list[str]:
        return [line["message"] for line in self.history()["history"] if line["speaker"] == "merchant"]

    def close(self) -> None:
        self.client.close()
