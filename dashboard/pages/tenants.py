"""Tenants: who sends traffic through client API keys, what each tenant used per tier over time and what it
would have cost all on FP16 (the tiers' relative prices from settings); operators create and revoke keys and
set tenants' tier floors, priorities and rate limits (each change audited under their name)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, time

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import actions, data, fmt, ui
from quantroute.tiers import TIER_ORDER

WINDOWS = {"6 h": (6 * 3600, 600), "24 h": (86400, 3600), "7 days": (7 * 86400, 6 * 3600),
           "30 days": (30 * 86400, 86400)}
NO_KEY = "(no key)"
FLOORS = ["(none)", *[t.value for t in TIER_ORDER]]


def priced(usage: pd.DataFrame, prices: Mapping[str, float]) -> pd.DataFrame:
    """Per tenant: requests, tokens, the cost of its tokens at the tiers that served them and at FP16, and the
    share saved. Prices are relative per token; a tier without a price counts at FP16's."""
    cols = ["tenant", "requests", "tokens", "cost as served", "cost all on FP16", "saved"]
    if usage.empty:
        return pd.DataFrame(columns=cols)
    fp16 = float(prices.get("fp16", 1.0))
    df = usage.assign(served=usage["tokens"] * usage["tier"].map(lambda t: float(prices.get(t, fp16))),
                      at_fp16=usage["tokens"] * fp16)
    out = df.groupby("tenant", as_index=False)[["requests", "tokens", "served", "at_fp16"]].sum()
    out["saved"] = (1 - out["served"] / out["at_fp16"].where(out["at_fp16"] > 0)).fillna(0.0)
    out["tenant"] = out["tenant"].replace("", NO_KEY)
    out = out.rename(columns={"served": "cost as served", "at_fp16": "cost all on FP16"})
    return out[cols].sort_values("tokens", ascending=False, ignore_index=True)


def usage_chart(usage: pd.DataFrame) -> alt.Chart:
    """Tokens per bucket, stacked by tier, one row of the facet per tenant."""
    df = usage.assign(tenant=usage["tenant"].replace("", NO_KEY))
    order = [t.value for t in TIER_ORDER]
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("time:T", title=None), y=alt.Y("sum(tokens):Q", title="tokens"),
        color=alt.Color("tier:N", sort=order, scale=alt.Scale(domain=order)),
        row=alt.Row("tenant:N", title=None), tooltip=["tenant", "tier", "time:T", "requests", "tokens"],
    ).properties(height=120)


def keys_frame(keys: pd.DataFrame, now: datetime | None = None) -> pd.DataFrame:
    """The keys as the table shows them, with a state: active, expired or revoked."""
    if keys.empty:
        return pd.DataFrame(columns=["key", "tenant", "label", "floor", "rpm", "tpm", "expires", "state",
                                     "created", "by"])
    now = now or datetime.now(UTC)
    expires = pd.to_datetime(keys["expires_at"], utc=True)
    state = ["revoked" if pd.notna(r) else "expired" if pd.notna(e) and e <= now else "active"
             for r, e in zip(keys["revoked_at"], expires)]
    return pd.DataFrame({"key": keys["prefix"] + "…", "tenant": keys["tenant"], "label": keys["label"],
                         "floor": keys["tier_floor"].fillna(fmt.DASH), "rpm": keys["rpm"].map(_limit),
                         "tpm": keys["tpm"].map(_limit),
                         "expires": keys["expires_at"].map(fmt.when), "state": state,
                         "created": keys["created_at"].map(fmt.when), "by": keys["created_by"]})


def _limit(value) -> str:
    return "no limit" if value is None or pd.isna(value) else f"{int(value):,}"


def tenants_frame(tenants: pd.DataFrame) -> pd.DataFrame:
    """The tenants as the table shows them: "–" for no floor, "no limit" for no rate limit."""
    return pd.DataFrame({"tenant": tenants["name"], "tier floor": tenants["tier_floor"].fillna(fmt.DASH),
                         "priority": tenants["priority"], "requests/min": tenants["rpm"].map(_limit),
                         "tokens/min": tenants["tpm"].map(_limit), "created": tenants["created_at"].map(fmt.when)})


def _optional_int(value: str, field: str) -> int | None:
    value = value.strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{field}: a positive whole number, or empty for no limit (got {value!r})")
    return int(value)


def _create_key_form(tenant_names: list[str]) -> None:
    with st.form("create_key"):
        st.markdown("**Create a key**: shown once; only its hash and prefix are stored.")
        c1, c2, c3 = st.columns(3)
        tenant = c1.text_input("Tenant", placeholder=tenant_names[0] if tenant_names else "acme")
        label = c2.text_input("Label", placeholder="what the key is for")
        floor = c3.selectbox("Tier floor of the key", FLOORS)
        c4, c5, c6 = st.columns(3)
        rpm = c4.text_input("Requests per minute", placeholder="no limit")
        tpm = c5.text_input("Tokens per minute", placeholder="no limit")
        expires = c6.date_input("Expires (end of day, UTC)", value=None)
        submitted = st.form_submit_button("Create key", type="primary")
    if submitted:
        def create():
            return actions.create_key(
                engine=data.engine(), actor=ui.user().name, tenant=tenant, label=label,
                tier_floor=None if floor == FLOORS[0] else floor, rpm=_optional_int(rpm, "requests per minute"),
                tpm=_optional_int(tpm, "tokens per minute"),
                expires_at=datetime.combine(expires, time.max, UTC) if expires else None)

        new = ui.run_action(create, failed="create the key",
                            done=lambda k: f"Key {k.row.prefix}… created for tenant {k.row.tenant}.")
        if new is not None:
            st.session_state["new_key"] = new.key
        st.rerun()


def _tenant_form(tenants: pd.DataFrame) -> None:
    if tenants.empty:
        return
    with st.form("tenant_settings"):
        st.markdown("**Tenant settings**: for all of a tenant's keys (a key's own floor and limits apply too).")
        name = st.selectbox("Tenant", tenants["name"].tolist())
        row = tenants.set_index("name").loc[name]
        c1, c2, c3, c4 = st.columns(4)
        current = row["tier_floor"] if isinstance(row["tier_floor"], str) else FLOORS[0]
        floor = c1.selectbox("Tier floor", FLOORS, index=FLOORS.index(current))
        priority = c2.number_input("Priority (1-10)", min_value=1, max_value=10, value=int(row["priority"]))
        rpm = c3.text_input("Requests per minute", value="" if pd.isna(row["rpm"]) else str(int(row["rpm"])))
        tpm = c4.text_input("Tokens per minute", value="" if pd.isna(row["tpm"]) else str(int(row["tpm"])))
        submitted = st.form_submit_button("Save tenant")
    if submitted:
        def save():
            r, t = _optional_int(rpm, "requests per minute"), _optional_int(tpm, "tokens per minute")
            return actions.set_tenant(engine=data.engine(), actor=ui.user().name, name=name,
                                      tier_floor=None if floor == FLOORS[0] else floor,
                                      clear_floor=floor == FLOORS[0], priority=int(priority), rpm=r, tpm=t,
                                      clear_limits=r is None and t is None)

        ui.run_action(save, failed=f"save tenant {name}",
                      done=lambda t: f"Tenant {t.name}: floor {t.tier_floor or 'none'}, priority {t.priority}, "
                                     f"rpm {t.rpm or 'no limit'}, tpm {t.tpm or 'no limit'}.")
        st.rerun()


def _revoke_form(keys: pd.DataFrame) -> None:
    active = keys[keys["revoked_at"].isna()] if not keys.empty else keys
    if active.empty:
        return
    st.markdown("**Revoke a key**: every router refuses it within a few seconds.")
    prefix = st.selectbox("Key", active["prefix"].tolist(), format_func=lambda p: f"{p}… "
                          f"({active.set_index('prefix').loc[p, 'tenant']})", key="revoke_prefix")
    if st.button("Revoke…"):
        st.session_state["revoke_pending"] = prefix
    pending = st.session_state.get("revoke_pending")
    if pending:
        st.warning(f"Revoke key `{pending}…`? Clients using it get 401 from then on.")
        a, b = st.columns(2)
        if a.button("Confirm revoke", type="primary"):
            st.session_state.pop("revoke_pending")
            ui.run_action(actions.revoke_key, engine=data.engine(), actor=ui.user().name, prefix=pending,
                          failed=f"revoke key {pending}", done=lambda k: f"Key {k.prefix}… revoked.")
            st.rerun()
        if b.button("Cancel"):
            st.session_state.pop("revoke_pending")
            st.rerun()


def render() -> None:
    st.title("Tenants")
    ui.flash()
    s = data.settings()
    new_key = st.session_state.pop("new_key", None)
    if new_key:
        st.success("Copy the key now: it is not shown again.")
        st.code(new_key, language=None)

    window = st.radio("Window", list(WINDOWS), index=1, horizontal=True)
    window_s, bucket_s = WINDOWS[window]
    usage = data.tenant_usage(s.db_url, window_s, bucket_s)
    st.subheader("Usage per tenant and tier")
    if usage.empty:
        st.caption("no requests in this window")
    else:
        st.altair_chart(usage_chart(usage), width="stretch")
        st.markdown("**What it cost, and what it would have cost all on FP16** (relative prices per token: "
                    + ", ".join(f"{t} {p:g}" for t, p in s.tier_prices.items()) + ")")
        table = priced(usage, s.tier_prices)
        ui.table(table.assign(saved=table["saved"].map(lambda x: f"{x:.0%}")), "tenant-costs")

    tenants, keys = data.tenants_and_keys(s.db_url)
    st.subheader(f"Tenants ({len(tenants)})")
    ui.table(tenants_frame(tenants), "tenants")
    st.subheader(f"Keys ({len(keys)})")
    ui.table(keys_frame(keys), "client-keys")
    if ui.can("key.manage"):
        _create_key_form(tenants["name"].tolist())
        _tenant_form(tenants)
        _revoke_form(keys)
