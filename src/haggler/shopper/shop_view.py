"""What `haggler shop` shows in the terminal: the negotiation as it happens, then a summary."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from haggler.agents.shopper import ShopperTurn
from haggler.money import format_money
from haggler.shopper.models import Listing, StoreInfo
from haggler.shopper.negotiation import Line, NegotiationResult

_OUTCOMES = {"deal": "[bold green]deal[/]", "walked_away": "[yellow]walked away[/]",
             "merchant_closed": "[yellow]the store closed the chat[/]", "gave_up": "[yellow]gave up (turn limit)[/]",
             "over_budget": "[bold red]the store reported a deal above your budget: not taken[/]"}


class ShopView:
    def __init__(self, console: Console, *, quiet: bool = False) -> None:
        self.console = console
        self.quiet = quiet
        self.rep = "merchant"

    def start(self, store: StoreInfo, listing: Listing) -> None:
        self.rep = store.rep_name or "merchant"
        if not self.quiet:
            price = format_money(listing.list_price_cents, listing.currency) if listing.list_price_cents else "?"
            self.console.rule(f"{store.name} — {listing.name} (list {price})")

    def line(self, line: Line) -> None:
        if self.quiet:
            return
        who = f"[cyan]{self.rep}[/]" if line.speaker == "merchant" else "[green]you[/]"
        self.console.print(f"{who}: {line.message}", highlight=False)

    async def decide(self, turn: ShopperTurn) -> str:
        """Ask the person for their turn, with the agent's suggestion pre-filled."""
        return await asyncio.to_thread(prompt_with_default, "your turn> ", turn.text)

    def summary(self, result: NegotiationResult) -> None:
        table = Table.grid(padding=(0, 2))
        table.add_row("outcome", _OUTCOMES.get(result.outcome, result.outcome))
        if result.price_cents is not None:
            table.add_row("price", format_money(result.price_cents, result.currency))
            table.add_row("extras", ", ".join(result.extras) or "none")
            saving = result.saving_cents or 0
            share = f" ({saving / result.list_price_cents:.0%})" if result.list_price_cents else ""
            table.add_row("saving vs list", f"{format_money(saving, result.currency)}{share}")
        if result.checkout_url:
            table.add_row("checkout", result.checkout_url)
        table.add_row("turns", str(result.turns))
        table.add_row("protocol", result.protocol)
        if result.llm is not None:
            llm = result.llm
            reasons = Counter(f.reason for f in llm.fallbacks)
            taken = ", ".join(f"{reason} ×{count}" for reason, count in reasons.items())
            table.add_row("model", f"{llm.model}: wrote {llm.model_turns} turns, {llm.usage.total_tokens} tokens "
                                   f"in {llm.usage.calls} calls")
            table.add_row("rule-based turns", f"{len(llm.fallbacks)}" + (f" ({taken})" if taken else ""))
        self.console.print(Panel(table, title=result.product_name, expand=False))


def prompt_with_default(prompt: str, default: str) -> str:
    """Read a line with ``default`` already typed in (editable) on a terminal; when input is
    piped, an empty line takes the default."""
    if sys.stdin.isatty():
        try:
            import readline
        except ImportError:  # pragma: no cover - readline is missing on some platforms
            readline = None  # type: ignore[assignment]
        if readline is not None:
            readline.set_startup_hook(lambda: readline.insert_text(default))
            try:
                return input(prompt).strip() or default
            finally:
                readline.set_startup_hook()
    print(f"{prompt}[{default}] ", end="", flush=True)
    answer = sys.stdin.readline()
    return answer.strip() or default
