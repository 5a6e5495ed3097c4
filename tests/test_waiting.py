"""The tests' one polling helper: it returns what the predicate found, and a timeout names what was awaited."""

from __future__ import annotations

import itertools

import pytest

from tests.conftest import wait_until


def test_returns_the_first_truthy_value():
    calls = itertools.count(1)
    assert wait_until(lambda: max(next(calls) - 2, 0), what="the third call", interval=0) == 1


def test_a_timeout_names_what_was_awaited_and_the_last_value():
    with pytest.raises(AssertionError, match=r"waiting for the router to load v3 \(last: \[\]\)"):
        wait_until(list, what="the router to load v3", timeout=0, interval=0)


def test_the_description_may_be_computed_at_the_failure():
    seen = ["v1", "v2"]
    with pytest.raises(AssertionError, match=r"waiting for v3 \(served: v1, v2\)"):
        wait_until(lambda: "v3" in seen, what=lambda: f"v3 (served: {', '.join(seen)})", timeout=0, interval=0)


def test_ignored_errors_count_as_not_yet_and_are_chained():
    attempts = iter([ConnectionError("refused"), ConnectionError("refused"), "up"])

    def probe() -> str:
        got = next(attempts)
        if isinstance(got, Exception):
            raise got
        return got

    assert wait_until(probe, what="the server", ignore=(ConnectionError,), interval=0) == "up"

    def down() -> str:
        raise ConnectionError("down")

    with pytest.raises(AssertionError, match="ConnectionError: down") as failed:
        wait_until(down, what="the server", ignore=(ConnectionError,), timeout=0, interval=0)
    assert isinstance(failed.value.__cause__, ConnectionError)


def test_other_errors_propagate():
    with pytest.raises(ZeroDivisionError):
        wait_until(lambda: 1 / 0, what="nothing", timeout=5, interval=0)
