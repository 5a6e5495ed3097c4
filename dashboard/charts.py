"""Pure chart builders: DataFrame in, Altair chart out (no Streamlit, no I/O), so each is testable alone."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from quantroute.tiers import TIER_ORDER

TIERS = [t.value for t in TIER_ORDER]
TIER_SCALE = alt.Scale(domain=TIERS, range=["#1f4e79", "#2e86c1", "#f39c12", "#c0392b"])
ARM_SCALE = alt.Scale(domain=["baseline", "candidate"], range=["#1f4e79", "#e67e22"])
METRIC_TITLES = {"rps": "requests/s", "tokens_s": "tokens/s", "error_rate": "error rate",
                 "mean_latency_ms": "mean latency (ms)", "waiting": "waiting (queue)"}


def tier_timeseries(df: pd.DataFrame, metric: str) -> alt.Chart:
    """One line per tier over time; metric is a column of queries.tier_timeseries (or 'waiting')."""
    title = METRIC_TITLES.get(metric, metric)
    axis = alt.Axis(format="%") if metric == "error_rate" else alt.Axis()
    return alt.Chart(df, title=title).mark_line(point=True).encode(
        x=alt.X("time:T", title=None),
        y=alt.Y(f"{metric}:Q", title=title, axis=axis),
        color=alt.Color("tier:N", scale=TIER_SCALE, sort=TIERS),
        tooltip=["time:T", "tier:N", alt.Tooltip(f"{metric}:Q", format=".3f")],
    ).properties(height=220)


def tier_share(df: pd.DataFrame, limit: float | None = None) -> alt.Chart:
    """Share of traffic per tier as horizontal bars; the fleet-composition limit drawn on the top tier."""
    bars = alt.Chart(df, title="share of traffic per tier").mark_bar().encode(
        y=alt.Y("tier:N", sort=TIERS, title=None),
        x=alt.X("share:Q", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1]), title="share"),
        color=alt.Color("tier:N", scale=TIER_SCALE, legend=None),
        tooltip=["tier:N", "requests:Q", alt.Tooltip("share:Q", format=".1%")])
    if limit is None:
        return bars.properties(height=160)
    rule = alt.Chart(pd.DataFrame({"limit": [limit]})).mark_rule(color="red", strokeDash=[4, 3]).encode(
        x="limit:Q", tooltip=[alt.Tooltip("limit:Q", format=".0%", title="top-tier share limit")])
    return (bars + rule).properties(height=160)


def wilson(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson interval of a pass rate (stays inside [0, 1] for small n, unlike p ± 2 SE)."""
    if n <= 0:
        return 0.0, 1.0
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def category_frame(report: dict) -> pd.DataFrame:
    """Long frame (category, arm, rate, lo, hi, n) from a stored eval report (evals.stats.Report as JSON)."""
    rows = []
    for c in [report["overall"], *report["categories"]]:
        for arm, key in (("baseline", "base_rate"), ("candidate", "cand_rate")):
            lo, hi = wilson(c[key], c["n"])
            rows.append({"category": c["name"], "arm": arm, "rate": c[key], "lo": lo, "hi": hi, "n": c["n"]})
    return pd.DataFrame(rows)


def eval_categories(df: pd.DataFrame) -> alt.Chart:
    """Per-category pass-rate bars per arm with 95 % CI error bars."""
    base = alt.Chart(df).encode(x=alt.X("arm:N", title=None, axis=alt.Axis(labels=False, ticks=False)))
    bars = base.mark_bar().encode(
        y=alt.Y("rate:Q", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1]), title="pass rate"),
        color=alt.Color("arm:N", scale=ARM_SCALE),
        tooltip=["category:N", "arm:N", alt.Tooltip("rate:Q", format=".1%"), "n:Q",
                 alt.Tooltip("lo:Q", format=".1%", title="CI low"), alt.Tooltip("hi:Q", format=".1%", title="CI high")])
    err = base.mark_errorbar(color="black").encode(y="lo:Q", y2="hi:Q")
    return alt.layer(bars, err, data=df).properties(width=70, height=200).facet(
        column=alt.Column("category:N", title=None, sort=list(dict.fromkeys(df["category"]))))


def guard_metric(df: pd.DataFrame, metric: str, limit: float | None = None, *, ratio: bool = False) -> alt.Chart:
    """A guard metric per arm over time with its limit drawn: an absolute limit (error rate) as a flat rule,
    a ratio limit (p95 latency, TTFT) as the baseline's value times the ratio, bucket by bucket."""
    title = {"error_rate": "error rate", "p95_latency_ms": "p95 latency (ms)", "p95_ttft_ms": "p95 TTFT (ms)"}[metric]
    lines = alt.Chart(df, title=title).mark_line(point=True).encode(
        x=alt.X("time:T", title=None), y=alt.Y(f"{metric}:Q", title=title),
        color=alt.Color("arm:N", scale=ARM_SCALE), tooltip=["time:T", "arm:N", f"{metric}:Q", "requests:Q"])
    layers = [lines]
    if limit is not None and not ratio:
        layers.append(alt.Chart(pd.DataFrame({"limit": [limit]})).mark_rule(color="red", strokeDash=[4, 3])
                      .encode(y="limit:Q", tooltip=[alt.Tooltip("limit:Q", title="limit")]))
    elif limit is not None and not df.empty:
        base = df[df["arm"] == "baseline"][["time", metric]].dropna()
        lim = base.assign(limit=base[metric] * limit)
        layers.append(alt.Chart(lim).mark_line(color="red", strokeDash=[4, 3]).encode(
            x="time:T", y="limit:Q", tooltip=[alt.Tooltip("limit:Q", title=f"limit (baseline x {limit:g})")]))
    return alt.layer(*layers).properties(height=200)


def capacity(df: pd.DataFrame, usable_gib: float) -> alt.Chart:
    """Stacked weights / KV cache / headroom (GiB) per format, with the usable VRAM drawn."""
    long = df.melt(id_vars=["format"], value_vars=["weights GiB", "KV GiB (at concurrency)", "headroom GiB"],
                   var_name="part", value_name="GiB")
    long["GiB"] = long["GiB"].clip(lower=0)
    bars = alt.Chart(long, title="memory per format").mark_bar().encode(
        x=alt.X("format:N", sort=list(df["format"]), title=None), y=alt.Y("GiB:Q", stack="zero"),
        color=alt.Color("part:N", scale=alt.Scale(
            domain=["weights GiB", "KV GiB (at concurrency)", "headroom GiB"],
            range=["#1f4e79", "#f39c12", "#d5dbdb"])),
        tooltip=["format:N", "part:N", alt.Tooltip("GiB:Q", format=".2f")])
    rule = alt.Chart(pd.DataFrame({"usable": [usable_gib]})).mark_rule(color="red", strokeDash=[4, 3]).encode(
        y="usable:Q", tooltip=[alt.Tooltip("usable:Q", format=".1f", title="usable VRAM GiB")])
    return (bars + rule).properties(height=260)


def replay_causes(df: pd.DataFrame) -> alt.Chart:
    """Requests whose tier changes, per responsible rule."""
    return alt.Chart(df, title="rules causing tier changes").mark_bar().encode(
        y=alt.Y("rule:N", sort="-x", title=None), x=alt.X("requests:Q", title="requests changing tier"),
        tooltip=["rule:N", "requests:Q"]).properties(height=max(80, 24 * len(df)))
