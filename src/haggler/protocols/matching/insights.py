"""Negotiation insights (spec 002, "Negotiation Insights"): which match types reach accept or
reject, the objections agents raise most, and how many turns negotiations take, by scenario.

Built from the completed negotiations' turns and outcomes only. No score appears anywhere in it:
the spec keeps digest analysis to reasoning and action patterns.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from sqlalchemy import Connection, select

from haggler.agents.match_text import THEMES, concepts
from haggler.protocols.matching.negotiations import COMPLETED, TIMEOUT, TURN_CAP
from haggler.storage.schema import a2a_artifacts, a2a_messages, a2a_tasks, opportunities

TOP_THEMES = 10
#: Objecting turns: v1's counter and reject, and v2's withdraw and decline.
_OBJECTING = ("counter", "reject", "withdraw", "decline")


def _scenario(task: Any) -> str:
    personal = int(task.source_personal) + int(task.candidate_personal)
    return ("system-system", "mixed", "personal-personal")[personal]


def insights(conn: Connection) -> dict[str, Any]:
    rows = conn.execute(select(a2a_tasks, a2a_artifacts.c.data.label("outcome"), opportunities.c.seed)
                        .join(a2a_artifacts, a2a_artifacts.c.task_id == a2a_tasks.c.id)
                        .join(opportunities, opportunities.c.id == a2a_tasks.c.opportunity_id)
                        .where(a2a_tasks.c.state == COMPLETED)).all()
    by_type: dict[str, Counter[str]] = defaultdict(Counter)
    turn_counts: dict[str, Counter[int]] = defaultdict(Counter)
    for row in rows:
        outcome = json.loads(row.outcome)
        result = ("accepted" if outcome["hasOpportunity"] else
                  "stalled" if outcome.get("reason") in (TURN_CAP, TIMEOUT) else "rejected")
        by_type[json.loads(row.seed)["valencyRole"]][result] += 1
        turn_counts[_scenario(row)][outcome["turnCount"]] += 1
    themes: Counter[str] = Counter()
    objections = 0
    for data in conn.execute(select(a2a_messages.c.data)).scalars():
        turn = json.loads(data)
        if turn["action"] in _OBJECTING:
            objections += 1
            themes.update(concepts(turn["assessment"]["reasoning"]) & THEMES)
    return {
        "negotiations": len(rows),
        "byMatchType": {kind: _rates(counts) for kind, counts in sorted(by_type.items())},
        "objectionThemes": [{"theme": theme, "turns": n} for theme, n in themes.most_common(TOP_THEMES)],
        "objectingTurns": objections,
        "turnCounts": {scenario: {str(k): v for k, v in sorted(counts.items())}
                       for scenario, counts in sorted(turn_counts.items())},
    }


def _rates(counts: Counter[str]) -> dict[str, Any]:
    total = sum(counts.values())
    return {"negotiations": total, **{f"{kind}Rate": round(counts[kind] / total, 3)
                                       for kind in ("accepted", "rejected", "stalled")},
            **{kind: counts[kind] for kind in ("accepted", "rejected", "stalled")}}
