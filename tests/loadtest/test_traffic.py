import asyncio
import json
from collections import defaultdict
from pathlib import Path

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
