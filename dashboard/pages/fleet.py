"""Fleet: nodes with live load, per-tier throughput / errors / latency / TTFT / queue over the page's time
window, share of traffic per tier and the fleet-composition warning (seed 000: when most traffic needs the top
tier, add top-tier nodes or revisit the classifier; routing cannot fix it)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import streamlit as st

from dashboard import charts, data, fmt, ui
from quantroute.clock import utcnow

# label -> (window s, bucket s); buckets of whole minutes above 30 min, so those windows read the rollup
WINDOWS = {"5 min": (300, 5), "15 min": (900, 15), "1 h": (3600, 60), "6 h": (21600, 300), "24 h": (86400, 900)}
CUSTOM = "custom…"
MAX_CUSTOM_MIN = 30 * 24 * 60  # 30 days: the request log's usual retention
LIVE_EVERY_S = 5


def window_for(minutes: int) -> tuple[int, int]:
    """(window s, bucket s) for a custom window: about 60 points; whole-minute buckets above 30 min."""
    if minutes < 1 or minutes > MAX_CUSTOM_MIN:
        raise ValueError(f"window: {minutes} min is outside 1 to {MAX_CUSTOM_MIN} min (30 days)")
    window_s = minutes * 60
    bucket = max(5, window_s // 60)
    if window_s > 1800:
        bucket = max(60, bucket // 60 * 60)
    return window_s, int(bucket)


def window_label(minutes: int) -> str:
    if minutes % 1440 == 0:
        return f"{minutes // 1440} d"
    if minutes % 60 == 0:
        return f"{minutes // 60} h"
    return f"{minutes} min"


NODE_COLUMNS = {  # widths in px (sum ~935): the table fits the main area of a 1400 px window, no scrolling
    "node": st.column_config.TextColumn("node", width=95),
    "deployment": st.column_config.TextColumn("deployment", width=185),
    "tier": st.column_config.TextColumn("tier", width=45),
    "hardware": st.column_config.TextColumn("hardware", width=85),
    "gen.": st.column_config.NumberColumn("gen.", width=45, help="generation: a re-registered node with a "
                                          "different format or checksum is a new generation"),
    "healthy": st.column_config.CheckboxColumn("healthy", width=60),
    "quiescent until": st.column_config.TextColumn("quiescent until", width=105),
    "in-flight": st.column_config.NumberColumn("in-flight", width=65, format="%d"),
    "waiting": st.column_config.NumberColumn("waiting", width=60, format="%d"),
    "shadow": st.column_config.NumberColumn("shadow", width=55, format="%d", help="shadow requests in flight "
                                            "(live agreement sampling): not counted in in-flight or any figure below"),
    "KV use": st.column_config.ProgressColumn("KV use", min_value=0, max_value=1, format="percent", width=90),
    "last error": st.column_config.TextColumn("last error", width=60),
}


def nodes_frame(nodes: list[dict], quiescence_s: int) -> pd.DataFrame:
    now = utcnow()
    rows = []
    for n in nodes:
        started = datetime.fromisoformat(n["generation_started"])
        until = started + timedelta(seconds=quiescence_s)
        rows.append({"node": n["key"], "deployment": n["deployment"], "tier": n["tier"], "hardware": n["hardware"],
                     "gen.": n["generation"], "healthy": n["healthy"],
                     # only a re-registered node (generation > 1) is quiescent, as the router decides
                     "quiescent until": until.strftime("%H:%M:%S") if n["generation"] > 1 and until > now else "",
                     "in-flight": n["inflight"], "waiting": n["waiting"], "shadow": n.get("shadow_inflight", 0),
                     "KV use": n.get("kv_usage"), "last error": n.get("last_error") or ""})
    return fmt.by_fidelity(pd.DataFrame(rows), "tier", "node") if rows else pd.DataFrame(rows)


def deployments_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Per deployment in tier order, with human units: error rate in percent, latency in whole ms."""
    if df.empty:
        return df
    out = pd.DataFrame({"deployment": df["deployment"], "tier": df["tier"].fillna(fmt.DASH),
                        "requests": df["requests"].astype(int), "5xx errors": df["errors"].astype(int),
                        "error rate": [fmt.pct(100 * e / r) if r else fmt.DASH
                                       for e, r in zip(df["errors"], df["requests"])],
                        "mean latency (ms)": df["mean_latency_ms"].astype(float).round(0).astype("Int64")})
    return fmt.by_fidelity(out, "tier", "deployment")


def composition_warning(share: pd.DataFrame, top_tier: str, limit: float) -> str | None:
    top = share.loc[share["tier"] == top_tier, "share"].sum() if not share.empty else 0.0
    if top > limit:
        return (f"{top:.0%} of traffic needs {top_tier} (limit {limit:.0%}): a fleet-composition problem, not "
                f"a routing one. Add {top_tier} nodes, or check whether the rules score too many requests as "
                "sensitive (Policy → what-if replay).")
    return None


def render() -> None:
    """The controls run with the page; everything that shows fleet state is a fragment, which re-runs on its
    own every LIVE_EVERY_S seconds while Live is on. Nothing sleeps in the script, so a click elsewhere on
    the page (or in the navigation) is handled at once."""
    st.title("Fleet")
    c1, c2, c3 = st.columns([1, 1, 2])
    label = c1.selectbox("Window", [*WINDOWS, CUSTOM], index=1)
    if label == CUSTOM:
        minutes = int(c2.number_input("Last N minutes", min_value=1, max_value=MAX_CUSTOM_MIN, value=120, step=10,
                                      help=f"1 to {MAX_CUSTOM_MIN} minutes (30 days)"))
        window_s, bucket_s = window_for(minutes)
        label = window_label(minutes)
    else:
        window_s, bucket_s = WINDOWS[label]
    live = c3.toggle(f"Live (refresh every {LIVE_EVERY_S} s)", value=False, key="fleet_live")
    st.fragment(fleet_state, run_every=LIVE_EVERY_S if live else None)(label, window_s, bucket_s)


def fleet_state(label: str, window_s: int, bucket_s: int) -> None:
    """Nodes, composition warning, per-tier charts and shares over the chosen window."""
    s = data.settings()
    policy = data.store().active()
    tiers = [t.value for t in policy.tier_ladder()]
    end = pd.Timestamp.now(tz="UTC")
    window = (end - pd.Timedelta(seconds=window_s), end)  # every time chart spans exactly this

    nodes, why = data.router_call("nodes")
    st.subheader("Nodes")
    if nodes is None:
        st.warning(f"live node state unavailable: {why}")
    else:
        data.record_queue(nodes)
        ui.table(nodes_frame(nodes, policy.sessions.quiescence_s), "nodes", column_config=NODE_COLUMNS)

    share = data.tier_share(s.db_url, window_s)
    warning = composition_warning(share, tiers[0], policy.fleet_warning.top_tier_share)
    if warning:
        st.error(warning, icon="⚠️")

    ts = data.tier_timeseries(s.db_url, window_s, bucket_s)
    st.subheader(f"Per tier, last {label}")
    if ts.empty:
        st.info("no requests logged in this window yet")
    else:
        a, b = st.columns(2)
        for col, metric in zip([a, b, a, b, a], ["rps", "tokens_s", "error_rate", "mean_latency_ms", "mean_ttft_ms"]):
            col.altair_chart(charts.tier_timeseries(ts, metric, window, tiers), width="stretch")
    if nodes is not None:
        queue = data.queue_history(window[0])
        (b if not ts.empty else st).altair_chart(charts.tier_timeseries(queue, "waiting", window, tiers),
                                                 width="stretch")
        st.caption("Waiting requests are sampled from the nodes each time this page refreshes (by anyone); "
                   "the request log has no queue.")
    if not share.empty:
        chart = charts.tier_share(share, policy.fleet_warning.top_tier_share, tiers)
        st.altair_chart(chart, width="stretch", height=chart.height + 60)  # "content" squashed the bars
        ui.table(deployments_frame(data.deployment_summary(s.db_url, window_s)), "deployments")
    shadow = data.shadow_load(s.db_url, window_s, bucket_s)
    if not shadow.empty:
        st.subheader(f"Shadow load, last {label}")
        st.caption(f"{int(shadow['shadows'].sum())} shadow requests (live agreement sampling, Evals → Live "
                   "agreement) went to the nodes in this window; none is counted in the figures above, the request "
                   "log or the canary guards.")
        st.altair_chart(charts.tier_timeseries(shadow, "rps", window, tiers).properties(title="shadow requests/s"),
                        width="stretch")
