"""The Tenants page through streamlit.testing.v1.AppTest: operators create keys (shown once), set a tenant's
floor and limits and revoke keys, each audited under their name; analysts see usage per tenant and tier and what
it would have cost all on FP16, and no forms. A disabled user is logged out on their next interaction."""

from __future__ import annotations

import pandas as pd
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from dashboard import queries
from dashboard.pages.tenants import NO_KEY, priced
from quantroute.clock import utcnow
from quantroute.db import audit
from quantroute.db.engine import session
from quantroute.db.request_stats import TenantUsageMinute, epoch_minute
from quantroute.db.tenant import ClientKey, Tenant
from quantroute.db.user import update_user
from quantroute.tenants import create_key, key_hash
from tests.dashboard.conftest import APP, PASSWORD, buttons, page


def seed_usage(engine) -> None:
    m = epoch_minute(utcnow())
    with session(engine) as s:
        s.add_all([TenantUsageMinute(minute=m - 120, tenant="acme", model="llama3-8b", tier="int4", requests=10,
                                     prompt_tokens=600, completion_tokens=400),
                   TenantUsageMinute(minute=m - 60, tenant="acme", model="llama3-8b", tier="fp16", requests=2,
                                     prompt_tokens=100, completion_tokens=100),
                   TenantUsageMinute(minute=m, tenant="", model="llama3-8b", tier="int8", requests=1,
                                     prompt_tokens=50, completion_tokens=50)])
        s.commit()


def test_prices_as_served_and_all_on_fp16():
    usage = pd.DataFrame({"tenant": ["acme", "acme", ""], "tier": ["int4", "fp16", "int8"],
                          "requests": [10, 2, 1], "tokens": [1000, 200, 100]})
    got = priced(usage, {"fp16": 1.0, "int8": 0.5, "int4": 0.25}).set_index("tenant")
    assert got.loc["acme", "cost as served"] == 1000 * 0.25 + 200 and got.loc["acme", "cost all on FP16"] == 1200
    assert abs(got.loc["acme", "saved"] - (1 - 450 / 1200)) < 1e-9
    assert got.loc[NO_KEY, "cost as served"] == 50 and got.loc[NO_KEY, "requests"] == 1
    assert list(got.index) == ["acme", NO_KEY]  # the biggest user first


def test_the_usage_query_buckets_the_rollup_per_tenant_and_tier(stack):
    engine, _ = stack
    seed_usage(engine)
    df = queries.tenant_usage(engine, window_s=3600, bucket_s=3600)
    by = df.groupby(["tenant", "tier"])["tokens"].sum().to_dict()
    assert by == {("acme", "int4"): 1000, ("acme", "fp16"): 200, ("", "int8"): 100}


def test_analysts_see_usage_and_costs_but_no_forms(stack):
    engine, _ = stack
    seed_usage(engine)
    create_key(engine, actor="olivia", tenant="acme", label="ci")
    at = page("tenants", "ana", "analyst")
    assert not at.exception
    assert "Create key" not in buttons(at) and "Revoke…" not in buttons(at)
    costs = [df.value for df in at.dataframe if "cost all on FP16" in df.value.columns][0]
    assert set(costs["tenant"]) == {"acme", NO_KEY}
    keys = [df.value for df in at.dataframe if "key" in df.value.columns][0]
    assert keys["state"].tolist() == ["active"] and keys["key"][0].startswith("qk_")


def test_operators_create_set_and_revoke_and_each_change_is_audited(stack):
    engine, _ = stack
    at = page("tenants", "olivia", "operator")
    form = at.get("form")[0]
    form.text_input[0].input("acme")
    form.text_input[1].input("batch jobs")
    form.selectbox[0].select("int8")
    form.text_input[2].input("120")
    at.button(key="FormSubmitter:create_key-Create key").click().run()
    assert not at.exception
    shown = at.code[0].value
    assert shown.startswith("qk_") and "only its hash" not in shown
    with session(engine) as s:
        row = s.exec(select(ClientKey)).one()
    assert row.key_hash == key_hash(shown) and (row.tenant, row.tier_floor, row.rpm) == ("acme", "int8", 120)
    again = at.run()  # the key is shown once: not after the next interaction
    assert not again.code
    # a bad limit names the field
    at = page("tenants", "olivia", "operator")
    form = at.get("form")[1]
    form.text_input[0].input("lots")
    at.button(key="FormSubmitter:tenant_settings-Save tenant").click().run()
    assert "requests per minute" in at.error[0].value
    at = page("tenants", "olivia", "operator")
    form = at.get("form")[1]
    form.selectbox[1].select("fp16")
    form.text_input[1].input("5000")
    at.button(key="FormSubmitter:tenant_settings-Save tenant").click().run()
    assert not at.exception and "Tenant acme: floor fp16" in at.success[0].value
    with session(engine) as s:
        tenant = s.get(Tenant, "acme")
    assert (tenant.tier_floor, tenant.tpm) == ("fp16", 5000)
    at = page("tenants", "olivia", "operator")
    [b for b in at.button if b.label == "Revoke…"][0].click().run()
    [b for b in at.button if b.label == "Confirm revoke"][0].click().run()
    with session(engine) as s:
        assert s.exec(select(ClientKey)).one().revoked_by == "olivia"
        events = [(e.actor, e.action) for e in audit.list_events(s) if e.action.split(".")[0] in ("key", "tenant")]
    assert set(events) >= {("olivia", "key.create"), ("olivia", "tenant.set"), ("olivia", "key.revoke")}


def test_a_disabled_user_is_logged_out_at_once(stack):
    engine, _ = stack
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["user"] = {"name": "olivia", "role": "operator"}
    at.run()
    assert at.title[0].value == "Fleet"
    with session(engine) as s:
        update_user(session=s, name="olivia", disabled=True)
    at.run()  # the next interaction: no page, no sidebar naming them (the app shows only its login page)
    assert not at.title and not any("olivia" in m.value for m in at.sidebar.markdown)
    fresh = AppTest.from_file(APP, default_timeout=60).run()  # and the password no longer logs in
    fresh.text_input[0].input("olivia")
    fresh.text_input[1].input(PASSWORD)
    fresh.button[0].click().run()
    assert "unknown user or wrong password" in fresh.error[0].value
