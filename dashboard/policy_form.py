"""Form widgets for a policy draft: thresholds, rules (enabled, weight, keyword lists, condition), sessions,
escalation and fleet warning. The draft is a plain dict (the YAML shape); widgets are keyed by a generation
number, so replacing the draft (YAML applied, new base version) gives fresh widgets with the new values.

Rows (thresholds, rules) carry a stable row id, given when the draft is set: widget keys and the slots that
show validation issues use it, not the row's position. Removing a row shifts the positions in the list that
is validated, so `thresholds[1]` in an issue may be the third row on screen; `slot_path` maps it back."""

from __future__ import annotations

import copy
import re
from itertools import count
from typing import Any

import streamlit as st
import yaml

from quantroute import yamlsafe
from quantroute.tiers import TIER_ORDER

TIERS = [t.value for t in TIER_ORDER]


def keyword_paths(cond: Any, path: str = "when") -> list[tuple[str, dict]]:
    """Every keywords condition inside a rule's condition tree, with its path (all/any/not nest)."""
    out: list[tuple[str, dict]] = []
    if isinstance(cond, dict):
        if "keywords" in cond and isinstance(cond["keywords"], dict):
            out.append((f"{path}.keywords", cond["keywords"]))
        for key in ("all", "any"):
            if isinstance(cond.get(key), list):
                for i, sub in enumerate(cond[key]):
                    out += keyword_paths(sub, f"{path}.{key}[{i}]")
        if "not" in cond:
            out += keyword_paths(cond["not"], f"{path}.not")
    return out


def split_words(text: str) -> list[str]:
    return [w.strip() for w in text.replace("\n", ",").split(",") if w.strip()]


ROWS = ("thresholds", "rules")


def row_ids(draft: dict, ids: count) -> dict[str, list[int]]:
    """Fresh stable ids for every row of the draft's lists (`ids` never repeats within a browser session)."""
    return {section: [next(ids) for _ in draft.get(section) or []] for section in ROWS}


def row_slot(section: str, rid: int) -> str:
    return f"{section}[#{rid}]"


def slot_path(path: str, kept: dict[str, list[int]]) -> str:
    """An issue path of the validated draft, with its leading `section[k]` replaced by the slot of the row
    that is k-th among the rows kept (not removed): `rules[2].when` -> `rules[#7].when`."""
    for section, ids in kept.items():
        m = re.match(rf"{re.escape(section)}\[(\d+)\]", path)
        if m and int(m.group(1)) < len(ids):
            return row_slot(section, ids[int(m.group(1))]) + path[m.end():]
    return path


def under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def placements(slots: Any, issues: list, kept: dict[str, list[int]]) -> tuple[list[tuple[str, Any]], list]:
    """(slot, issue) for each issue a slot owns (longest matching prefix, after mapping row positions to row
    ids), and the issues no slot takes. Pure: `slots` only needs its keys."""
    placed, left = [], []
    for i in issues:
        path = slot_path(i.path, kept)
        owner = max((p for p in slots if under(path, p)), key=len, default=None)
        if owner is None:
            left.append(i)
        else:
            placed.append((owner, i))
    return placed, left


def fill(slots: dict[str, Any], issues: list, kept: dict[str, list[int]]) -> list:
    """Show each validation issue in the slot of the form part it belongs to; returns the issues no slot took,
    for the summary."""
    placed, left = placements(slots, issues, kept)
    for owner, i in placed:
        slots[owner].error(f"`{i.path}`: {i.message}")
    return left


def thresholds(draft: dict, ids: list[int], gen: int, slots: dict) -> tuple[list[dict], list[int]]:
    """The thresholds kept (not removed) and their row ids."""
    st.markdown("**Thresholds**: a score at or above *min score* requires at least that tier; below all of them "
                f"the cheapest tier ({draft['tiers'][-1]['name'] if draft.get('tiers') else '?'}) is allowed.")
    out, kept = [], []
    for i, (rid, th) in enumerate(zip(ids, draft.get("thresholds", []))):
        c1, c2, c3 = st.columns([2, 2, 1])
        score = c1.number_input(f"min score #{i + 1}", value=float(th["min_score"]), step=0.5,
                                key=f"th{gen}_{rid}_score")
        tier = c2.selectbox(f"tier #{i + 1}", TIERS, index=TIERS.index(th["tier"]) if th["tier"] in TIERS else 0,
                            key=f"th{gen}_{rid}_tier")
        if not c3.checkbox("remove", key=f"th{gen}_{rid}_rm"):
            out.append({"min_score": score, "tier": tier})
            kept.append(rid)
        slots[row_slot("thresholds", rid)] = st.container()
    slots["thresholds"] = st.container()
    return out, kept


def rules(draft: dict, ids: list[int], gen: int, slots: dict, previous: list[str]) -> tuple[list[dict], list[int]]:
    """The rules kept (not removed) and their row ids. `previous`: last run's issue slot paths (they decide
    which rules open)."""
    out, kept = [], []
    for rid, rule in zip(ids, draft.get("rules", [])):
        mine = [p for p in previous if under(p, row_slot("rules", rid))]
        disabled = "" if rule.get("enabled", True) else ", disabled"
        label = f"{'⚠️ ' if mine else ''}{rule['name']}  (weight {rule['weight']:g}{disabled})"
        with st.expander(label, expanded=bool(mine)):
            r = copy.deepcopy(rule)
            c1, c2, c3 = st.columns([1, 1, 1])
            r["enabled"] = c1.checkbox("enabled", value=rule.get("enabled", True), key=f"r{gen}_{rid}_en")
            r["weight"] = c2.number_input("weight", value=float(rule["weight"]), step=0.5, key=f"r{gen}_{rid}_w")
            remove = c3.checkbox("remove rule", key=f"r{gen}_{rid}_rm")
            r["description"] = st.text_input("description", value=rule.get("description", ""), key=f"r{gen}_{rid}_d")
            when_text = st.text_area("condition (YAML)", value=yaml.safe_dump(rule["when"], sort_keys=False,
                                                                               allow_unicode=True, width=100),
                                     key=f"r{gen}_{rid}_when", height=120)
            try:
                r["when"] = yamlsafe.safe_load(when_text)
            except yaml.YAMLError as e:
                st.error(f"`{rule['name']}` condition: not valid YAML: {e}")
            for path, kw in keyword_paths(r["when"]):
                words = st.text_area(f"keywords at {path} (comma-separated)", value=", ".join(kw.get("any", [])),
                                     key=f"r{gen}_{rid}_{path}")
                kw["any"] = split_words(words)
            slots[row_slot("rules", rid)] = st.container()
        if not remove:
            out.append(r)
            kept.append(rid)
    return out, kept


def new_rule(gen: int) -> dict | None:
    """A form for one more rule; returns it when submitted."""
    with st.form(f"new_rule_{gen}", clear_on_submit=True):
        st.markdown("**Add a rule**")
        c1, c2 = st.columns([2, 1])
        name = c1.text_input("name (lowercase, digits, - _ .)")
        weight = c2.number_input("weight", value=1.0, step=0.5)
        words = st.text_input("keywords (comma-separated, matched in the whole prompt)")
        when_text = st.text_area("or a condition in YAML (overrides the keywords)", height=80)
        if not st.form_submit_button("Add rule"):
            return None
    when = yamlsafe.safe_load(when_text) if when_text.strip() else {"keywords": {"any": split_words(words)}}
    return {"name": name, "description": "", "weight": weight, "when": when, "enabled": True}


def settings(draft: dict, gen: int, slots: dict) -> dict:
    d = {}
    s = dict(draft.get("sessions", {}))
    st.markdown("**Sessions**")
    c1, c2, c3, c4 = st.columns(4)
    s["affinity"] = c1.checkbox("session affinity", value=s.get("affinity", True), key=f"s{gen}_aff")
    s["header"] = c2.text_input("session header", value=s.get("header", "x-session-id"), key=f"s{gen}_hdr")
    s["ttl_s"] = int(c3.number_input("pin TTL (s)", value=int(s.get("ttl_s", 3600)), min_value=1, key=f"s{gen}_ttl"))
    s["max_wait_ms"] = int(c4.number_input("max wait (ms)", value=int(s.get("max_wait_ms", 2000)), min_value=0,
                                           key=f"s{gen}_wait"))
    s["quiescence_s"] = int(c1.number_input("quiescence (s)", value=int(s.get("quiescence_s", 60)), min_value=0,
                                            key=f"s{gen}_q"))
    d["sessions"] = s
    slots["sessions"] = st.container()
    e = dict(draft.get("escalation", {}))
    st.markdown("**Escalation** (unpinned requests may go up the ladder when their tier is full; never down)")
    c1, c2 = st.columns(2)
    e["enabled"] = c1.checkbox("escalation enabled", value=e.get("enabled", True), key=f"e{gen}_en")
    mt = e.get("max_tier", "fp16")
    e["max_tier"] = c2.selectbox("highest tier to escalate to", TIERS, index=TIERS.index(mt) if mt in TIERS else 0,
                                 key=f"e{gen}_max")
    d["escalation"] = e
    slots["escalation"] = st.container()
    h = dict(draft.get("headers", {}))
    h["allow_lower"] = st.checkbox("x-min-tier may lower the tier below what the score requires",
                                   value=h.get("allow_lower", False), key=f"h{gen}_low")
    d["headers"] = h
    fw = dict(draft.get("fleet_warning", {}))
    fw["top_tier_share"] = st.slider("fleet warning: top-tier share of traffic above", 0.05, 1.0,
                                     float(fw.get("top_tier_share", 0.7)), 0.05, key=f"fw{gen}")
    d["fleet_warning"] = fw
    return d
