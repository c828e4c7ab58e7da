"""One page of a longer list: what every dashboard table and listing command shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Sequence, TypeVar

T = TypeVar("T")

#: Rows on one page of a dashboard table.
PER_PAGE = 25


@dataclass(frozen=True, slots=True)
class Window:
    """Which rows to read: skip ``offset``, then at most ``limit`` (None: all the rest)."""

    offset: int = 0
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.offset < 0 or (self.limit is not None and self.limit < 1):
            raise ValueError("offset must be 0 or more and limit at least 1")

    @classmethod
    def page(cls, number: int, per_page: int = PER_PAGE) -> Window:
        """The ``number``-th page (1-based) of ``per_page`` rows."""
        return cls((max(number, 1) - 1) * per_page, per_page)


#: Every row: the default window of each report.
EVERYTHING = Window()


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """The rows of one window and how many there are in all, so a reader can say "41–60 of 112"."""

    items: Sequence[T]
    total: int
    window: Window

    @classmethod
    def of(cls, rows: Sequence[T], window: Window) -> Page[T]:
        """The ``window`` of ``rows``, a list read whole."""
        end = None if window.limit is None else window.offset + window.limit
        return cls(rows[window.offset:end], len(rows), window)

    @property
    def number(self) -> int:
        """1-based page number (1 when the window is not a page of a fixed size)."""
        return self.window.offset // self.window.limit + 1 if self.window.limit else 1

    @property
    def pages(self) -> int:
        """How many pages of this size the whole list fills (at least 1, an empty list's one page)."""
        limit = self.window.limit
        return max(1, -(-self.total // limit)) if limit else 1

    @property
    def has_previous(self) -> bool:
        return self.window.offset > 0

    @property
    def has_next(self) -> bool:
        return self.window.offset + len(self.items) < self.total

    def to_json(self, item: Callable[[T], Any]) -> dict[str, Any]:
        return {"total": self.total, "offset": self.window.offset, "limit": self.window.limit,
                "items": [item(row) for row in self.items]}
