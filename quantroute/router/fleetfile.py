"""Startup fleet: nodes from the fleet file plus nodes registered earlier (the `node` table)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from quantroute.db.audit import utcnow
from quantroute.db.engine import session as db_session
from quantroute.db.node import list_nodes
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
        with db_session(router.engine) as sess:
            rows = list_nodes(session=sess)
    except Exception as e:  # noqa: BLE001 - start with the file's nodes when the DB is down
        log.warning("could not read registered nodes: %s", e)
        return
    for r in rows:
        reg = NodeRegistration(url=r.url, model=r.model, deployment=r.deployment, tier=r.tier, format=r.format,
                               method=r.method, checksum=r.checksum, hardware=r.hardware, vram_gb=r.vram_gb,
                               node_id=r.key)
        node = router.fleet.register(reg, speed=speed_for(r.hardware, r.tier),
                                     generation_started=_aware(r.generation_started))
        node.generation = max(node.generation, r.generation)


def _aware(dt):
    from datetime import timezone

    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


__all__ = ["load_nodes", "registrations_from_fleet", "utcnow"]
