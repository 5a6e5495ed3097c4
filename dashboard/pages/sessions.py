"""Sessions: live session pins (tier and canary arm fixed by a session's first request), searchable, with
counts per tier, the waits and 503s that pinning caused, and unpin with confirmation (audited)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import actions, data, fmt, ui
from quantroute.admin_client import counter_by_label


def filter_pins(pins: pd.DataFrame, *, search: str = "", tiers: list[str] | None = None,
                arms: list[str] | None = None) -> pd.DataFrame:
    out = pins
    if search:
        out = out[out["session_key"].str.contains(search, case=False, regex=False)]
    if tiers:
        out = out[out["tier"].isin(tiers)]
    if arms:
        out = out[out["arm"].fillna("none").isin(arms)]
    return out


def pinning_costs(metrics_text: str | None, failures: pd.DataFrame) -> pd.DataFrame:
    """Per tier: waits for capacity (router counter since start) and pinned 503s (counter and request log)."""
    waits = counter_by_label(metrics_text, "quantroute_session_waits_total", "tier") if metrics_text else {}
    pinned503: dict[str, float] = {}
    if metrics_text:
        for line in metrics_text.splitlines():
            if line.startswith("quantroute_no_capacity_total{") and 'pinned="true"' in line:
                tier = line.split('tier="', 1)[1].split('"', 1)[0]
                pinned503[tier] = pinned503.get(tier, 0) + float(line.rsplit(" ", 1)[1])
    logged = dict(zip(failures["tier"], failures["pinned_503s"])) if not failures.empty else {}
    tiers = sorted(set(waits) | set(pinned503) | set(logged), key=lambda t: (fmt.tier_rank(t), str(t)))
    return pd.DataFrame([{"tier": t, "waits (since router start)": int(waits.get(t, 0)),
                          "pinned 503s (since router start)": int(pinned503.get(t, 0)),
                          "pinned 503s (request log, 1 h)": int(logged.get(t, 0))} for t in tiers])


def tier_counts(pins: pd.DataFrame) -> list[tuple[str, int]]:
    """Pins per tier in fidelity order (fp16 first), of the sessions given (the filtered ones)."""
    if pins.empty:
        return []
    counts = pins.groupby("tier").size()
    return [(t, int(counts[t])) for t in sorted(counts.index, key=lambda t: (fmt.tier_rank(t), str(t)))]


def pins_frame(pins: pd.DataFrame) -> pd.DataFrame:
    """The pins as the table shows them: human timestamps, "–" for no arm, and how many requests took their
    tier from the pin (the router's `x-quantroute-pinned: true`)."""
    if pins.empty:
        return pd.DataFrame(columns=["session", "model", "tier", "arm", "pinned since", "requests",
                                     "routed by the pin", "last seen", "policy version"])
    return pd.DataFrame({"session": pins["session_key"], "model": pins["model"], "tier": pins["tier"],
                         "arm": pins["arm"].fillna(fmt.DASH), "pinned since": pins["since"].map(fmt.when),
                         "requests": pins["requests"].astype(int),
                         "routed by the pin": pins["routed_by_pin"].astype(int),
                         "last seen": pins["last_seen"].map(fmt.when),
                         "policy version": pins["policy_version"].map(fmt.version)})


def render() -> None:
    st.title("Sessions")
    ui.flash()
    s = data.settings()
    pins = data.pinned_sessions(s.db_url)
    c1, c2, c3 = st.columns([2, 1, 1])
    search = c1.text_input("Search session key")
    present = set(pins["tier"]) if not pins.empty else set()
    tiers = c2.multiselect("Tier", sorted(present, key=lambda t: (fmt.tier_rank(t), str(t))))
    arms = c3.multiselect("Arm", ["baseline", "candidate", "none"])
    shown = filter_pins(pins, search=search, tiers=tiers, arms=arms) if not pins.empty else pins

    counts = tier_counts(shown)  # the counters follow the filters, like the table
    if counts:
        cols = st.columns(len(counts))
        for col, (tier, n) in zip(cols, counts):
            col.metric(f"pinned to {tier}", n)
    metrics_text, why = data.router_call("metrics")
    costs = pinning_costs(metrics_text, data.pin_failures(s.db_url, 3600))
    st.markdown("**What pinning cost**: requests that waited for room on their pinned tier, "
                "and those that gave up with 503")
    if costs.empty:
        st.caption("no waits or pinned 503s" + (f" (router: {why})" if why else ""))
    else:
        ui.table(costs, "pinning-costs")

    st.subheader(f"Pinned sessions ({len(shown)} of {len(pins)})")
    st.caption("A pinned session's later requests keep its tier whatever their own score: the router marks "
               "those responses `x-quantroute-pinned: true` (column *routed by the pin*).")
    ui.table(pins_frame(shown), "pinned-sessions")

    if ui.can("session.unpin") and not shown.empty:
        st.markdown("**Unpin a session**: its next request is classified afresh and may land on another tier.")
        key = st.selectbox("Session", shown["session_key"].tolist(), key="unpin_key")
        if st.button("Unpin…"):
            st.session_state["unpin_pending"] = key
        pending = st.session_state.get("unpin_pending")
        if pending:
            st.warning(f"Unpin session `{pending}`? Its conversation may continue on a different tier.")
            a, b = st.columns(2)
            if a.button("Confirm unpin", type="primary"):
                st.session_state.pop("unpin_pending")
                ui.run_action(actions.unpin_session, engine=data.engine(), router=data.router(),
                              actor=ui.user().name, session_key=pending, failed=f"unpin session {pending}",
                              done=lambda found: (f"Session {pending} unpinned: its next request is scored "
                                                  "afresh and may land on another tier." if found else
                                                  f"Session {pending} had no pin any more (expired or already "
                                                  "unpinned); nothing to do."))
                st.rerun()
            if b.button("Cancel"):
                st.session_state.pop("unpin_pending")
                st.rerun()
