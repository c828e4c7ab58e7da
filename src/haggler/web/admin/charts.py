"""Charts drawn on the server as SVG inside the page: readable with JavaScript off, the same
bytes for the same data, and accessible.

Each chart is a ``<figure id=chart-…>`` holding an ``<svg role=img>`` named by its ``<title>``
and described by its ``<desc>`` (a sentence with the figures), a caption, and the data as a
table in a ``<details>`` for screen readers and for copying. Every mark carries ``data-label``
and ``data-value``, the hooks a browser test reads. Every label is escaped (a product name or a
date is text, never markup), and the SVG is well-formed XML.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Sequence

WIDTH = 640
HEIGHT = 240
_TOP, _BOTTOM, _LEFT, _RIGHT = 24, 40, 36, 8
_BAR = "#2f6fb3"
_INK = "#1d2530"
_RULE = "#9aa5b1"
#: Colours of a stacked bar's segments, in order (all at least 3:1 against white).
SEGMENT_COLOURS = ("#2e7d32", "#b3261e", "#8a5a00", "#5b6470", "#6a3fa0", "#00697a")


@dataclass(frozen=True, slots=True)
class Mark:
    """One bar or segment: its label, its value, and the value as people read it."""

    label: str
    value: int
    #: The tick under a bar (default: the label), shorter where space is tight (a date's month-day).
    tick: str | None = None


def _n(x: float) -> str:
    """A coordinate with at most one decimal and no trailing zeros: deterministic, compact."""
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _svg_open(chart_id: str, title: str, description: str, height: int = HEIGHT) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="100%" '
            f'role="img" aria-labelledby="{chart_id}-title {chart_id}-desc">'
            f'<title id="{chart_id}-title">{escape(title)}</title><desc id="{chart_id}-desc">{escape(description)}</desc>')


def _data_table(chart_id: str, heading: str, unit: str, marks: Sequence[Mark]) -> str:
    rows = "".join(f"<tr><th scope=row>{escape(m.label)}</th><td>{m.value}</td></tr>" for m in marks)
    return (f"<details><summary>The data</summary><table id={chart_id}-data><thead><tr><th scope=col>{escape(heading)}"
            f"</th><th scope=col>{escape(unit)}</th></tr></thead><tbody>{rows}</tbody></table></details>")


def bar_chart(chart_id: str, title: str, description: str, marks: Sequence[Mark], *, heading: str,
              unit: str) -> str:
    """Vertical bars from a zero baseline, each as high as its value over the largest (all flat
    when every value is 0); each value is written above its bar, each label (``tick``) under it."""
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    top = max((m.value for m in marks), default=0)
    slot = plot_w / max(len(marks), 1)
    base = _TOP + plot_h
    parts = [_svg_open(chart_id, title, description),
             f'<line x1="{_LEFT}" y1="{base}" x2="{WIDTH - _RIGHT}" y2="{base}" stroke="{_RULE}"/>',
             f'<text x="{_LEFT - 4}" y="{_TOP + 4}" text-anchor="end" font-size="11" fill="{_INK}" aria-hidden="true">'
             f'{top}</text>',
             f'<line x1="{_LEFT}" y1="{_TOP}" x2="{WIDTH - _RIGHT}" y2="{_TOP}" stroke="{_RULE}" stroke-dasharray="3 3"/>']
    for i, mark in enumerate(marks):
        height = plot_h * mark.value / top if top else 0
        x, y = _LEFT + i * slot + slot * 0.15, base - height
        middle = _n(_LEFT + (i + 0.5) * slot)
        label = escape(mark.label)
        parts.append(f'<rect class="bar" x="{_n(x)}" y="{_n(y)}" width="{_n(slot * 0.7)}" height="{_n(height)}" '
                     f'fill="{_BAR}" data-label="{label}" data-value="{mark.value}">'
                     f'<title>{label}: {mark.value} {escape(unit)}</title></rect>')
        parts.append(f'<text x="{middle}" y="{_n(y - 4)}" text-anchor="middle" font-size="11" fill="{_INK}" '
                     f'aria-hidden="true">{mark.value}</text>')
        parts.append(f'<text x="{middle}" y="{base + 16}" text-anchor="middle" font-size="11" fill="{_INK}" '
                     f'aria-hidden="true">{escape(mark.tick or mark.label)}</text>')
    parts.append("</svg>")
    return (f"<figure id={chart_id} class=chart>{''.join(parts)}<figcaption>{escape(description)}</figcaption>"
            f"{_data_table(chart_id, heading, unit, marks)}</figure>")


def stacked_bar(chart_id: str, title: str, description: str, marks: Sequence[Mark], *, heading: str,
                unit: str) -> str:
    """One horizontal bar split into segments as wide as each value's share of the whole, with a
    legend naming each colour (colour is never the only way a segment is told apart)."""
    width, height, y = WIDTH - _LEFT - _RIGHT, 36, 30
    total = sum(m.value for m in marks)
    parts = [_svg_open(chart_id, title, description, 96),
             f'<rect x="{_LEFT}" y="{y}" width="{width}" height="{height}" fill="none" stroke="{_RULE}"/>']
    x = float(_LEFT)
    for i, mark in enumerate(marks):
        share = width * mark.value / total if total else 0
        label = escape(mark.label)
        parts.append(f'<rect class="segment" x="{_n(x)}" y="{y}" width="{_n(share)}" height="{height}" '
                     f'fill="{SEGMENT_COLOURS[i % len(SEGMENT_COLOURS)]}" data-label="{label}" '
                     f'data-value="{mark.value}"><title>{label}: {mark.value} {escape(unit)}</title></rect>')
        x += share
    parts.append("</svg>")
    legend = "".join(f"<li><span class=swatch style='background:{SEGMENT_COLOURS[i % len(SEGMENT_COLOURS)]}'>"
                     f"</span>{escape(m.label)}: {m.value}</li>" for i, m in enumerate(marks))
    return (f"<figure id={chart_id} class=chart>{''.join(parts)}<ul class=legend>{legend}</ul>"
            f"<figcaption>{escape(description)}</figcaption>{_data_table(chart_id, heading, unit, marks)}</figure>")
