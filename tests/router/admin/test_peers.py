"""The workers' control sockets (router/admin/peers.py): slots, asking every other worker, and the ways a peer fails."""

from __future__ import annotations

import asyncio
import os

import orjson
import pytest

from quantroute.router.admin.peers import WorkerPeers


def run(coro):
    return asyncio.run(coro)


def echo(name: str):
    async def handler(ask: dict) -> bytes:
        return orjson.dumps({"from": name, "ask": ask})
    return handler


def test_workers_take_the_lowest_free_slots_and_a_restarted_one_takes_its_predecessors(tmp_path):
    async def main():
        a, b, c = WorkerPeers(tmp_path), WorkerPeers(tmp_path), WorkerPeers(tmp_path)
        assert [await p.start({}) for p in (a, b, c)] == ["0", "1", "2"]
        await b.close()
        assert not (tmp_path / "worker-1.sock").exists()
        again = WorkerPeers(tmp_path)
        assert await again.start({}) == "1"  # at most N names for N workers: /metrics's label stays bounded
        for p in (a, c, again):
            await p.close()
    run(main())


def test_a_worker_asks_every_other_one_and_not_itself(tmp_path):
    async def main():
        peers = [WorkerPeers(tmp_path) for _ in range(3)]
        for n, p in enumerate(peers):
            await p.start({"who": echo(f"w{n}")})
        replies = await peers[1].ask("who", key="s-1")
        got = {r.worker: orjson.loads(r.body) for r in replies}
        assert got == {"0": {"from": "w0", "ask": {"op": "who", "key": "s-1"}},
                       "2": {"from": "w2", "ask": {"op": "who", "key": "s-1"}}}
        assert all(r.error is None for r in replies)
        for p in peers:
            await p.close()
    run(main())


def test_a_worker_that_died_is_left_out_and_its_slot_is_reused_over_its_stale_socket(tmp_path):
    async def main():
        a, b = WorkerPeers(tmp_path), WorkerPeers(tmp_path)
        await a.start({"who": echo("a")})
        await b.start({"who": echo("b")})
        # b dies without cleaning up: its listening socket closes, the file stays, its slot lock goes
        b._server.close()
        os.close(b._lock_fd)
        assert (tmp_path / "worker-1.sock").exists()
        assert await a.ask("who") == []  # refused: whatever it cached died with it
        c = WorkerPeers(tmp_path)
        assert await c.start({"who": echo("c")}) == "1"
        [reply] = await a.ask("who")
        assert orjson.loads(reply.body)["from"] == "c"
        await a.close()
        await c.close()
    run(main())


def test_a_worker_that_does_not_answer_in_time_is_reported_not_waited_for(tmp_path):
    async def main():
        stuck = asyncio.Event()

        async def hang(_: dict) -> bytes:
            await stuck.wait()
            return b""

        a, b = WorkerPeers(tmp_path, timeout_s=0.3), WorkerPeers(tmp_path)
        await a.start({})
        await b.start({"who": hang})
        [reply] = await a.ask("who")
        assert reply.worker == "1" and reply.body is None and "no answer within 0.3 s" in reply.error
        stuck.set()
        await a.close()
        await b.close()
    run(main())


@pytest.mark.parametrize(("op", "why"), [("nope", "KeyError"), ("boom", "RuntimeError: kaput")])
def test_an_op_it_does_not_know_or_one_that_fails_comes_back_as_an_error(tmp_path, op, why):
    async def main():
        async def boom(_: dict) -> bytes:
            raise RuntimeError("kaput")

        a, b = WorkerPeers(tmp_path), WorkerPeers(tmp_path)
        await a.start({})
        await b.start({"boom": boom})
        [reply] = await a.ask(op)
        still = await a.ask("boom")  # the worker that failed keeps answering
        await a.close()
        await b.close()
        return reply, still
    reply, still = run(main())
    assert reply.body is None and why in reply.error
    assert len(still) == 1 and "kaput" in still[0].error
