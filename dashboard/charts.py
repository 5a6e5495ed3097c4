"""Pure chart builders: DataFrame in, Altair chart out (no Streamlit, no I/O), so each is testable alone."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from quantroute.tiers import TIER_ORDER

# what the builders return and st.altair_chart draws: one chart, layers of charts, or a chart per facet
Drawable = alt.Chart | alt.LayerChart | alt.FacetChart
TIERS = [t.value for t in TIER_ORDER]
TIER_COLOURS = dict(zip(TIERS, ["#1f4e79", "#2e86c1", "#f39c12", "#c0392b"]))
TIER_SCALE = alt.Scale(domain=TIERS, range=list(TIER_COLOURS.values()))
ARM_SCALE = alt.Scale(domain=["baseline", "candidate"], range=["#1f4e79", "#e67e22"])
METRIC_TITLES = {"rps": "requests/s", "tokens_s": "tokens/s", "error_rate": "error rate (5xx)",
                 "mean_latency_ms": "mean latency (ms)", "mean_ttft_ms": "mean TTFT (ms)",
                 "waiting": "waiting requests (queue)"}
# (axis format, tooltip format, smallest top of the y axis): an all-zero series still gets a readable axis
# (0 to 1 %, 0 to 1 request) instead of a zero-height one labelled "0.000000%".
METRIC_FORMATS = {"rps": (",.2~f", ",.2f", 1.0), "tokens_s": (",.0f", ",.0f", 10.0),
                  "error_rate": (".1~%", ".2%", 0.01), "mean_latency_ms": (",.0f", ",.0f", 10.0),
                  "mean_ttft_ms": (",.0f", ",.0f", 10.0), "waiting": ("d", "d", 1.0)}
TIME_FORMAT = "%H:%M"


def _y_top(values: pd.Series, floor: float) -> float:
    top = float(values.max()) if len(values) and pd.notna(values.max()) else 0.0
    return max(top * 1.1, floor)


def tier_timeseries(df: pd.DataFrame, metric: str, window: tuple[pd.Timestamp, pd.Timestamp] | None = None,
                    tiers: list[str] | None = None) -> alt.Chart:
    """One line per tier over time; metric is a column of queries.tier_timeseries (or 'waiting').
    `window` (start, end) fixes the time axis, so every chart of a page spans the page's window."""
    title = METRIC_TITLES.get(metric, metric)
    axis_fmt, tip_fmt, floor = METRIC_FORMATS.get(metric, (",.2~f", ",.2f", 1.0))
    x_scale = alt.Scale(domain=[window[0].isoformat(), window[1].isoformat()]) if window else alt.Undefined
    domain = tiers or TIERS
    return alt.Chart(df, title=title).mark_line(point=alt.OverlayMarkDef(size=20)).encode(
        x=alt.X("time:T", title=None, scale=x_scale, axis=alt.Axis(format=TIME_FORMAT, labelOverlap=True)),
        y=alt.Y(f"{metric}:Q", title=title, axis=alt.Axis(format=axis_fmt,
                                                          tickMinStep=1 if metric == "waiting" else alt.Undefined),
                scale=alt.Scale(domain=[0, _y_top(df[metric] if metric in df else pd.Series(dtype=float), floor)])),
        color=alt.Color("tier:N", scale=alt.Scale(domain=domain, range=[TIER_COLOURS[t] for t in domain]),
                        sort=domain, title="tier"),
        tooltip=[alt.Tooltip("time:T", format="%Y-%m-%d %H:%M:%S", title="time (UTC)"), "tier:N",
                 alt.Tooltip(f"{metric}:Q", format=tip_fmt, title=title)],
    ).properties(height=220)


def share_frame(df: pd.DataFrame, tiers: list[str] | None = None) -> pd.DataFrame:
    """Every tier in fidelity order, 0 where no request went, each with its label ("42.1 % · 840 requests")."""
    tiers = tiers or TIERS
    got = df.set_index("tier") if not df.empty else pd.DataFrame(columns=["requests", "share"])
    rows = [{"tier": t, "requests": int(got["requests"].get(t, 0)), "share": float(got["share"].get(t, 0.0))}
            for t in [*tiers, *[x for x in got.index if x not in tiers]]]
    out = pd.DataFrame(rows)
    out["label"] = [f"{100 * s:.1f} % · {n:,} requests" for s, n in zip(out["share"], out["requests"])]
    return out


def tier_share(df: pd.DataFrame, limit: float | None = None, tiers: list[str] | None = None) -> Drawable:
    """Share of traffic per tier as horizontal bars, every tier named and labelled with its share; the
    fleet-composition limit drawn on the top tier."""
    full = share_frame(df, tiers)
    order = full["tier"].tolist()
    y = alt.Y("tier:N", sort=order, title=None, axis=alt.Axis(labelOverlap=False, labelFontSize=13))
    base = alt.Chart(full, title="share of traffic per tier")
    bars = base.mark_bar().encode(
        y=y, x=alt.X("share:Q", axis=alt.Axis(format=".0%"), scale=alt.Scale(domain=[0, 1]), title="share"),
        color=alt.Color("tier:N", scale=TIER_SCALE, legend=None),
        tooltip=["tier:N", alt.Tooltip("requests:Q", format=","), alt.Tooltip("share:Q", format=".1%")])
    text = base.mark_text(align="left", dx=4).encode(y=y, x="share:Q", text="label:N")
    layers = [bars, text]
    if limit is not None:
        layers.append(alt.Chart(pd.DataFrame({"limit": [limit]})).mark_rule(color="red", strokeDash=[4, 3]).encode(
            x="limit:Q", tooltip=[alt.Tooltip("limit:Q", format=".0%", title="top-tier share limit")]))
    return alt.layer(*layers).properties(height=36 * len(full) + 20)


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


def eval_categories(df: pd.DataFrame) -> Drawable:
    """Per-category pass-rate bars per arm with 95 % CI error bars."""
    base = alt.Chart(df).encode(x=alt.X("arm:N", title=None, axis=alt.Axis(labels=False, ticks=False)))
    bars = base.mark_bar().encode(
        y=alt.Y("rate:Q", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1]), title="pass rate"),
        color=alt.Color("arm:N", scale=ARM_SCALE),
        tooltip=["category:N", "arm:N", alt.Tooltip("rate:Q", format=".1%"), "n:Q",
                 alt.Tooltip("lo:Q", format=".1%", title="CI low"), alt.Tooltip("hi:Q", format=".1%", title="CI high")])
    # the same axis title on both layers, else Vega-Lite joins them ("pass rate, lo")
    err = base.mark_errorbar(color="black").encode(y=alt.Y("lo:Q", title="pass rate"), y2="hi:Q",
                                                   tooltip=[alt.Tooltip("lo:Q", format=".1%", title="CI low"),
                                                            alt.Tooltip("hi:Q", format=".1%", title="CI high")])
    return alt.layer(bars, err, data=df).properties(width=70, height=200).facet(
        column=alt.Column("category:N", title=None, sort=list(dict.fromkeys(df["category"]))))


def guard_metric(df: pd.DataFrame, metric: str, limit: float | None = None, *, ratio: bool = False,
                 window: tuple[pd.Timestamp, pd.Timestamp] | None = None) -> Drawable:
    """A guard metric per arm over time with its limit drawn: an absolute limit (error rate) as a flat rule,
    a ratio limit (p95 latency, TTFT) as the baseline's value times the ratio, bucket by bucket. `window` fixes
    the time axis (the guard window the page shows)."""
    title = {"error_rate": "error rate", "p95_latency_ms": "p95 latency (ms)", "p95_ttft_ms": "p95 TTFT (ms)"}[metric]
    fmt_axis, fmt_tip = (".1~%", ".2%") if metric == "error_rate" else (",.0f", ",.0f")
    x_scale = alt.Scale(domain=[window[0].isoformat(), window[1].isoformat()]) if window else alt.Undefined
    lines = alt.Chart(df, title=title).mark_line(point=True).encode(
        x=alt.X("time:T", title=None, scale=x_scale, axis=alt.Axis(format=TIME_FORMAT)),
        y=alt.Y(f"{metric}:Q", title=title, axis=alt.Axis(format=fmt_axis)),
        color=alt.Color("arm:N", scale=ARM_SCALE),
        tooltip=[alt.Tooltip("time:T", format="%H:%M:%S", title="time (UTC)"), "arm:N",
                 alt.Tooltip(f"{metric}:Q", format=fmt_tip, title=title), "requests:Q"])
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


def capacity(df: pd.DataFrame, usable_gib: float) -> Drawable:
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


def replay_causes(df: pd.DataFrame) -> Drawable:
    """Requests whose tier changes, per responsible rule: one bar of 28 px per rule with its count written at
    its end, rule names in full beside the bars."""
    y = alt.Y("rule:N", sort="-x", title=None, axis=alt.Axis(labelLimit=320, labelOverlap=False, labelFontSize=12))
    base = alt.Chart(df, title="rules causing tier changes")
    bars = base.mark_bar().encode(
        y=y, x=alt.X("requests:Q", title="requests changing tier", axis=alt.Axis(format="d", tickMinStep=1)),
        tooltip=["rule:N", "requests:Q"])
    text = base.mark_text(align="left", dx=3).encode(y=y, x="requests:Q", text="requests:Q")
    return alt.layer(bars, text).properties(height=28 * max(len(df), 2) + 30)


def comparison_deltas(frame: pd.DataFrame) -> alt.Chart:
    """Two runs side by side: per category, each run's candidate delta against its own baseline (points)."""
    long = frame.melt(id_vars=["category"], value_vars=["A: Δ vs baseline (pts)", "B: Δ vs baseline (pts)"],
                      var_name="run", value_name="delta").dropna()
    long["run"] = long["run"].str[0]
    order = list(dict.fromkeys(frame["category"]))
    return alt.Chart(long, title="candidate minus baseline, per category (points)").mark_bar().encode(
        x=alt.X("category:N", sort=order, title=None, axis=alt.Axis(labelAngle=0, labelLimit=120)),
        xOffset=alt.XOffset("run:N", sort=["A", "B"]),
        y=alt.Y("delta:Q", title="pass-rate delta (points)", axis=alt.Axis(format="+.0f")),
        color=alt.Color("run:N", sort=["A", "B"], scale=alt.Scale(domain=["A", "B"], range=["#7f8c8d", "#e67e22"]),
                        title="run"),
        tooltip=["category:N", "run:N", alt.Tooltip("delta:Q", format="+.1f", title="delta (pts)")],
    ).properties(height=240)


def agreement_trend(df: pd.DataFrame) -> Drawable:
    """Live agreement over time per (served vs shadow) pair: the rate as a line, its 95 % CI as a band."""
    base = alt.Chart(df).encode(x=alt.X("ts:T", title=None, axis=alt.Axis(format=TIME_FORMAT)),
                                color=alt.Color("pair:N", title="served vs shadow"))
    band = base.mark_area(opacity=0.15).encode(y=alt.Y("ci_low:Q", title="agreement",
                                                       scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
                                               y2="ci_high:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("rate:Q", title="agreement"),
        tooltip=[alt.Tooltip("ts:T", format="%H:%M"), "pair:N", alt.Tooltip("rate:Q", format=".1%"), "pairs:Q",
                 alt.Tooltip("ci_low:Q", format=".1%", title="CI low"),
                 alt.Tooltip("ci_high:Q", format=".1%", title="CI high")])
    return alt.layer(band, line).properties(height=260)


def judge_frame(judgement: dict) -> pd.DataFrame:
    """One row per judged metric, in display units (percent, or percentage points for proportions)."""
    rows = []
    for m in judgement.get("metrics") or []:
        unit = "%" if m["unit"] == "relative" else "pts"

        def pct(v):
            return None if v is None else 100 * v

        rows.append({"metric": m["label"], "verdict": m["verdict"], "unit": unit, "critical": m["critical"],
                     "estimate": pct(m.get("estimate")), "low": pct(m.get("low")), "high": pct(m.get("high")),
                     "allowed": pct(m["allowed"]), "candidate": m["n_candidate"], "baseline": m["n_baseline"],
                     "needed": m.get("needed")})
    return pd.DataFrame(rows)


VERDICT_COLOURS = alt.Scale(domain=["pass", "fail", "inconclusive", "no data"],
                            range=["#27ae60", "#c0392b", "#7f8c8d", "#bdc3c7"])


def judge_effect(row: pd.Series) -> Drawable:
    """One metric's effect (candidate vs baseline) as a point with its always-valid interval, against the allowed
    band (green up to the allowed regression, a red rule at it) and zero. An unbounded side is drawn to the edge."""
    allowed = float(row["allowed"])
    est = row["estimate"] if pd.notna(row["estimate"]) else None
    known = [v for v in (row["low"], row["high"], est) if v is not None and pd.notna(v)]
    span = max([abs(v) for v in known] + [allowed]) * 1.3
    lo = row["low"] if pd.notna(row["low"]) else -span
    hi = row["high"] if pd.notna(row["high"]) else span
    lo, hi = max(lo, -span), min(hi, span)
    x = alt.Scale(domain=[-span, span], nice=False)
    title = f"{row['metric']} ({row['unit']}): {row['verdict']}"
    band = alt.Chart(pd.DataFrame({"a": [-span], "b": [allowed]})).mark_rect(color="#27ae60", opacity=0.12).encode(
        x=alt.X("a:Q", scale=x, title=f"candidate vs baseline ({row['unit']})"), x2="b:Q")
    limit = alt.Chart(pd.DataFrame({"allowed": [allowed]})).mark_rule(color="red", strokeDash=[4, 3]).encode(
        x=alt.X("allowed:Q", scale=x), tooltip=[alt.Tooltip("allowed:Q", format=".2f", title="allowed")])
    zero = alt.Chart(pd.DataFrame({"z": [0.0]})).mark_rule(color="#555").encode(x=alt.X("z:Q", scale=x))
    data = pd.DataFrame({"low": [lo], "high": [hi], "estimate": [est if est is not None else 0.0],
                         "verdict": [row["verdict"]]})
    tips = [alt.Tooltip("estimate:Q", format=".2f"), alt.Tooltip("low:Q", format=".2f"),
            alt.Tooltip("high:Q", format=".2f"), "verdict:N"]
    colour = alt.Color("verdict:N", scale=VERDICT_COLOURS, legend=None)
    interval = alt.Chart(data).mark_rule(strokeWidth=3).encode(x=alt.X("low:Q", scale=x), x2="high:Q",
                                                               color=colour, tooltip=tips)
    layers = [band, zero, limit, interval]
    if est is not None:
        layers.append(alt.Chart(data).mark_point(filled=True, size=80).encode(x=alt.X("estimate:Q", scale=x),
                                                                              color=colour, tooltip=tips))
    return alt.layer(*layers, title=title).properties(height=60)
