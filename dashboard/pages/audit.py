"""Audit: every action by anyone (policy versions, approvals, activations, rollbacks, rollouts, unpins,
eval runs, node registrations), refused attempts included, filterable by who, what, outcome and text."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from dashboard import data, fmt, ui


def _detail(d) -> dict:
    if isinstance(d, str):
        try:
            d = json.loads(d)
        except ValueError:
            return {"text": d}
    return d if isinstance(d, dict) else {}


def outcome(detail: dict) -> str:
    if detail.get("refused"):
        return f"refused: {detail['refused']}"
    if detail.get("implicit"):
        return f"implicit: {detail.get('comment', '')}".rstrip(": ")
    return "done"


def detail_text(detail: dict) -> str:
    """The detail as "key: value; ..." (no JSON braces), without what the outcome column already says."""
    rest = {k: v for k, v in detail.items() if k not in ("refused", "implicit")}
    return "; ".join(f"{k}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in rest.items())


def _versions(before, after) -> str:
    """"v3 → v4", or just the one that is known ("v3" for an approval of version 3)."""
    if pd.isna(before) or pd.isna(after):
        return fmt.version(after) if pd.notna(after) else fmt.version(before) if pd.notna(before) else ""
    return fmt.change(fmt.version(before), fmt.version(after))


def events_frame(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return pd.DataFrame(columns=["at", "who", "action", "outcome", "subject", "policy version", "detail"])
    details = df["detail"].map(_detail)
    return pd.DataFrame({
        "at": df["at"].map(fmt.when), "who": df["actor"], "action": df["action"],
        "outcome": details.map(outcome), "subject": df["subject"],
        "policy version": [_versions(b, a) for b, a in zip(df["version_before"], df["version_after"])],
        "detail": details.map(detail_text)})


def render() -> None:
    st.title("Audit")
    s = data.settings()
    actors, actions = data.audit_facets(s.db_url)
    c1, c2, c3, c4, c5 = st.columns([1, 1, 2, 1, 1])
    actor = c1.selectbox("Who", ["(anyone)", *actors])
    prefixes = sorted({a.split(".")[0] for a in actions})
    what = c2.selectbox("What", ["(everything)", *prefixes, *actions])
    search = c3.text_input("Subject or detail contains")
    limit = c4.number_input("Rows", 10, 5000, 500, 50)
    refused_only = c5.toggle("Refused only", key="audit_refused")
    df = data.audit_events(s.db_url, None if actor == "(anyone)" else actor,
                           None if what == "(everything)" else what, search or None, int(limit))
    frame = events_frame(df)
    if refused_only:
        frame = frame[frame["outcome"].str.startswith("refused")]
    n_refused = int(frame["outcome"].str.startswith("refused").sum()) if not frame.empty else 0
    st.caption(f"{len(frame)} event(s), newest first; {n_refused} refused attempt(s)")
    ui.table(frame, "audit")
