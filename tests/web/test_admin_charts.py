"""The server's SVG charts: well-formed, proportional, escaped, accessible and deterministic; and
the dashboard's pages drawing them from the store's real figures."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from haggler.web.admin.charts import Mark, bar_chart, stacked_bar
from tests.support.admin import admin_store, play, signed_in_client

SVG = "{http://www.w3.org/2000/svg}"


def svg_of(figure: str) -> ET.Element:
    return ET.fromstring(re.search(r"<svg.*?</svg>", figure, re.S).group(0))


def bars(root: ET.Element, kind: str = "bar") -> list[ET.Element]:
    return [r for r in root.iter(f"{SVG}rect") if r.get("class") == kind]


MARKS = [Mark("2026-11-20", 2, tick="11-20"), Mark("2026-11-21", 0, tick="11-21"), Mark("2026-11-22", 5, tick="11-22")]


def test_bar_heights_are_proportional_to_the_values_from_a_common_baseline():
    root = svg_of(bar_chart("chart-x", "Deals per day", "Three days.", MARKS, heading="Day", unit="deals"))
    found = bars(root)
    assert [(b.get("data-label"), int(b.get("data-value"))) for b in found] == [(m.label, m.value) for m in MARKS]
    heights = [float(b.get("height")) for b in found]
    assert heights[1] == 0 and heights[2] > heights[0] > 0
    assert heights[0] / heights[2] == pytest.approx(2 / 5, abs=0.01)
    assert len({round(float(b.get("y")) + float(b.get("height")), 1) for b in found}) == 1  # one baseline
    assert len({b.get("width") for b in found}) == 1


def test_every_value_zero_draws_flat_bars_not_a_division_by_zero():
    root = svg_of(bar_chart("chart-z", "None", "Nothing yet.", [Mark("a", 0), Mark("b", 0)], heading="h", unit="u"))
    assert [float(b.get("height")) for b in bars(root)] == [0, 0]


def test_the_chart_is_named_described_and_carries_its_data_as_a_table():
    figure = bar_chart("chart-x", "Deals per day", "Seven deals in three days.", MARKS, heading="Day", unit="deals")
    root = svg_of(figure)
    assert root.get("role") == "img" and root.get("aria-labelledby") == "chart-x-title chart-x-desc"
    assert root.find(f"{SVG}title").text == "Deals per day" and root.find(f"{SVG}desc").get("id") == "chart-x-desc"
    assert figure.startswith("<figure id=chart-x class=chart>")
    assert "<th scope=row>2026-11-22</th><td>5</td>" in figure and "<figcaption>Seven deals" in figure


def test_labels_are_escaped_text_never_markup():
    evil = '<script>alert("x")</script> & "quoted" \'single\''
    for draw in (bar_chart, stacked_bar):
        figure = draw("chart-e", evil, evil, [Mark(evil, 3), Mark("plain", 1)], heading=evil, unit="u")
        assert "<script>" not in figure
        root = svg_of(figure)  # still well-formed XML
        assert root.find(f"{SVG}title").text == evil
        assert evil in [r.get("data-label") for r in root.iter(f"{SVG}rect")]


def test_output_is_deterministic():
    one = bar_chart("chart-x", "T", "D", MARKS, heading="h", unit="u") + stacked_bar("c", "T", "D", MARKS, heading="h",
                                                                                     unit="u")
    two = bar_chart("chart-x", "T", "D", list(MARKS), heading="h", unit="u") + stacked_bar("c", "T", "D", list(MARKS),
                                                                                           heading="h", unit="u")
    assert one == two


def test_stacked_segments_share_the_width_by_value():
    root = svg_of(stacked_bar("chart-o", "Outcomes", "D", [Mark("agreed", 3), Mark("rejected", 1), Mark("expired", 0)],
                              heading="Outcome", unit="chats"))
    widths = {s.get("data-label"): float(s.get("width")) for s in bars(root, "segment")}
    assert widths["agreed"] == pytest.approx(3 * widths["rejected"], abs=0.1) and widths["expired"] == 0


def test_the_overview_chart_moves_when_a_deal_is_made(make_store):
    store = admin_store(make_store)
    http = signed_in_client(store)

    def today() -> tuple[int, list[int]]:
        root = svg_of(re.search(r"<figure id=chart-deals-per-day.*?</figure>", http.get("/admin").text, re.S).group(0))
        found = bars(root)
        assert len(found) == 14 and found[-1].get("data-label") == store.clock().date().isoformat()
        return int(found[-1].get("data-value")), [int(b.get("data-value")) for b in found[:-1]]

    before, earlier = today()
    played = play(store, "stillair-p400", "deal")
    after, still_earlier = today()
    assert (before, after, earlier, still_earlier) == (0, 1, [0] * 13, [0] * 13)
    page = http.get("/admin").text
    assert played.chat_id in page and "id=table-recent-deals" in page
    outcomes = svg_of(re.search(r"<figure id=chart-outcomes.*?</figure>", page, re.S).group(0))
    assert {s.get("data-label"): s.get("data-value") for s in bars(outcomes, "segment")}["agreed"] == "1"
