"""Validate the v2 match-pair files (tuning and held-out) and print their counts.

Checks shape only; it does not judge any pair.  Run: python benchmarks/check_match_pairs_v2.py
"""
import collections
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = {"tune": ROOT / "tests/agents/match_pairs_tune_v2.json",
         "heldout": ROOT / "benchmarks/data/match_pairs_heldout_v2.json"}
CATS = ("good", "superficial", "one_sided")
CONDS = {"money", "place", "level", "schedule", "language", "stack", "other"}
ROLES = {"peer", "agent", "patient"}


def check_side(pid, side, s, errs):
    if not isinstance(s, dict) or not s.get("userId"):
        errs.append(f"{pid}.{side}: missing userId")
        return
    prof = s.get("profile", {})
    for f in ("name", "role", "bio"):
        if not isinstance(prof.get(f), str) or not prof[f].strip():
            errs.append(f"{pid}.{side}.profile.{f} missing")
    for f in ("offers", "seeks"):
        if not isinstance(prof.get(f), list) or not prof[f]:
            errs.append(f"{pid}.{side}.profile.{f} missing or empty")
    for it in s.get("intents", None) or []:
        if not it.get("description"):
            errs.append(f"{pid}.{side}: intent without description")
    if not isinstance(s.get("intents"), list):
        errs.append(f"{pid}.{side}.intents not a list")


def main():
    errs, seen, allp = [], {}, []
    for split, path in FILES.items():
        d = json.loads(path.read_text())
        if not d.get("about"):
            errs.append(f"{split}: no about")
        if split == "heldout" and "not to be read while tuning" not in d["about"].lower():
            errs.append("heldout about lacks 'not to be read while tuning'")
        for p in d["pairs"]:
            pid = p.get("id")
            if pid in seen:
                errs.append(f"duplicate id {pid} ({seen[pid]}, {split})")
            seen[pid] = split
            cat = p.get("category")
            if cat not in CATS:
                errs.append(f"{pid}: bad category {cat}")
            if not p.get("domain"):
                errs.append(f"{pid}: no domain")
            if not p.get("why"):
                errs.append(f"{pid}: no why")
            seed = p.get("seed", {})
            if not (isinstance(seed.get("score"), int) and 0 <= seed["score"] <= 100):
                errs.append(f"{pid}: bad seed.score")
            if not seed.get("reasoning") or seed.get("valencyRole") not in ROLES:
                errs.append(f"{pid}: bad seed")
            if cat == "one_sided" and p.get("gets_nothing") not in ("a", "b"):
                errs.append(f"{pid}: one_sided without gets_nothing a/b")
            if cat != "one_sided" and "gets_nothing" in p:
                errs.append(f"{pid}: gets_nothing on {cat}")
            if "condition" in p or "unmet" in p:
                if cat != "superficial":
                    errs.append(f"{pid}: condition on {cat}")
                if p.get("condition") not in CONDS or not p.get("unmet"):
                    errs.append(f"{pid}: bad condition/unmet")
                else:
                    text = json.dumps([p["a"]["profile"], p["a"]["intents"], p["b"]["profile"], p["b"]["intents"]], ensure_ascii=False)
                    for num in re.findall(r"\d[\d,.]*", p["unmet"]):
                        if num.rstrip(".,") not in text:
                            errs.append(f"{pid}: unmet number {num} not in the profiles")
            for side in ("a", "b"):
                check_side(pid, side, p.get(side), errs)
            allp.append((split, p))
    doms = collections.Counter(p["domain"] for _, p in allp)
    if len(doms) < 16:
        errs.append(f"only {len(doms)} domains")
    if len(allp) < 240:
        errs.append(f"only {len(allp)} pairs")
    for split in FILES:
        sd = {p["domain"] for s, p in allp if s == split}
        sc = {p["category"] for s, p in allp if s == split}
        if sd != set(doms):
            errs.append(f"{split}: missing domains {set(doms) - sd}")
        if sc != set(CATS):
            errs.append(f"{split}: missing categories {set(CATS) - sc}")

    print(f"pairs: {len(allp)}  domains: {len(doms)}")
    for split in FILES:
        c = collections.Counter(p["category"] for s, p in allp if s == split)
        print(f"  {split:8s} {sum(c.values()):3d}  " + "  ".join(f"{k}={c[k]}" for k in CATS))
    c = collections.Counter(p["category"] for _, p in allp)
    print("  all      " + f"{len(allp):3d}  " + "  ".join(f"{k}={c[k]} ({100 * c[k] / len(allp):.0f}%)" for k in CATS))
    cond = collections.Counter(p["condition"] for _, p in allp if "condition" in p)
    print(f"superficial with a condition: {sum(cond.values())} of {c['superficial']}: " + ", ".join(f"{k}={v}" for k, v in sorted(cond.items())))
    gn = collections.Counter(p["gets_nothing"] for _, p in allp if p["category"] == "one_sided")
    print(f"one_sided gets_nothing: a={gn['a']} b={gn['b']}")
    print("per domain (tune/heldout; good/superficial/one_sided):")
    for dom in sorted(doms):
        row = []
        for split in FILES:
            c = collections.Counter(p["category"] for s, p in allp if s == split and p["domain"] == dom)
            row.append(f"{split}={sum(c.values()):2d} ({c['good']}/{c['superficial']}/{c['one_sided']})")
        print(f"  {dom:18s} {doms[dom]:2d}  " + "  ".join(row))
    if errs:
        print("ERRORS:")
        for e in errs:
            print("  " + e)
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
