"""Audit: every action by anyone (policy versions, approvals, activations, rollbacks, rollouts, unpins,
eval runs, node registrations), filterable by who, what and text."""

from __future__ import annotations

import json

import streamlit as st

from dashboard import data


def render() -> None:
    st.title("Audit")
    s = data.settings()
    actors, actions = data.audit_facets(s.db_url)
    c1, c2, c3, c4 = st.columns([1, 1, 2, 1])
    actor = c1.selectbox("Who", ["(anyone)", *actors])
    prefixes = sorted({a.split(".")[0] for a in actions})
    what = c2.selectbox("What", ["(everything)", *prefixes, *actions])
    search = c3.text_input("Subject or detail contains")
    limit = c4.number_input("Rows", 10, 5000, 500, 50)
    df = data.audit_events(s.db_url, None if actor == "(anyone)" else actor,
                           None if what == "(everything)" else what, search or None, int(limit))
    if not df.empty:
        df["detail"] = df["detail"].map(lambda d: d if isinstance(d, str) else json.dumps(d))
    st.caption(f"{len(df)} event(s), newest first")
    st.dataframe(df, hide_index=True, width="stretch")
