"""Where an eval run's answers come from, and who may choose.

A run against registered deployments (the fleet's nodes, or the deployments behind the configured router)
resolves each deployment id to an address the system knows: the person only picks from a list. A free
`URL#deployment` is an address the person typed; its server could answer anything, so it needs the operator
role (`eval.free_url`) and the run is recorded as source "url", which never opens a rollout's eval gate."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel
from sqlalchemy.engine import Engine

from quantroute.auth import require
from quantroute.db.engine import session as open_session
from quantroute.db.eval import FREE_URL_SOURCE, REGISTERED_SOURCE
from quantroute.db.node import list_nodes
from quantroute.evals.runner import EvalSetupError

REGISTERED, FREE_URL = REGISTERED_SOURCE, FREE_URL_SOURCE


class EvalTargets(BaseModel):
    """Both arms as endpoint specs (`URL#deployment`) and where they came from."""
    baseline: str
    candidate: str
    source: str  # registered | url
    started_by: str


def registered_nodes(engine: Engine) -> dict[str, str]:
    """deployment id -> base URL of a node registered for it (the node table the routers share)."""
    with open_session(engine) as s:
        nodes = list_nodes(session=s)
    out: dict[str, str] = {}
    for n in nodes:
        out.setdefault(n.deployment, n.url)
    return out


def is_free_url(spec: str) -> bool:
    return "://" in spec


def resolve_targets(engine: Engine, *, actor: str, baseline: str, candidate: str,
                    registered: Mapping[str, str]) -> EvalTargets:
    """Each arm is a registered deployment id (looked up in `registered`: deployment -> base URL) or, for an
    operator only, a free `URL#deployment`. Checks the actor's stored role; raises PermissionDenied or
    EvalSetupError (naming the registered deployments) otherwise."""
    free = [s for s in (baseline, candidate) if is_free_url(s)]
    require(engine, actor, "eval.free_url" if free else "eval.run")
    specs = []
    for arm, spec in (("baseline", baseline), ("candidate", candidate)):
        spec = spec.strip()
        if is_free_url(spec):
            specs.append(spec)
            continue
        if spec not in registered:
            have = ", ".join(sorted(registered)) or "none"
            raise EvalSetupError(f"{arm}: {spec!r} is not a registered deployment (registered: {have}); "
                                 "a free URL#deployment needs the operator role")
        specs.append(f"{registered[spec].rstrip('/')}#{spec}")
    return EvalTargets(baseline=specs[0], candidate=specs[1], source=FREE_URL if free else REGISTERED,
                       started_by=actor)
