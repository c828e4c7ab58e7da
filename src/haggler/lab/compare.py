"""Phase 6 of spec 003: the five protocols on the same scenarios.

``compare_protocols(runs, seed)`` runs alternating offers, free text, sealed bid, instant match
and the double auction over the same ``single_issue(runs, seed=seed, zopa=None)`` scenarios (a
mix with and without a zone of agreement) and summarises each protocol: success rate (over all
runs and over the runs where a deal was possible), mean wall time, messages and words, the mean
seller/buyer share of the surplus of the deals made, and security — the share of the red-team
corpus's attacks it resisted, and how many the audit markers flagged (:mod:`haggler.lab.security`).
``write_comparison`` writes a CSV and bar charts, ``write_report_md`` a markdown report;
``main_compare`` does it all for the CLI.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from haggler.lab.generate import single_issue
from haggler.lab.metrics import Aggregate, NegotiationRecord, aggregate, measure
from haggler.lab.protocols import (
    ALTERNATING, BOOK_SIZE, CHANNELS, DOUBLE_AUCTION, FREE_TEXT, INSTANT_MATCH, PROTOCOLS, SEALED_BID, Attack,
    FreeTextStore, alternating, double_auction, instant_match, sealed_bid,
)
from haggler.lab.scenario import Scenario
from haggler.lab.security import SecurityResult, red_team_attacks, security_trials

__all__ = ["Comparison", "ProtocolSummary", "compare_protocols", "main_compare", "render_comparison",
           "write_comparison", "write_report_md"]

Progress = Callable[[str, int, int], None]

_LABELS = {ALTERNATING: "Alternating offers", FREE_TEXT: "Free text", SEALED_BID: "Sealed bid",
           INSTANT_MATCH: "Instant match", DOUBLE_AUCTION: "Double auction"}
#: One protocol's run of scenario ``index``, with an attack in its free-text channel or without.
_Run = Callable[[int, Attack | None], NegotiationRecord]


@dataclass(frozen=True)
class ProtocolSummary:
    protocol: str
    runs: int
    deals: int
    zopa_runs: int
    zopa_deals: int
    #: deals / runs
    success_rate: float
    #: deals / runs with a zone of agreement (None when no run had one)
    success_rate_zopa: float | None
    #: deals made where no deal was possible, or past a side's reservation (must be 0)
    irrational_deals: int
    mean_wall_seconds: float
    mean_messages: float
    mean_words: float
    #: over deals that created surplus (None without any)
    mean_seller_share: float | None
    mean_buyer_share: float | None
    aggregate: Aggregate
    #: The red-team corpus against this protocol (spec 003, Phase 6: "security").
    security: SecurityResult

    @property
    def label(self) -> str:
        return _LABELS.get(self.protocol, self.protocol)


@dataclass(frozen=True)
class Comparison:
    runs: int
    seed: int
    scenarios: tuple[Scenario, ...]
    summaries: tuple[ProtocolSummary, ...]
    records: dict[str, tuple[NegotiationRecord, ...]] = field(repr=False)

    def summary(self, protocol: str) -> ProtocolSummary:
        for s in self.summaries:
            if s.protocol == protocol:
                return s
        raise KeyError(protocol)


def _summarise(protocol: str, records: list[NegotiationRecord], security: SecurityResult) -> ProtocolSummary:
    metrics = [measure(r) for r in records]
    agg = aggregate(metrics)
    zopa = [m for m in metrics if m.had_zopa]
    zopa_deals = sum(1 for m in zopa if m.agreed)
    return ProtocolSummary(
        protocol=protocol, runs=agg.count, deals=agg.agreements, zopa_runs=len(zopa), zopa_deals=zopa_deals,
        success_rate=agg.agreement_rate, success_rate_zopa=zopa_deals / len(zopa) if zopa else None,
        irrational_deals=agg.irrational_agreements, mean_wall_seconds=agg.mean_wall_seconds,
        mean_messages=agg.mean_messages, mean_words=agg.mean_words, mean_seller_share=agg.mean_seller_share,
        mean_buyer_share=agg.mean_buyer_share, aggregate=agg, security=security,
    )


def _runs(scenarios: tuple[Scenario, ...], seed: int, store: FreeTextStore) -> dict[str, _Run]:
    """How each protocol runs scenario ``i`` — the same way with an attack and without, so that
    the security trials compare like with like (free text keeps its per-scenario seed)."""
    return {
        ALTERNATING: lambda i, attack: alternating(scenarios[i], attack=attack),
        FREE_TEXT: lambda i, attack: store.negotiate(scenarios[i], seed=seed * 1_000_003 + i, attack=attack),
        SEALED_BID: lambda i, attack: sealed_bid(scenarios[i], attack=attack),
        INSTANT_MATCH: lambda i, attack: instant_match(scenarios[i], attack=attack),
        DOUBLE_AUCTION: lambda i, attack: double_auction(scenarios, i, attack=attack),
    }


def compare_protocols(runs: int = 50, seed: int = 0, *, progress: Progress | None = None) -> Comparison:
    """Run every protocol on the same ``runs`` scenarios, then every red-team attack against each.
    ``progress(protocol, done, total)`` is called after each attack-free negotiation."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a positive integer, got {runs!r}")
    scenarios = single_issue(runs, seed=seed, zopa=None, prefix="cmp")
    records: dict[str, list[NegotiationRecord]] = {p: [] for p in PROTOCOLS}
    with FreeTextStore(scenarios, seed=seed) as store:
        run = _runs(scenarios, seed, store)
        for protocol in PROTOCOLS:
            for i in range(runs):
                records[protocol].append(run[protocol](i, None))
                if progress is not None:
                    progress(protocol, i + 1, runs)
        security = {p: security_trials(p, scenarios, records[p], run[p]) for p in PROTOCOLS}
    return Comparison(runs=runs, seed=seed, scenarios=scenarios,
                      summaries=tuple(_summarise(p, records[p], security[p]) for p in PROTOCOLS),
                      records={p: tuple(rs) for p, rs in records.items()})


# -- output ---------------------------------------------------------------------------------------

_COLUMNS = ("protocol", "runs", "deals", "success_rate", "zopa_runs", "zopa_deals", "success_rate_zopa",
            "irrational_deals", "mean_wall_ms", "mean_messages", "mean_words", "mean_seller_share",
            "mean_buyer_share", "attacks", "attacks_resisted", "resisted_rate", "attacks_flagged")


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def _resisted(r: SecurityResult) -> str:
    return f"{r.resisted}/{r.attacks} ({r.resisted_rate:.0%})"


def _row(s: ProtocolSummary) -> dict[str, object]:
    return {
        "protocol": s.protocol, "runs": s.runs, "deals": s.deals, "success_rate": round(s.success_rate, 4),
        "zopa_runs": s.zopa_runs, "zopa_deals": s.zopa_deals,
        "success_rate_zopa": "" if s.success_rate_zopa is None else round(s.success_rate_zopa, 4),
        "irrational_deals": s.irrational_deals, "mean_wall_ms": round(s.mean_wall_seconds * 1000, 4),
        "mean_messages": round(s.mean_messages, 2), "mean_words": round(s.mean_words, 2),
        "mean_seller_share": "" if s.mean_seller_share is None else round(s.mean_seller_share, 4),
        "mean_buyer_share": "" if s.mean_buyer_share is None else round(s.mean_buyer_share, 4),
        "attacks": s.security.attacks, "attacks_resisted": s.security.resisted,
        "resisted_rate": round(s.security.resisted_rate, 4), "attacks_flagged": s.security.flagged,
    }


def render_comparison(c: Comparison, console) -> None:  # type: ignore[no-untyped-def]
    """Print the comparison as a Rich table."""
    from rich.table import Table

    zopa = c.summaries[0].zopa_runs if c.summaries else 0
    table = Table(title=f"Protocol comparison — {c.runs} scenarios ({zopa} with a zone of agreement), seed {c.seed}")
    for name, justify in (("Protocol", "left"), ("Deals", "right"), ("Success", "right"),
                          ("Success (ZOPA)", "right"), ("Wall ms", "right"), ("Messages", "right"),
                          ("Words", "right"), ("Seller share", "right"), ("Buyer share", "right"),
                          ("Bad deals", "right"), ("Attacks resisted", "right"), ("Flagged", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in c.summaries:
        table.add_row(s.label, f"{s.deals}/{s.runs}", _pct(s.success_rate), _pct(s.success_rate_zopa),
                      f"{s.mean_wall_seconds * 1000:.3f}", f"{s.mean_messages:.1f}", f"{s.mean_words:.1f}",
                      _pct(s.mean_seller_share), _pct(s.mean_buyer_share), str(s.irrational_deals),
                      _resisted(s.security), f"{s.security.flagged}/{s.security.attacks}")
    console.print(table)


def _pyplot():  # type: ignore[no-untyped-def]
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("the protocol comparison plots need matplotlib: pip install matplotlib") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bar(plt, path: Path, labels: list[str], values: list[float], title: str, ylabel: str,  # type: ignore[no-untyped-def]
         fmt: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar(labels, values, color=["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"][: len(values)])
    ax.bar_label(bars, labels=[fmt.format(v) for v in values], padding=2, fontsize=8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.margins(y=0.15)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_comparison(c: Comparison, out_dir: str | Path) -> list[Path]:
    """Write ``comparison.csv`` and the bar charts; returns the paths (CSV first)."""
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "comparison.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=_COLUMNS)
        writer.writeheader()
        for s in c.summaries:
            writer.writerow(_row(s))
    labels = [s.label for s in c.summaries]
    paths = [csv_path]
    charts = (
        ("protocols_time.png", [s.mean_wall_seconds * 1000 for s in c.summaries], "Mean wall time per negotiation",
         "milliseconds", "{:.3f}"),
        ("protocols_messages.png", [s.mean_messages for s in c.summaries], "Mean messages per negotiation",
         "messages", "{:.1f}"),
        ("protocols_words.png", [s.mean_words for s in c.summaries], "Mean words per negotiation", "words", "{:.0f}"),
        ("protocols_success.png", [100 * (s.success_rate_zopa or 0.0) for s in c.summaries],
         "Deals where a deal was possible", "% of runs with a ZOPA", "{:.0f}%"),
        ("protocols_security.png", [100 * s.security.resisted_rate for s in c.summaries],
         "Red-team attacks resisted", f"% of {len(red_team_attacks())} attacks", "{:.0f}%"),
    )
    for name, values, title, ylabel, fmt in charts:
        path = out / name
        _bar(plt, path, labels, values, title, ylabel, fmt)
        paths.append(path)
    # Surplus split: stacked seller/buyer shares.
    path = out / "protocols_surplus.png"
    fig, ax = plt.subplots(figsize=(7, 4))
    seller = [100 * (s.mean_seller_share or 0.0) for s in c.summaries]
    buyer = [100 * (s.mean_buyer_share or 0.0) for s in c.summaries]
    ax.bar(labels, seller, label="seller", color="#4c72b0")
    ax.bar(labels, buyer, bottom=seller, label="buyer", color="#dd8452")
    for i, (sv, bv) in enumerate(zip(seller, buyer, strict=True)):
        if sv + bv > 0:
            ax.text(i, sv / 2, f"{sv:.0f}%", ha="center", va="center", color="white", fontsize=8)
            ax.text(i, sv + bv / 2, f"{bv:.0f}%", ha="center", va="center", color="white", fontsize=8)
    ax.set_title("Mean split of the surplus of the deals made")
    ax.set_ylabel("% of the surplus")
    ax.set_ylim(0, 110)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    paths.append(path)
    return paths


def findings(c: Comparison) -> list[str]:
    """Sentences about the comparison, computed from its numbers."""
    ss = list(c.summaries)
    if not ss:
        return []
    out = []
    zopa = ss[0].zopa_runs
    out.append(f"Each protocol ran on the same {c.runs} scenarios, {zopa} of which had a zone of agreement "
               f"({c.runs - zopa} did not).")
    best = max(ss, key=lambda s: (s.success_rate_zopa or 0.0, -s.mean_messages))
    worst = min(ss, key=lambda s: s.success_rate_zopa or 0.0)
    out.append(f"{best.label} closed the most possible deals ({_pct(best.success_rate_zopa)} of the runs with a zone "
               f"of agreement); {worst.label} the fewest ({_pct(worst.success_rate_zopa)}).")
    cheap = min(ss, key=lambda s: s.mean_words)
    dear = max(ss, key=lambda s: s.mean_words)
    ratio = dear.mean_words / cheap.mean_words if cheap.mean_words else float("inf")
    out.append(f"{cheap.label} was the cheapest in talk ({cheap.mean_messages:.1f} messages, {cheap.mean_words:.0f} "
               f"words per negotiation) and {dear.label} the most expensive ({dear.mean_messages:.1f} messages, "
               f"{dear.mean_words:.0f} words), {ratio:.1f} times as many words.")
    fast = min(ss, key=lambda s: s.mean_wall_seconds)
    slow = max(ss, key=lambda s: s.mean_wall_seconds)
    out.append(f"Wall time ranged from {fast.mean_wall_seconds * 1000:.3f} ms ({fast.label}) to "
               f"{slow.mean_wall_seconds * 1000:.3f} ms ({slow.label}) per negotiation.")
    split = [s for s in ss if s.mean_seller_share is not None]
    if split:
        seller_best = max(split, key=lambda s: s.mean_seller_share or 0.0)
        buyer_best = max(split, key=lambda s: s.mean_buyer_share or 0.0)
        out.append(f"The seller kept the largest share of the surplus under {seller_best.label} "
                   f"({_pct(seller_best.mean_seller_share)}), the buyer under {buyer_best.label} "
                   f"({_pct(buyer_best.mean_buyer_share)}).")
    bad = sum(s.irrational_deals for s in ss)
    out.append("Without attacks, no protocol made a deal past either side's reservation." if bad == 0 else
               f"{bad} deals went past a side's reservation: "
               + ", ".join(f"{s.label} {s.irrational_deals}" for s in ss if s.irrational_deals) + ".")
    out.append(_security_finding(ss))
    return out


def _security_finding(ss: list[ProtocolSummary]) -> str:
    attacks = ss[0].security.attacks
    whole = [s.label for s in ss if s.security.resisted == s.security.attacks]
    partial = [s for s in ss if s.security.resisted < s.security.attacks]
    said = f"Against the {attacks} red-team attacks, each placed in the protocol's free-text channel, "
    said += f"{_join(whole)} resisted every one" if whole else "no protocol resisted every one"
    if partial:
        said += "; " + "; ".join(f"{s.label} {_resisted(s.security)} — {_outside(s.security)}" for s in partial)
    flagged = sorted({s.security.flagged for s in ss})
    counts = str(flagged[0]) if len(flagged) == 1 else f"{flagged[0]} to {flagged[-1]}"
    return said + f". The audit markers flagged {counts} of the {attacks} in each protocol's channel."


def _outside(r: SecurityResult) -> str:
    """How many of the attacks that got through broke a mandate (the rest only moved the deal)."""
    if len(r.violations) == len(r.breaches):
        return "every attack that got through closed a deal outside a mandate"
    return f"{len(r.violations)} of the {len(r.breaches)} that got through closed a deal outside a mandate"


def _join(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def write_report_md(c: Comparison, out_dir: str | Path, plots: list[Path], report: str | Path | None = None) -> Path:
    """Write the markdown report: how it was made, the table, findings from the numbers and the
    charts. ``report`` defaults to ``report.md`` in ``out_dir``; links are relative to the
    report's own folder, so ``docs/protocol-comparison.md`` can sit beside its chart folder and
    be regenerated by one command."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = Path(report) if report is not None else out / "report.md"
    path.parent.mkdir(parents=True, exist_ok=True)

    def link(p: Path) -> str:
        return Path(os.path.relpath(p.resolve(), path.parent.resolve())).as_posix()

    command = f"haggler lab compare-protocols --runs {c.runs} --seed {c.seed} --out {out.as_posix()}"
    if report is not None:
        command += f" --report {path.as_posix()}"
    csv_paths = [p for p in plots if p.suffix == ".csv"]
    raw = f" (the raw numbers are in [`{link(csv_paths[0])}`]({link(csv_paths[0])}))" if csv_paths else ""
    lines = [f"# Protocol comparison ({c.runs} scenarios, seed {c.seed})", "",
             f"Generated by `{command}`{raw}. The structured protocols are played by the market's built-in "
             "agents (`haggler.agents.market`) under owner mandates made from each scenario (the seller's "
             "reservation is its `minAcceptablePrice`, the buyer's its `maxSpend`) and settled by the market's "
             "own rules: alternating offers run on `settlement.offer_rules`, the store's merchant strategy "
             "against the default shopper strategy behind the agents' negotiators; the sealed bid settles by "
             "`settlement.sealed_bid_price`; in the instant match the buyer agent decides and "
             "`settlement.instant_match_price` gives the price; the double auction clears with `auction.clear`. "
             "Free text is the real merchant and shopper agents talking through the text layer in process.", "",
             f"Double auction: each run clears a book of {BOOK_SIZE} sellers and {BOOK_SIZE} buyers of one item "
             f"— the run's scenario and the next {BOOK_SIZE - 1} (cyclically), their reservations rescaled to its "
             "list price — every agent ordering one unit at its limit. A scenario counts a deal when both its "
             "seller and its buyer trade, at the clearing price (whoever each traded with); its messages are its "
             "two orders, its wall time the whole book's.", "",
             "| Protocol | Deals | Success | Success (ZOPA) | Wall ms | Messages | Words | Seller share | Buyer share "
             "| Attacks resisted | Flagged |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in c.summaries:
        lines.append(f"| {s.label} | {s.deals}/{s.runs} | {_pct(s.success_rate)} | {_pct(s.success_rate_zopa)} | "
                     f"{s.mean_wall_seconds * 1000:.3f} | {s.mean_messages:.1f} | {s.mean_words:.1f} | "
                     f"{_pct(s.mean_seller_share)} | {_pct(s.mean_buyer_share)} | {_resisted(s.security)} | "
                     f"{s.security.flagged}/{s.security.attacks} |")
    lines += ["", "## Findings", "", " ".join(findings(c)), "", "## Security", "", *_security_section(c),
              "", "## Charts", ""]
    for p in plots:
        if p.suffix == ".png":
            lines.append(f"![{p.stem}]({link(p)})")
            lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _security_section(c: Comparison) -> list[str]:
    """How the security measure was taken, per protocol: the channel, and what got through."""
    attacks = c.summaries[0].security.attacks if c.summaries else 0
    lines = [f"Each of the {attacks} attacks of the red-team corpus (`src/haggler/data/market_red_team.json`) "
             "ran once against each protocol, attack *k* on scenario *k* mod runs, its text placed by the seller "
             "in every field of the protocol's free-text channel. **Resisted**: the outcome stays within both "
             "owners' mandates (`mandates.check` of both confirmations) and equals the outcome of the same run "
             "without the attack. **Flagged**: `suspicious_markers` found a marker in the fields that carried it "
             "(what the audit log records). The scenarios are priced in dollars and the attacks that state a price "
             "state it in euros: "
             "the shopper's reader takes no amount marked in a currency other than the deal's, so in free text "
             "such an attack's price is not read at all, and these figures do not say how the shopper fares "
             "against the same words in the deal's own currency.", "",
             "| Protocol | Free-text channel | Resisted | Flagged | Not resisted |", "|---|---|---:|---:|---|"]
    for s in c.summaries:
        r = s.security
        breaches = [f"`{b}`" + (" (outside a mandate)" if b in r.violations else "") for b in r.breaches]
        lines.append(f"| {s.label} | {CHANNELS[s.protocol]} | {_resisted(r)} | {r.flagged}/{r.attacks} | "
                     f"{', '.join(breaches) or '—'} |")
    return lines


def main_compare(runs: int, seed: int, out_dir: str | Path | None, console,  # type: ignore[no-untyped-def]
                 report: str | Path | None = None) -> Comparison:
    """The ``haggler lab compare-protocols`` command: run, print the table, and with
    ``out_dir`` write the CSV, the charts and the report (to ``report``, or ``out_dir/report.md``)."""
    comparison = compare_protocols(runs, seed)
    render_comparison(comparison, console)
    if out_dir is not None:
        paths = write_comparison(comparison, out_dir)
        written = write_report_md(comparison, out_dir, paths, report)
        for p in (*paths, written):
            console.print(f"wrote {p}")
    return comparison
