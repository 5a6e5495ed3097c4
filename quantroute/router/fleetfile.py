"""Fleet membership from outside: nodes from the fleet file plus nodes registered through the admin API of
any replica (the `node` table), read at start and refreshed while running."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from quantroute.db.audit import utcnow
from quantroute.db.engine import session as db_session
from quantroute.db.node import NodeRow, list_nodes
from quantroute.registration import NodeRegistration
from quantroute.router.admin import speed_for

if TYPE_CHECKING:
    from quantroute.router.app import Router

log = logging.getLogger(__name__)


def registrations_from_fleet(path) -> list[NodeRegistration]:
    from quantroute.fleet import load_fleet

    fleet = load_fleet(path)
    regs = []
    for n in fleet.nodes:
        d = n.deployment
        regs.append(NodeRegistration(url=n.url, model=d.model, deployment=d.id, tier=d.tier, format=d.format,
                                     method=d.method, checksum=d.checksum, hardware=n.hardware, vram_gb=n.vram_gb,
                                     node_id=n.id))
    return regs


def load_nodes(router: "Router") -> None:
    """Fleet file first, then DB rows (a registration made through the admin API is newer than the file)."""
    s = router.settings
    if s.fleet_file is not None:
        for reg in registrations_from_fleet(s.fleet_file):
            router.fleet.register(reg, speed=speed_for(reg.hardware, reg.tier.value))
    if router.engine is None:
        return
    try:
        rows = read_node_rows(router.engine)
    except Exception as e:  # noqa: BLE001 - start with the file's nodes when the DB is down
        log.warning("could not read registered nodes: %s", e)
        return
    apply_node_rows(router, rows)


def read_node_rows(engine) -> list[NodeRow]:
    with db_session(engine) as sess:
        return list_nodes(session=sess)


def apply_node_rows(router: "Router", rows: list[NodeRow]) -> list[str]:
    """Register each row that differs from what the fleet knows; returns the keys that changed. Unchanged
    nodes are left alone, so their health, load and in-flight counts survive a refresh."""
    changed = []
    for r in rows:
        if _known(router.fleet.nodes.get(r.key), r):
            continue
        reg = NodeRegistration(url=r.url, model=r.model, deployment=r.deployment, tier=r.tier, format=r.format,
                               method=r.method, checksum=r.checksum, hardware=r.hardware, vram_gb=r.vram_gb,
                               node_id=r.key)
        node = router.fleet.register(reg, speed=speed_for(r.hardware, r.tier),
                                     generation_started=_aware(r.generation_started))
        node.generation = max(node.generation, r.generation)
        changed.append(r.key)
    return changed


def _known(node, r: NodeRow) -> bool:
    return (node is not None and node.url == r.url.rstrip("/") and node.deployment == r.deployment
            and node.tier.value == r.tier and node.format == r.format and node.checksum == r.checksum
            and node.hardware == r.hardware and node.generation >= r.generation)


class NodeSync:
    """Keeps this replica's fleet in step with the `node` table, where every replica writes the nodes
    registered through its admin API: a refresh every `interval_s`, and one sooner when a request found no
    node (`kick`), at most once per `min_gap_s`."""

    def __init__(self, router: "Router", *, interval_s: float, min_gap_s: float = 1.0) -> None:
        self.router = router
        self.interval_s = interval_s
        self.min_gap_s = min(min_gap_s, interval_s)
        self.refreshes = 0
        self.errors = 0
        self._last = float("-inf")
        self._running: asyncio.Task | None = None

    async def refresh(self) -> list[str]:
        self._last = time.monotonic()
        try:
            rows = await asyncio.to_thread(read_node_rows, self.router.engine)
        except Exception as e:  # noqa: BLE001 - DB down: keep the nodes we know
            self.errors += 1
            log.warning("node refresh failed: %s", e)
            return []
        self.refreshes += 1
        changed = apply_node_rows(self.router, rows)
        if changed:
            log.info("nodes registered elsewhere picked up: %s", ", ".join(changed))
        return changed

    def kick(self) -> None:
        """Refresh soon, without waiting for it (called on the request path when no node was found)."""
        if self.router.engine is None or (self._running is not None and not self._running.done()):
            return
        if time.monotonic() - self._last < self.min_gap_s:
            return
        self._running = asyncio.get_running_loop().create_task(self.refresh())

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            if time.monotonic() - self._last >= self.interval_s / 2:  # a kick may just have refreshed
                await self.refresh()


def _aware(dt):
    from datetime import timezone

    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


__all__ = ["NodeSync", "apply_node_rows", "load_nodes", "registrations_from_fleet", "utcnow"]
