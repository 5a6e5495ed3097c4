"""Headless Chromium against a running dashboard: an operator opens Tenants, sees usage per tenant and tier with
its cost against all on FP16, creates a key (shown once, stored as its hash), and revokes it; when the operator
is disabled meanwhile, their next click lands on the login page. Screenshots land in tests/artifacts/."""

from __future__ import annotations

import os

import pytest
from sqlmodel import select

from quantroute.db.engine import session
from quantroute.db.tenant import ClientKey
from quantroute.db.user import update_user
from quantroute.tenants import create_key, key_hash
from tests.dashboard.browser import ARTIFACTS, CHROMIUM, chromium, goto, idle, login, no_reprs
from tests.dashboard.conftest import PASSWORD
from tests.dashboard.streamlit_server import streamlit_server
from tests.dashboard.test_tenants import seed_usage

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Chromium at /usr/bin/chromium")]


@pytest.fixture
def dashboard(stack, tmp_path):
    engine, _ = stack
    seed_usage(engine)
    create_key(engine, actor="olivia", tenant="acme", label="batch")
    with streamlit_server(tmp_path) as url:
        yield url


@pytest.mark.timeout(300)
def test_an_operator_creates_and_revokes_a_key_and_a_disabled_operator_is_logged_out(stack, dashboard):
    engine, _ = stack
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium() as b:
        page = b.new_page(viewport={"width": 1400, "height": 1800})
        page.set_default_timeout(30_000)
        login(page, dashboard, "olivia", PASSWORD)
        goto(page, "Tenants")
        page.get_by_text("What it cost, and what it would have cost all on FP16").wait_for()
        idle(page)
        no_reprs(page, "tenants")
        page.wait_for_timeout(1000)  # let the chart draw
        page.screenshot(path=str(ARTIFACTS / "tenants.png"), full_page=True)

        page.get_by_role("textbox", name="Tenant").fill("bank")
        page.get_by_role("textbox", name="Label").fill("nightly")
        page.get_by_role("button", name="Create key").click()
        page.get_by_text("Copy the key now").wait_for()
        shown = page.locator('[data-testid="stCode"]').first.inner_text().strip()
        assert shown.startswith("qk_")
        with session(engine) as s:
            row = s.exec(select(ClientKey).where(ClientKey.tenant == "bank")).one()
        assert row.key_hash == key_hash(shown) and row.created_by == "olivia"
        idle(page)
        no_reprs(page, "a key created")

        page.get_by_role("button", name="Revoke…").click()
        page.get_by_role("button", name="Confirm revoke").click()
        page.get_by_text("revoked.").first.wait_for()
        with session(engine) as s:  # the first active key in the list (acme's) is the one revoked
            revoked = [k.revoked_by for k in s.exec(select(ClientKey)) if k.revoked_at is not None]
        assert revoked == ["olivia"]

        with session(engine) as s:
            update_user(session=s, name="olivia", disabled=True)
        idle(page)
        page.get_by_text("7 days", exact=True).click()  # any interaction re-checks the user
        page.get_by_role("button", name="Log in").wait_for()
        # the login form can draw while the last page's elements are still fading out: wait until they are gone
        page.get_by_text("olivia · ").first.wait_for(state="detached")
        assert page.get_by_text("olivia · ").count() == 0
        b.close()
