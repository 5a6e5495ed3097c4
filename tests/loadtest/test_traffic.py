import asyncio
import json
from collections import defaultdict
from pathlib import Path

import httpx
import pytest

from quantroute.loadtest.traffic import TrafficError, load_traffic, parse_traffic, replay, units, with_model

REPO = Path(__file__).resolve().parents[2]


def line(**kw):
    d = {"session": None, "turn": 1, "class": "tolerant",
         "body": {"model": "llama3-8b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 32},
         "headers": {}}
    d.update(kw)
    return json.dumps(d)


def test_errors_name_every_bad_line_and_field():
    text = "\n".join([line(), "{not json", line(**{"class": "risky"}), line(session="s-1", turn=2),
                      line(body={"model": "m", "max_tokens": 5})])
    with pytest.raises(TrafficError) as e:
        parse_traffic(text, source="mix.jsonl")
    lines = [n for n, _ in e.value.issues]
    assert lines == [2, 3, 4, 5]
    msg = str(e.value)
    assert "mix.jsonl" in msg and "line 3: class" in msg and "expects turn 1" in msg and "messages" in msg


def test_shipped_mixes_load_and_group_sessions_in_turn_order():
    lines = load_traffic(REPO / "data/traffic/mixed.jsonl")
    us = units(lines)
    assert sum(len(u.lines) for u in us) == len(lines) == 300
    sessions = [u for u in us if u.session]
    assert len(sessions) == 19
    for u in sessions:
        assert [ln.turn for ln in u.lines] == list(range(1, len(u.lines) + 1))
    assert {ln.body["model"] for ln in with_model(lines, "llama-13b")} == {"llama-13b"}


def test_replay_sends_turn_after_turn_with_a_fresh_session_id_per_replay(node_url):
    lines = load_traffic(REPO / "data/traffic/chat-only.jsonl")
    results = []

    async def go():
        stop = asyncio.Event()
        task = asyncio.create_task(replay(node_url, lines, concurrency=6, stop_event=stop, on_result=results.append,
                                          run_id="t1"))
        while len(results) < 160 and not task.done():
            await asyncio.sleep(0.05)
        stop.set()
        await task

    asyncio.run(go())
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    by_session = defaultdict(list)
    for r in results:
        if r.session:
            by_session[r.session].append(r)
    assert by_session, "chat-only.jsonl has sessions"
    assert all(".t1." in s for s in by_session)
    # chat-only.jsonl has 100 lines: once past them, the same file session is replayed under a new id
    assert len({s.rsplit(".", 1)[1] for s in by_session}) >= 2
    for rs in by_session.values():
        rs.sort(key=lambda r: r.started)
        assert [r.turn for r in rs] == list(range(1, len(rs) + 1))
        for prev, nxt in zip(rs, rs[1:]):
            assert nxt.started >= prev.ended  # turn k+1 only after turn k finished
    assert all(r.ttft is not None and r.output_tokens > 0 for r in results)


def test_distinct_prompts_give_every_replay_its_own_prefix_and_a_session_one_prefix():
    """A file replayed over and over resends its prompts; a prefix cache would serve them across units. With
    distinct_prompts every replay of a unit opens with its own system message, shared by that session's turns."""
    session = [line(session="s1", turn=1), line(session="s1", turn=2, body={
        "model": "llama3-8b", "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                     {"role": "user", "content": "more"}]})]
    single = [line(body={"model": "llama3-8b", "prompt": "2 + 2 =", "max_tokens": 4})]
    lines = parse_traffic("\n".join(session + single))
    seen: list[tuple[str | None, dict]] = []

    async def answer(request):
        await asyncio.sleep(0)  # an answer that never yields would starve the loop that sets `stop`
        seen.append((request.headers.get("x-session-id"), json.loads(request.content)))
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}],
                                         "usage": {"completion_tokens": 1}})

    async def go(distinct: bool):
        seen.clear()
        stop = asyncio.Event()
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            task = asyncio.create_task(replay("http://sim", lines, concurrency=1, stop_event=stop,
                                              on_result=lambda r: None, client=client, force_stream=False,
                                              distinct_prompts=distinct, run_id="r"))
            while len(seen) < 9:
                await asyncio.sleep(0.01)
            stop.set()
            await task
        return list(seen)

    plain = asyncio.run(go(False))
    assert all(b.get("messages", [{}])[0].get("role") != "system" for _, b in plain)
    assert not any(b.get("prompt", "").startswith("Conversation") for _, b in plain)
    tagged = asyncio.run(go(True))
    openers = [b["messages"][0]["content"] if "messages" in b else b["prompt"].split("\n")[0] for _, b in tagged]
    by_unit: dict[str, list[str]] = defaultdict(list)
    for (sid, _), opener in zip(tagged, openers):
        assert opener.startswith("Conversation r.")
        by_unit[sid or opener].append(opener)
    assert all(len(set(v)) == 1 for v in by_unit.values())  # a session's turns share their opener
    assert len(set(openers)) == len(by_unit) >= 3  # and no two replays share one
    first = next(b for sid, b in tagged if sid)
    assert first["messages"][1:] == session_body(session[0])


def session_body(raw: str) -> list:
    return json.loads(raw)["body"]["messages"]
