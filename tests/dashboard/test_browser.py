"""End to end in headless Chromium against a running demo stack (sim fleet + router + traffic + dashboard on
free ports): an operator changes a threshold and saves a draft; a reviewer approves and activates it; the
running router reports the new version; the operator starts the canary and rolls it back with one click.
Screenshots of every page land in tests/artifacts/ (gitignored) for review."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from quantroute import demo

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
PAGES = ["Fleet", "Policy", "Sessions", "Evals", "Rollouts", "Capacity", "Audit"]
PASSWORDS = {"olivia": "op-pass-1", "rahul": "rev-pass-1", "ana": "ana-pass-1"}

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Chromium at /usr/bin/chromium")]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with demo.demo_stack(tmp_path_factory.mktemp("demo") / "rt", time_scale=0.05, concurrency=2,
                         passwords=PASSWORDS) as st:
        demo.seed_evals(st, suite="data/evals/smoke.jsonl")
        yield st


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu",
                                                              "--disable-background-networking"])
        yield b
        b.close()


def login(page, url: str, name: str) -> None:
    page.goto(url)
    page.get_by_role("textbox", name="User").fill(name)
    page.get_by_role("textbox", name="Password").fill(PASSWORDS[name])
    page.get_by_role("button", name="Log in").click()
    page.get_by_text(f"{name} · ").wait_for(timeout=30_000)


def idle(page) -> None:
    """Wait until the script run finished (a click during a run can land on an element being replaced)."""
    page.wait_for_timeout(300)
    page.locator('[data-testid="stStatusWidget"]').wait_for(state="hidden")


def click(page, name: str) -> None:
    idle(page)
    page.get_by_role("button", name=name).click()


def goto(page, title: str) -> None:
    page.get_by_role("link", name=title).click()
    page.get_by_role("heading", name=title).first.wait_for(timeout=30_000)


def logout(page) -> None:
    page.get_by_role("button", name="Log out").click()
    page.get_by_role("button", name="Log in").wait_for(timeout=30_000)


def active_version(stack) -> int:
    r = httpx.get(stack.router_url + "/admin/policy", headers={"authorization": f"Bearer {stack.admin_token}"})
    return r.json()["version"]


@pytest.mark.timeout(240)
def test_operator_reviewer_canary_flow(stack, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(30_000)
    before = active_version(stack)

    # operator: change a threshold, save a draft
    login(page, stack.dashboard_url, "olivia")
    goto(page, "Policy")
    page.get_by_role("tab", name="Thresholds").click()
    box = page.get_by_label("min score #1")
    old = float(box.input_value())
    box.fill(str(old + 1))
    box.press("Enter")
    page.get_by_text(f"thresholds.score>={old + 1}").first.wait_for(state="attached")  # in the diff table
    click(page, "Run what-if replay")
    page.get_by_text("requests replayed").wait_for()
    page.get_by_label("Message (what changes and why)").fill("raise the top threshold by one point")
    click(page, "Save draft as new version")
    page.get_by_text("saved as version").wait_for()
    saved = before + 1
    logout(page)

    # reviewer: approve and activate
    login(page, stack.dashboard_url, "rahul")
    goto(page, "Policy")
    page.get_by_role("tab", name="History, approve, activate, rollback").click()
    click(page, f"Approve version {saved}")
    page.get_by_text(f"approve {saved}: done").wait_for()
    page.get_by_role("tab", name="History, approve, activate, rollback").click()
    click(page, f"Activate version {saved}")
    page.get_by_text(f"activate {saved}: done").wait_for()
    deadline = time.monotonic() + 15
    while active_version(stack) != saved and time.monotonic() < deadline:
        time.sleep(0.2)
    assert active_version(stack) == saved  # the running router hot-reloaded the reviewed version
    logout(page)

    # operator: start the canary, then one-click rollback with a confirm
    login(page, stack.dashboard_url, "olivia")
    goto(page, "Rollouts")
    click(page, "Start rollout of llama3-8b-awq-w4a16-v2")
    page.get_by_text("rollout start: done").wait_for()
    click(page, "⏪ Rollback")
    page.get_by_role("button", name="Confirm rollback").wait_for()
    click(page, "Confirm rollback")
    outcome = page.get_by_text("rollout rollback").first
    try:
        outcome.wait_for()
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "failure.png"), full_page=True)
        raise
    assert "rollout rollback: done" in outcome.inner_text(), outcome.inner_text()
    page.get_by_text("rolled-back").first.wait_for()

    for title in PAGES:
        goto(page, title)
        page.wait_for_timeout(1500)  # let charts draw
        page.screenshot(path=str(ARTIFACTS / f"{title.lower()}.png"), full_page=True)
    page.close()
