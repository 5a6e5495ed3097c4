"""Fleet membership from outside: nodes from the fleet file plus nodes registered through the admin API of
any replica (the `node` table), read at start and refreshed while running."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TypeGuard

from sqlalchemy.engine import Engine

from quantroute.catalog import speed_for
from quantroute.clock import aware
from quantroute.db.engine import require_engine
from quantroute.db.engine import session as db_session
from quantroute.db.node import NodeRow, list_nodes
from quantroute.fleet import load_fleet
from quantroute.node import NodeIdentity
from quantroute.router.nodes.pool import Node, NodePool

log = logging.getLogger(__name__)


def identities_from_fleet(path: Path) -> list[NodeIdentity]:
    return [n.identity() for n in load_fleet(path).nodes]


def load_nodes(pool: NodePool, *, fleet_file: Path | None, engine: Engine | None) -> None:
    """Fleet file first, then DB rows (a registration made through the admin API is newer than the file)."""
    if fleet_file is not None:
        for ident in identities_from_fleet(fleet_file):
            pool.register(ident, speed=speed_for(ident.hardware, ident.tier.value))
    if engine is None:
        return
    try:
        rows = read_node_rows(engine)
    except Exception as e:  # noqa: BLE001 - start with the file's nodes when the DB is down
        log.warning("could not read registered nodes: %s", e)
        return
    apply_node_rows(pool, rows)


def read_node_rows(engine: Engine) -> list[NodeRow]:
    with db_session(engine) as sess:
        return list_nodes(session=sess)


def apply_node_rows(pool: NodePool, rows: list[NodeRow]) -> list[str]:
    """Register each row that differs from what the pool knows; returns the keys that changed. Unchanged
    nodes are left alone, so their health, load and in-flight counts survive a refresh. A removed row (a
    tombstone) takes the node out, whether this replica knew it from the DB or from its fleet file; a draining
    one stops taking new requests."""
    changed = []
    for r in rows:
        known = pool.nodes.get(r.key)
        if r.state == "removed":
            if known is not None:
                pool.remove(r.key)
                changed.append(r.key)
            continue
        if _known(known, r):
            if known.draining != (r.state == "draining"):
                known.draining = r.state == "draining"
                pool.epoch += 1
                changed.append(r.key)
            continue
        node = pool.register(r.identity(), speed=speed_for(r.hardware, r.tier),
                             generation_started=aware(r.generation_started))
        node.generation = max(node.generation, r.generation)
        node.draining = r.state == "draining"
        changed.append(r.key)
    return changed


def _known(node: Node | None, r: NodeRow) -> TypeGuard[Node]:
    return (node is not None and node.url == r.url.rstrip("/") and node.deployment == r.deployment
            and node.tier.value == r.tier and node.format == r.format and node.checksum == r.checksum
            and node.hardware == r.hardware and node.generation >= r.generation)


class NodeSync:
    """Keeps this replica's node pool in step with the `node` table, where every replica writes the nodes
    registered through its admin API: a refresh every `interval_s`, and one sooner when a request found no
    node (`kick`), at most once per `min_gap_s`."""

    def __init__(self, pool: NodePool, engine: Engine | None, *, interval_s: float, min_gap_s: float = 1.0) -> None:
        self.pool = pool
        self.engine = engine
        self.interval_s = interval_s
        self.min_gap_s = min(min_gap_s, interval_s)
        self.refreshes = 0
        self.errors = 0
        self._last = float("-inf")
        self._running: asyncio.Task | None = None

    async def refresh(self) -> list[str]:
        self._last = time.monotonic()
        try:
            rows = await asyncio.to_thread(read_node_rows, require_engine(self.engine, who="node sync"))
        except Exception as e:  # noqa: BLE001 - DB down: keep the nodes we know
            self.errors += 1
            log.warning("node refresh failed: %s", e)
            return []
        self.refreshes += 1
        changed = apply_node_rows(self.pool, rows)
        if changed:
            log.info("nodes registered elsewhere picked up: %s", ", ".join(changed))
        return changed

    def kick(self) -> None:
        """Refresh soon, without waiting for it (called on the request path when no node was found)."""
        if self.engine is None or (self._running is not None and not self._running.done()):
            return
        if time.monotonic() - self._last < self.min_gap_s:
            return
        self._running = asyncio.get_running_loop().create_task(self.refresh())

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            if time.monotonic() - self._last >= self.interval_s / 2:  # a kick may just have refreshed
                await self.refresh()
