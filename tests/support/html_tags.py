"""Reading a page's tags without a browser: what the pages link and load."""

from __future__ import annotations

from html.parser import HTMLParser


class Tags(HTMLParser):
    """Each start tag of a page with its attributes, in order."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]
