"""Evals → Live agreement: how often a deployment's greedy answer equals another tier's on live traffic,
from the router's shadow pairs. Rates per deployment pair and per rule with 95 % CIs, the trend, the rules to raise
or lower with their evidence (one click opens the change as a policy draft with its what-if replay), and
disagreeing pairs side by side when the router's prompt storage kept their bodies."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, fmt, ui
from quantroute.policy.loader import policy_to_data, validate_data
from quantroute.policy.model import Policy
from quantroute.shadow.analysis import Rate, Report, Suggestion, analyse, apply_suggestion

WINDOWS = {"1 h": (3600, 300), "6 h": (21600, 1800), "24 h": (86400, 3600), "7 d": (604800, 21600)}
_RATE = st.column_config.NumberColumn(format="percent")
RATE_COLUMNS = {"agreement": _RATE, "CI low": _RATE, "CI high": _RATE}
REPLAY_N = 500  # the Policy page's default replay size


def rates_frame(rates: list[Rate]) -> pd.DataFrame:
    rows = [{**r.key, "pairs": r.pairs, "agree": r.agree, "exact": r.exact, "agreement": r.rate, "CI low": r.ci_low,
             "CI high": r.ci_high} for r in rates]
    return pd.DataFrame(rows)


def trend_frame(rates: list[Rate]) -> pd.DataFrame:
    if not rates:
        return pd.DataFrame(columns=["ts", "pair", "rate", "ci_low", "ci_high", "pairs"])
    return pd.DataFrame([{"ts": pd.Timestamp(r.key["bucket"]), "pair": r.key["pair"], "rate": r.rate,
                          "ci_low": r.ci_low, "ci_high": r.ci_high, "pairs": r.pairs} for r in rates])


def open_draft(s: Suggestion, active: Policy) -> None:
    """Put the suggestion's change into the Policy page's draft, replay it over the last logged requests, and go
    there: the draft, its diff and its what-if replay are on screen, nothing is saved."""
    from dashboard.pages import policy as policy_page

    draft = apply_suggestion(policy_to_data(active), s)
    st.session_state["policy_base_choice"] = active.version
    policy_page.reset_draft(draft, active.version)
    rows = data.replay_rows(data.settings().db_url, REPLAY_N)
    st.session_state.pop("whatif", None)
    if not rows.empty:
        st.session_state["whatif"] = policy_page.replay_summary(active, validate_data(draft, "draft"), rows)
    st.session_state["policy_section"] = policy_page.SECTIONS[0]
    st.switch_page(st.Page(policy_page.render, title="Policy", url_path="policy"))


def _suggestions(title: str, items: list[Suggestion], active: Policy, empty: str) -> None:
    st.markdown(f"**{title}**")
    if not items:
        st.caption(empty)
    for i, s in enumerate(items):
        with st.container(border=True):
            change = (f"weight {s.current_weight:g} → **{s.proposed_weight:g}** (alone it requires {s.target_tier})"
                      if s.proposed_weight is not None else s.note)
            st.markdown(f"`{s.rule}`: {change}")
            st.caption(s.evidence)
            if s.proposed_weight is not None and st.button("Open as policy draft with what-if replay",
                                                           key=f"suggest-{s.direction}-{i}-{s.rule}"):
                open_draft(s, active)


def _disagreements(db_url: str | None, window_s: int, rules: list[str]) -> None:
    st.subheader("Disagreeing pairs")
    rule = st.selectbox("Rule", ["(any)", *rules], key="agreement_rule")
    pairs = data.shadow_disagreements(db_url, window_s, None if rule == "(any)" else rule, 20)
    if not pairs:
        st.caption("none in this window")
        return
    if all(p.get("bodies") is None for p in pairs):
        st.caption("the router keeps no bodies (prompt storage `none`): only the figures of each pair are stored")
    for p in pairs:
        where = (f"{fmt.when(p['ts'])} · {p['served_deployment']} ({p['served_tier']}) vs {p['shadow_deployment']} "
                 f"({p['shadow_tier']}) · rules {', '.join(p['rules']) or '-'}")
        with st.expander(where):
            facts = [f"first divergence at character {p['diverge_char']}"
                     + (f", token {p['diverge_token']}" if p["diverge_token"] is not None else ""),
                     f"length ratio {p['length_ratio']:.2f}" if p["length_ratio"] is not None else ""]
            if p["json_like"]:
                facts.append(f"JSON valid {p['json_valid_served']} / {p['json_valid_shadow']}, equal {p['json_equal']}")
            if p["math_like"]:
                facts.append(f"final numbers {p['number_served']} / {p['number_shadow']}")
            st.caption(" · ".join(f for f in facts if f))
            bodies = p.get("bodies")
            if not bodies:
                continue
            a, b = st.columns(2)
            a.markdown(f"**served** ({p['served_tier']})")
            a.code(bodies.get("served") or "(empty)", language=None, wrap_lines=True)
            b.markdown(f"**shadow** ({p['shadow_tier']})")
            b.code(bodies.get("shadow") or "(empty)", language=None, wrap_lines=True)


def _summary(rep: Report) -> None:
    m = st.columns(3)
    agree = sum(r.agree for r in rep.by_pair)
    m[0].metric("compared pairs", rep.pairs)
    m[1].metric("agreement (all pairs)", f"{agree / rep.pairs:.1%}" if rep.pairs else fmt.DASH)
    m[2].metric("shadows without an answer", rep.failed)


def render() -> None:
    s = data.settings()
    label = st.selectbox("Window", list(WINDOWS), index=2, key="agreement_window")
    window_s, bucket_s = WINDOWS[label]
    active = data.store().active()
    pairs = data.shadow_pairs(s.db_url, window_s)
    rep = analyse(pairs, active, bucket_s=bucket_s)
    if not pairs:
        st.info("no shadow pairs in this window: the active policy's `shadow.rate` is 0 or unset, or no greedy "
                "request came in (see the policy's `shadow` section)")
        return
    _summary(rep)
    st.subheader("By deployment pair (served vs shadow)")
    ui.table(rates_frame(rep.by_pair), "agreement-by-pair", column_config=RATE_COLUMNS)
    st.subheader("By rule")
    ui.table(rates_frame(rep.by_rule), "agreement-by-rule", column_config=RATE_COLUMNS)
    st.subheader("Trend")
    st.altair_chart(charts.agreement_trend(trend_frame(rep.trend)), width="stretch")
    st.subheader("Suggestions")
    ladder = [t.value for t in active.tier_ladder()]
    a, b = st.columns(2)
    with a:
        _suggestions(f"Raise: {ladder[-1]} traffic that disagrees with {ladder[0]}", rep.raise_, active,
                     "none: no rule's cheapest-tier traffic surely disagrees (CI high < 90 %, >= 30 pairs)")
    with b:
        _suggestions(f"Lower: {ladder[0]} rules whose lower-tier shadow agrees", rep.lower, active,
                     "none: no top-tier rule's shadow surely agrees (CI low > 95 %, >= 30 pairs)")
    _disagreements(s.db_url, window_s, sorted({r.key["rule"] for r in rep.by_rule}))
