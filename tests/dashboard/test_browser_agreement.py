"""Headless Chromium: an operator opens Evals → Live agreement, sees the rates and a suggestion with its evidence,
and with one click lands on the Policy page with that change as a draft, its diff and its what-if replay. A
screenshot of the tab lands in tests/artifacts/live-agreement.png."""

from __future__ import annotations

import os

import pytest

from tests.dashboard.browser import ARTIFACTS, CHROMIUM, chromium, goto, idle, login, no_reprs
from tests.dashboard.conftest import PASSWORD
from tests.dashboard.streamlit_server import streamlit_server
from tests.shadow.seed import seed_pairs

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Chromium at /usr/bin/chromium")]


@pytest.fixture
def dashboard(stack, tmp_path):
    engine, _ = stack
    seed_pairs(engine, rule="casual-chat", served="int4", shadow="fp16", n=40, agree=20)
    seed_pairs(engine, rule="greedy-structured", served="fp16", shadow="fp8", n=200, agree=200)
    with streamlit_server(tmp_path) as url:
        yield url


@pytest.mark.timeout(300)
def test_a_suggestion_opens_a_policy_draft_with_its_what_if_replay(dashboard):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium() as b:
        page = b.new_page(viewport={"width": 1400, "height": 1800})
        page.set_default_timeout(30_000)
        login(page, dashboard, "olivia", PASSWORD)
        goto(page, "Evals")
        idle(page)
        page.get_by_role("tab", name="Live agreement").click()
        page.get_by_text("By deployment pair (served vs shadow)").wait_for()
        page.get_by_text("20/40 shadow pairs agree").first.wait_for()
        idle(page)
        no_reprs(page, "live agreement")
        page.wait_for_timeout(1000)  # let the trend chart draw
        page.screenshot(path=str(ARTIFACTS / "live-agreement.png"), full_page=True)
        # the first suggestion is the raise of casual-chat (-2 -> 6), in the left column
        page.get_by_role("button", name="Open as policy draft with what-if replay").first.click()
        page.get_by_role("heading", name="Policy").first.wait_for()
        page.get_by_text("requests replayed").wait_for()
        page.get_by_text("rules.casual-chat.weight").first.wait_for(state="attached")  # the draft's diff row
        idle(page)
        no_reprs(page, "policy draft from a suggestion")
        page.screenshot(path=str(ARTIFACTS / "live-agreement-draft.png"), full_page=True)
        assert page.get_by_role("button", name="Save draft as new version").is_enabled()
