"""Pins across replicas and workers: a session's turns never change tier, arm or deployment, however fast its
turns alternate between replicas, and a replica killed right after a first turn has already stored the pin.

Turn 1 is tolerant (int4) and later turns are sensitive (fp16 on their own): a replica that routed a later turn
by itself instead of by the pin would show it at once."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
from click.testing import CliRunner
from sqlalchemy import text

from quantroute.db.engine import make_engine
from tests.conftest import wait_until
from tests.router.conftest import (
    INT4,
    INT4_V2,
    MODEL,
    SENSITIVE,
    TOLERANT,
    activate_pointer,
    chat,
    kill,
    router_at,
    router_process,
    write_policy,
)

CANARY = [{"model": MODEL, "baseline": INT4, "candidate": INT4_V2, "percent": 50}]


def turn(client: openai.OpenAI, session: str, i: int) -> tuple[str, str, str | None]:
    """One turn through the real SDK (every other one streamed): (tier, deployment, arm) from the headers; a
    later turn says its tier came from the pin."""
    messages = TOLERANT if i == 0 else SENSITIVE
    call = client.chat.completions.with_raw_response.create
    raw = call(model=MODEL, messages=messages, max_tokens=4, stream=i % 2 == 1,
               extra_headers={"x-session-id": session})
    body = raw.parse()
    if i % 2 == 1:
        assert [c for c in body]  # the whole stream was read before the next turn goes out
    h = raw.headers
    assert (h.get("x-quantroute-pinned") == "true") == (i > 0), (session, i, dict(h))
    return h["x-quantroute-tier"], h["x-quantroute-deployment"], h.get("x-quantroute-arm")


@pytest.mark.postgres
@pytest.mark.parametrize("synchronous", [True, False], ids=["flushed", "async-commit"])
def test_turns_alternating_between_two_replicas_as_fast_as_a_client_can_never_move(make_settings, pg_url, policies,
                                                                                   synchronous):
    """Also with `pin_synchronous_commit` off: a commit is visible to the other replica at once either way."""
    write_policy(policies, 2, canaries=CANARY)  # arms too: a canary at 50 %
    settings = [make_settings(db_url=pg_url, pin_synchronous_commit=synchronous) for _ in range(2)]
    with router_at(settings[0]) as (u1, a1), router_at(settings[1]) as (u2, a2):
        assert a1.pin_committer.synchronous is a2.pin_committer.synchronous is synchronous
        clients = [openai.OpenAI(base_url=u + "/v1", api_key="unused", max_retries=0) for u in (u1, u2)]

        def session(n: int) -> list[tuple]:
            key = f"alt-{n}"
            first = n % 2  # half the sessions start on each replica
            return [turn(clients[(first + i) % 2], key, i) for i in range(6)]

        with ThreadPoolExecutor(8) as pool:  # sessions run side by side, each turn right after the last
            seen = list(pool.map(session, range(48)))
        for n, turns in enumerate(seen):
            assert len(set(turns)) == 1, f"session alt-{n} moved: {turns}"
            assert turns[0][0] == "int4"
        assert {t[0][2] for t in seen} == {"baseline", "candidate"}
        assert {t[0][1] for t in seen} == {INT4, INT4_V2}
        for app in (a1, a2):  # every pin was stored at the first try
            assert app.pin_committer.errors == 0


@pytest.mark.postgres
def test_a_replica_killed_right_after_first_turns_has_stored_their_pins(make_settings, pg_url):
    settings = make_settings(db_url=pg_url)
    proc, url = router_process(settings, workers=2)
    answered: list[str] = []
    first_done = threading.Event()

    def first_turn(n: int) -> None:
        with contextlib.suppress(httpx.HTTPError):
            r = chat(url, TOLERANT, session=f"kill-{n}")
            if r.status_code == 200 and r.headers["x-quantroute-tier"] == "int4":
                answered.append(f"kill-{n}")
                first_done.set()

    threads = [threading.Thread(target=first_turn, args=(n,)) for n in range(8)]
    try:
        for t in threads:
            t.start()
        assert first_done.wait(60)
        kill(proc)  # the moment the first answer is complete: others may be cut off mid-flight
    finally:
        kill(proc)
        for t in threads:
            t.join(30)
    assert answered
    with router_at(make_settings(db_url=pg_url)) as (other, _):  # another replica, empty cache
        for key in answered:
            r = chat(other, SENSITIVE, session=key)
            assert r.status_code == 200 and r.headers["x-quantroute-tier"] == "int4", key


def test_workers_share_pins_and_policy_activation(make_settings, policies):
    settings = make_settings()  # SQLite: workers on one host share the file as replicas share PostgreSQL
    proc, url = router_process(settings, workers=2)
    try:
        for n in range(20):  # a new connection per request: the kernel spreads them over both workers
            tiers = {chat(url, TOLERANT if i == 0 else SENSITIVE, session=f"w-{n}").headers["x-quantroute-tier"]
                     for i in range(3)}
            assert tiers == {"int4"}, f"session w-{n}: {tiers}"
        eng = make_engine(settings.db_url)

        def boots() -> set[str]:  # a request id starts with its process's boot id
            with eng.connect() as c:
                return {r[0].split("-")[0] for r in c.execute(text("select request_id from request_log"))}

        wait_until(lambda: len(boots()) == 2, what=lambda: f"both workers to serve (request ids from {boots()})",
                   timeout=60, interval=0.1)
        eng.dispose()

        write_policy(policies, 2, activate=False)
        activate_pointer(policies, 2)
        versions: list[str] = []

        def moved() -> bool:  # every worker moved: 20 answers in a row under version 2
            versions.append(chat(url, TOLERANT).headers["x-quantroute-policy-version"])
            return versions[-20:] == ["2"] * 20

        wait_until(moved, what=lambda: f"20 answers in a row under version 2 (last 20: {versions[-20:]})", timeout=60,
                   interval=0)
    finally:
        kill(proc)


def test_several_workers_need_a_database():
    from quantroute.cli.main import cli

    res = CliRunner().invoke(cli, ["router", "--no-db", "--workers", "2"])
    assert res.exit_code == 2 and "--workers 2 needs a database" in res.output
