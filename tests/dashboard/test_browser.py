"""End to end in headless Chromium against a running demo stack (sim fleet + router + traffic + dashboard on
free ports): an operator changes a threshold and saves a draft; a reviewer approves and activates it; the
running router reports the new version; the operator starts the canary rollout, the eval gate opens (the demo
seeds the candidate vs its baseline on the suite the policy pins, and a staircase run of the candidate), the
reviewer ticks the checklist items only a person can vouch for and approves; the router sends the first
step's sessions to the candidate; the operator rolls it back with one click and the router serves only the
baseline again. After every action no page shows a Python repr, and the Policy tab stays where the reviewer
was. Screenshots of every page land in tests/artifacts/ (gitignored) for review."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator

import httpx
import pytest
from sqlmodel import col, select

from quantroute.db.engine import make_engine, session
from quantroute.db.request_log import RequestLog
from quantroute.demo import seed
from quantroute.demo import simulated as demo
from quantroute.rollout.checklist import BY_KEY
from quantroute.router.path.canary import bucket
from tests.conftest import wait_until
from tests.dashboard import browser as ui
from tests.dashboard.browser import ARTIFACTS, CHROMIUM, goto, idle, no_reprs

PAGES = ["Fleet", "Policy", "Sessions", "Evals", "Rollouts", "Capacity", "Audit"]
PASSWORDS = {"olivia": "op-pass-1", "rahul": "rev-pass-1", "ana": "ana-pass-1"}
MODEL, BASELINE, CANDIDATE = "llama3-8b", "llama3-8b-awq-w4a16", "llama3-8b-awq-w4a16-v2"
# Cheap-tier traffic (low priority, sampled small talk): the policy sends it to int4, the canary's tier.
CHAT = {"model": MODEL, "temperature": 0.9, "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi! tell me a silly joke"}]}

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Chromium at /usr/bin/chromium")]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with demo.demo_stack(tmp_path_factory.mktemp("demo") / "rt", time_scale=0.05, concurrency=2,
                         passwords=PASSWORDS) as st:
        seed.seed_evals(st, suite="data/evals/smoke.jsonl")  # the canary pair runs on the pinned suite anyway
        seed.seed_staircase(st, step_seconds=2, staircase=(1, 2))
        yield st


@pytest.fixture(scope="module")
def browser():
    with ui.chromium() as b:
        yield b


def to_top(page) -> None:
    page.mouse.move(800, 400)
    page.mouse.wheel(0, -20_000)


def shot(page, name: str, scroll_to: str | None = None) -> None:
    """A screenshot of what a person sees after an action, in a tall window (the main area scrolls)."""
    page.set_viewport_size({"width": 1400, "height": 1500})
    to_top(page)
    if scroll_to:
        page.get_by_text(scroll_to).first.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    page.screenshot(path=str(ARTIFACTS / name))
    page.set_viewport_size({"width": 1400, "height": 1000})


def selected_tab(page) -> str:
    return page.locator('[role="tab"][aria-selected="true"]').first.inner_text()


def login(page, url: str, name: str) -> None:
    ui.login(page, url, name, PASSWORDS[name])


def click(page, name: str) -> None:
    idle(page)
    page.get_by_role("button", name=name).click()


def logout(page) -> None:
    page.get_by_role("button", name="Log out").click()
    page.get_by_role("button", name="Log in").wait_for(timeout=30_000)


def active_version(stack) -> int:
    r = httpx.get(stack.router_url + "/admin/policy", headers={"authorization": f"Bearer {stack.admin_token}"})
    return r.json()["version"]


def first_step_sessions(percent: float) -> Iterator[str]:
    """Session keys the canary split puts in the candidate arm at `percent` (the router's own hash)."""
    return (k for k in (f"e2e-{i}" for i in range(100_000)) if bucket(k, MODEL) < percent)


def ask(stack, key: str) -> httpx.Response:
    r = httpx.post(stack.router_url + "/v1/chat/completions", json=CHAT, timeout=30,
                   headers={"x-session-id": key, "x-priority": "2"})
    assert r.status_code == 200, r.text
    return r


def served(stack, key: str) -> tuple[str | None, str | None]:
    """(arm, deployment) the running router picked for one cheap-tier request of session `key`."""
    r = ask(stack, key)
    assert r.headers["x-quantroute-tier"] == "int4", r.headers
    return r.headers.get("x-quantroute-arm"), r.headers["x-quantroute-deployment"]


def first_turns(stack, keys: Iterable[str], n: int, most_spilled: int = 40) -> dict[str, tuple[str | None, str]]:
    """(arm, deployment) of the first turns of sessions from `keys`, until `n` of them got int4. A first turn
    spills up when int4's nodes are at their knee under the demo's own traffic (a busy host): that session is
    pinned above int4 for good, so it is passed over; every other first turn must be int4."""
    got: dict[str, tuple[str | None, str]] = {}
    spilled = 0
    for key in keys:
        r = ask(stack, key)
        if r.headers.get("x-quantroute-reason", "").startswith("spilled up"):
            spilled += 1
            assert spilled <= most_spilled, f"{spilled} first turns spilled up: int4 stays at its knee"
            continue
        assert r.headers["x-quantroute-tier"] == "int4", r.headers
        got[key] = (r.headers.get("x-quantroute-arm"), r.headers["x-quantroute-deployment"])
        if len(got) == n:
            return got
    raise AssertionError(f"only {len(got)} of {n} sessions got int4 on their first turn")


def served_until(stack, keys: list[str], want: set[tuple[str | None, str]], timeout_s: float = 15.0) -> set:
    """What the router served `keys`, polled until it is `want` (the router picks up a new version on its own)."""
    wait_until(lambda: {served(stack, k) for k in keys} == want,
               what=lambda: f"{want} served (served: {({served(stack, k) for k in keys})})", timeout=timeout_s,
               interval=0.3)
    return {served(stack, k) for k in keys}


def logged_deployments(stack, keys: list[str], timeout_s: float = 15.0) -> set[str]:
    """Deployments the request log recorded for `keys` (written in batches off the hot path: polled)."""
    engine = make_engine(stack.db_url)

    def deployments() -> set[str | None]:
        with session(engine) as s:
            return set(s.exec(select(RequestLog.deployment).where(col(RequestLog.session_key).in_(keys))))

    try:
        wait_until(lambda: CANDIDATE in deployments(), what=lambda: f"{CANDIDATE} in the request log "
                   f"(logged: {deployments()})", timeout=timeout_s, interval=0.3)
        return deployments()
    finally:
        engine.dispose()


def tick(page, keys: list[str]) -> None:
    """Pick checklist items in the multiselect by their sentence (typed: the combobox lists what matches) and
    tick them."""
    box = page.get_by_role("combobox", name="Tick items you have verified")
    tags = page.locator('[data-testid="stMultiSelectTagsContainer"]').first
    for item in (BY_KEY[k].text for k in keys):
        idle(page)
        for attempt in range(3):  # a rerun that lands while typing replaces the input and drops the text
            box.click()
            box.press_sequentially(item)
            option = page.locator('[role="option"]', has_text=item).first
            try:
                option.wait_for(timeout=5000)
                break
            except Exception:
                if attempt == 2:
                    page.screenshot(path=str(ARTIFACTS / "failure.png"), full_page=True)
                    raise
                box.fill("")
        box.press("Enter")  # picks the first match
        tags.get_by_text(item, exact=True).wait_for()
    page.keyboard.press("Escape")
    click(page, "Tick")


@pytest.mark.timeout(900)  # minutes under a loaded machine; ~2 min alone
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
    page.get_by_text(f"score>={old + 1}").first.wait_for(state="attached")  # in the diff table: one changed row
    no_reprs(page, "policy diff")
    click(page, "Run what-if replay")
    page.get_by_text("requests replayed").wait_for()
    shot(page, "policy-whatif.png", scroll_to="Diff against the active version")
    page.get_by_label("Message (what changes and why)").fill("raise the top threshold by one point")
    click(page, "Save draft as new version")
    saved = before + 1
    page.get_by_text(f"Saved as version {saved}").wait_for()
    no_reprs(page, "policy saved")
    assert page.get_by_role("button", name="Deploy").count() == 0  # no Streamlit developer toolbar
    logout(page)

    # reviewer: approve and activate
    login(page, stack.dashboard_url, "rahul")
    goto(page, "Policy")
    page.get_by_role("tab", name="History, approve, activate, rollback").click()
    click(page, f"Approve version {saved}")  # the newest version is the one selected
    page.get_by_text(f"Version {saved} approved by rahul").wait_for()
    assert selected_tab(page) == "History, approve, activate, rollback"  # the tab stays where the reviewer was
    no_reprs(page, "policy approved")
    shot(page, "policy-approved.png")
    click(page, f"Activate version {saved}")  # no need to reopen History
    page.get_by_text(f"Version {saved} is active (was version {before})").wait_for()
    assert selected_tab(page) == "History, approve, activate, rollback"
    no_reprs(page, "policy activated")
    wait_until(lambda: active_version(stack) == saved, what=f"version {saved} active", timeout=15, interval=0.2)
    assert active_version(stack) == saved  # the running router hot-reloaded the reviewed version
    logout(page)

    # operator: start the rollout; the gate opens on the seeded run on the pinned suite
    login(page, stack.dashboard_url, "olivia")
    goto(page, "Rollouts")
    click(page, f"Start rollout of {CANDIDATE}")
    page.get_by_text(f"Rollout of {CANDIDATE} started by olivia").wait_for()
    page.get_by_text("awaiting-approval").first.wait_for()
    no_reprs(page, "rollout started")
    phase = page.locator('[data-testid="stMetricValue"]').first  # shown whole, not "awaiting-ap…"
    assert phase.evaluate("e => [e, ...e.querySelectorAll('*')].every(x => x.scrollWidth <= x.clientWidth + 1)")
    assert "passed" in page.get_by_text("gate: run").first.inner_text()
    logout(page)

    # reviewer: tick what only a person can vouch for, then approve; the candidate gets the first step
    login(page, stack.dashboard_url, "rahul")
    goto(page, "Rollouts")
    person_items = ["environment_recorded", "config_and_license", "memory_budget", "baseline_established",
                    "kernel_support", "calibration_data"]
    tick(page, person_items)
    page.get_by_text(f"rahul ticked {len(person_items)} checklist item(s)").wait_for()
    no_reprs(page, "checklist ticked")
    click(page, "Approve rollout")
    outcome = page.get_by_text("Rollout approved by rahul").first
    outcome.wait_for()
    assert f"{CANDIDATE} now gets 1 % of new {MODEL} sessions" in outcome.inner_text(), outcome.inner_text()
    page.get_by_text("progressing").first.wait_for()
    shot(page, "rollouts-approved.png")
    no_reprs(page, "rollout approved")
    keys = list(first_turns(stack, first_step_sessions(1.0), 4))
    assert served_until(stack, keys, {("candidate", CANDIDATE)}) == {("candidate", CANDIDATE)}
    assert CANDIDATE in logged_deployments(stack, keys)
    goto(page, "Audit")
    page.wait_for_timeout(5000)  # past the dashboard's 5 s query cache, which still holds the pre-step series
    goto(page, "Rollouts")  # again, now with the candidate's traffic in the guard charts
    page.wait_for_timeout(1500)
    page.screenshot(path=str(ARTIFACTS / "rollouts-progressing.png"), full_page=True)
    logout(page)

    # operator: one-click rollback with a confirm; the same sessions go back to the baseline
    login(page, stack.dashboard_url, "olivia")
    goto(page, "Rollouts")
    idle(page)
    page.get_by_role("button", name=re.compile(r"^(undo\s*)?Rollback$")).click()  # the icon is a ligature
    page.get_by_role("button", name="Confirm rollback").wait_for()
    click(page, "Confirm rollback")
    outcome = page.get_by_text(f"Rollout of {CANDIDATE} rolled back by olivia").first
    try:
        outcome.wait_for()
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "failure.png"), full_page=True)
        raise
    assert f"returns to {BASELINE}" in outcome.inner_text(), outcome.inner_text()
    page.get_by_text("rolled-back").first.wait_for()
    no_reprs(page, "rollout rolled back")
    back = served_until(stack, keys, {("baseline", BASELINE)})
    assert back == {("baseline", BASELINE)}, back  # pinned candidate sessions re-armed to the baseline
    fresh = first_turns(stack, (f"after-{i}" for i in range(1000)), 8)
    assert {dep for _, dep in fresh.values()} == {BASELINE}, fresh

    # Fleet with Live on: the fleet state re-runs on its own; the page stays usable (navigation below)
    goto(page, "Fleet")
    idle(page)
    page.get_by_text("Live (refresh every 5 s)").click()
    page.wait_for_timeout(6000)  # at least one refresh
    assert page.locator('[data-testid="stException"]').count() == 0
    page.get_by_role("heading", name="Nodes").wait_for()

    page.set_viewport_size({"width": 1400, "height": 1800})  # the main area scrolls: a tall view shows it all
    for title in PAGES:
        goto(page, title)
        page.wait_for_timeout(1500)  # let charts draw
        no_reprs(page, title)
        page.screenshot(path=str(ARTIFACTS / f"{title.lower()}.png"), full_page=True)
    page.close()
