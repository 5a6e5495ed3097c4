"""Fleet: nodes with live load, per-tier throughput / errors / queue over time, share of traffic per tier and
the fleet-composition warning (seed 000: when most traffic needs the top tier, add top-tier nodes or revisit
the classifier; routing cannot fix it)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd
import streamlit as st

from dashboard import charts, data

WINDOWS = {"5 min": (300, 5), "15 min": (900, 15), "1 h": (3600, 60), "6 h": (21600, 300), "24 h": (86400, 900)}


def nodes_frame(nodes: list[dict], quiescence_s: int) -> pd.DataFrame:
    now = datetime.now(timezone.utc)
    rows = []
    for n in nodes:
        started = datetime.fromisoformat(n["generation_started"])
        until = started + timedelta(seconds=quiescence_s)
        rows.append({"node": n["key"], "deployment": n["deployment"], "tier": n["tier"], "hardware": n["hardware"],
                     "generation": n["generation"], "healthy": n["healthy"],
                     # only a re-registered node (generation > 1) is quiescent, as the router decides
                     "quiescent until": until.strftime("%H:%M:%S") if n["generation"] > 1 and until > now else "",
                     "in-flight": n["inflight"], "waiting": n["waiting"],
                     "KV use": n.get("kv_usage"), "last error": n.get("last_error") or ""})
    return pd.DataFrame(rows)


def composition_warning(share: pd.DataFrame, top_tier: str, limit: float) -> str | None:
    top = share.loc[share["tier"] == top_tier, "share"].sum() if not share.empty else 0.0
    if top > limit:
        return (f"{top:.0%} of traffic needs {top_tier} (limit {limit:.0%}): a fleet-composition problem, not "
                f"a routing one. Add {top_tier} nodes, or check whether the rules score too many requests as "
                "sensitive (Policy → what-if replay).")
    return None


def _sample_queue(nodes: list[dict]) -> pd.DataFrame:
    """Waiting requests per tier, sampled on every run of the fleet state (live: every refresh) while the page
    is open (the request log has no queue)."""
    hist = st.session_state.setdefault("queue_samples", [])
    now = pd.Timestamp.now(tz="UTC")
    per_tier: dict[str, int] = {}
    for n in nodes:
        per_tier[n["tier"]] = per_tier.get(n["tier"], 0) + int(n["waiting"] or 0)
    hist.extend({"time": now, "tier": t, "waiting": w} for t, w in per_tier.items())
    del hist[:-2000]
    return pd.DataFrame(hist)


LIVE_EVERY_S = 5


def render() -> None:
    """The controls run with the page; everything that shows fleet state is a fragment, which re-runs on its
    own every LIVE_EVERY_S seconds while Live is on. Nothing sleeps in the script, so a click elsewhere on
    the page (or in the navigation) is handled at once."""
    st.title("Fleet")
    c1, c2 = st.columns([1, 3])
    label = c1.selectbox("Window", list(WINDOWS), index=1)
    live = c2.toggle(f"Live (refresh every {LIVE_EVERY_S} s)", value=False, key="fleet_live")
    st.fragment(fleet_state, run_every=LIVE_EVERY_S if live else None)(label)


def fleet_state(label: str) -> None:
    """Nodes, composition warning, per-tier charts and shares over the chosen window."""
    window_s, bucket_s = WINDOWS[label]
    s = data.settings()
    policy = data.store().active()

    nodes, why = data.router_call("nodes")
    st.subheader("Nodes")
    if nodes is None:
        st.warning(f"live node state unavailable: {why}")
    else:
        st.dataframe(nodes_frame(nodes, policy.sessions.quiescence_s), hide_index=True, width="stretch",
                     column_config={"KV use": st.column_config.ProgressColumn("KV use", min_value=0, max_value=1,
                                                                              format="percent")})

    share = data.tier_share(s.db_url, window_s)
    top_tier = policy.tier_ladder()[0].value
    warning = composition_warning(share, top_tier, policy.fleet_warning.top_tier_share)
    if warning:
        st.error(warning, icon="⚠️")

    ts = data.tier_timeseries(s.db_url, window_s, bucket_s)
    st.subheader(f"Per tier, last {label}")
    if ts.empty:
        st.info("no requests logged in this window yet")
    else:
        a, b = st.columns(2)
        a.altair_chart(charts.tier_timeseries(ts, "rps"), width="stretch")
        b.altair_chart(charts.tier_timeseries(ts, "tokens_s"), width="stretch")
        a.altair_chart(charts.tier_timeseries(ts, "error_rate"), width="stretch")
        if nodes is not None:
            b.altair_chart(charts.tier_timeseries(_sample_queue(nodes), "waiting"), width="stretch")
    if not share.empty:
        st.altair_chart(charts.tier_share(share, policy.fleet_warning.top_tier_share), width="stretch")
        st.dataframe(data.deployment_summary(s.db_url, window_s), hide_index=True, width="stretch")
