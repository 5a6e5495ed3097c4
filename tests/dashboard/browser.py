"""What every headless-Chromium test of the dashboard shares: the browser as this machine runs it, logging in,
moving between pages, and the checks run after each action."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
# No sandbox (we run as root), no GPU, and no background fetches (the machine has no internet to wait for)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"  # screenshots for review (gitignored)
# What a Python object looks like when it leaks onto a page: reprs, and a diff value cut with "...".
REPRS = re.compile(r"datetime\.datetime\(|ItemView\(|RolloutStatus\(|None → None|\.\.\.\s*$", re.M)


@contextmanager
def chromium() -> Iterator:
    """A headless Chromium browser (Playwright's sync API)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


def login(page, url: str, name: str, password: str) -> None:
    page.goto(url)
    page.get_by_role("textbox", name="User").fill(name)
    page.get_by_role("textbox", name="Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.get_by_text(f"{name} · ").wait_for(timeout=30_000)


def idle(page) -> None:
    """Wait until the script run finished (a click during a run can land on an element being replaced)."""
    page.wait_for_timeout(300)
    page.locator('[data-testid="stStatusWidget"]').wait_for(state="hidden")


def goto(page, title: str) -> None:
    page.get_by_role("link", name=title).click()
    page.get_by_role("heading", name=title).first.wait_for(timeout=30_000)


def no_reprs(page, where: str) -> None:
    """The page as a person reads it (main area, tables included) shows no Python repr and no exception."""
    idle(page)
    text = page.locator('[data-testid="stMain"]').inner_text()
    cells = page.locator('[data-testid="stDataFrame"]')
    for i in range(cells.count()):  # the grid draws on a canvas: read its cells through the accessible table
        text += "\n" + cells.nth(i).locator("table").first.inner_text() if cells.nth(i).locator("table").count() else ""
    leak = REPRS.search(text)
    assert leak is None, f"{where}: {text[max(0, leak.start() - 200):leak.end() + 50]!r}"
    assert page.locator('[data-testid="stException"]').count() == 0, f"{where}: {text[:2000]}"
