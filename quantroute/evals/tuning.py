"""What the policy tuner (quantroute.tune) reads, gathered from where it lives: per-category eval deltas of each
quantized deployment against FP16 from stored eval runs, the traffic from the request log's replays, the fleet's
nodes as the capacity model sees them, and the labelled sensitive set. `quantroute policy tune` calls these."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from quantroute.capacity import FORMATS, ModelShape
from quantroute.catalog import DATA_DIR, load_hardware, load_models, pick
from quantroute.clock import utcnow
from quantroute.db.engine import session as db_session
from quantroute.db.request_log import RequestLog
from quantroute.evals.runs import latest_done_run
from quantroute.fleet import Fleet
from quantroute.policy.model import Policy
from quantroute.quality_cost import TierDeltas, deltas_from_report
from quantroute.slo import NamedSlo
from quantroute.tiers import Tier
from quantroute.tune import NodeModel, Tuner, TuneRequest, TuneResult, tuned_policy

LABELLED = DATA_DIR / "requests" / "labelled.jsonl"


def fleet_nodes(fleet: Fleet) -> tuple[list[NodeModel], ModelShape]:
    hw = load_hardware()
    shape = pick(load_models(), fleet.model_shape, "model shape")
    nodes = [NodeModel(n.deployment.tier, pick(hw, n.hardware, "hardware"), FORMATS[n.deployment.format.lower()],
                       n.max_num_seqs) for n in fleet.nodes]
    return nodes, shape


def eval_deltas(engine: Engine, fleet: Fleet) -> tuple[dict[str, TierDeltas], str]:
    """Each quantized tier's deltas from the newest finished eval run of one of its deployments against an FP16
    deployment of the same model; and, for the tiers without one, the commands that would make them."""
    out: dict[str, TierDeltas] = {}
    todo: list[str] = []
    deps = {(n.deployment.id, n.deployment.tier, n.deployment.model) for n in fleet.nodes}
    fp16 = {m: d for d, t, m in sorted(deps) if t == Tier.fp16}
    for dep, tier, model in sorted(deps, key=lambda x: (x[1].rank, x[0])):
        if tier == Tier.fp16 or tier.value in out:
            continue
        base = fp16.get(model)
        run = latest_done_run(engine, baseline=base, candidate=dep) if base else None
        if run is None or run.report is None:
            baseline = base or "<an fp16 deployment>"
            todo.append(f"quantroute eval run --suite data/evals/golden.jsonl --baseline <url>#{baseline} "
                        f"--candidate <url>#{dep}")
            continue
        out[tier.value] = deltas_from_report(run.report, tier=tier, deployment=dep, run_id=run.id)
    hint = ("missing runs: " + "; ".join(todo)) if todo else ""
    return out, hint


def logged_requests(engine: Engine, *, limit: int) -> list[TuneRequest]:
    """The newest `limit` logged requests that carry their body (prompt storage full or redacted), oldest first."""
    with db_session(engine) as s:
        rows = s.exec(select(RequestLog).where(col(RequestLog.replay).is_not(None))
                      .order_by(col(RequestLog.id).desc()).limit(limit)).all()
    out = []
    for r in reversed(rows):
        rep = r.replay
        if isinstance(rep, dict) and isinstance(rep.get("body"), dict):
            out.append(TuneRequest(rep["body"], rep.get("headers") or {}, r.session_key))
    return out


def labelled_guard(model: str, path: Path = LABELLED) -> list[TuneRequest]:
    """The hand-labelled requests an operator put on FP16: the tuner serves none of them below FP8."""
    if not path.is_file():
        return []
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return [TuneRequest({**r["body"], "model": model}, {k.lower(): v for k, v in (r.get("headers") or {}).items()})
            for r in rows if r.get("expected_tier") == Tier.fp16.value]


def models_of(requests: Sequence[TuneRequest]) -> set[str]:
    return {str(r.body.get("model")) for r in requests}


def propose(engine: Engine, active: Policy, fleet: Fleet, requests: Sequence[TuneRequest], slo: NamedSlo, *,
            budget: float, category_budget: float, version: int,
            sensitive: Sequence[TuneRequest] = ()) -> tuple[TuneResult, Policy | None, int]:
    """The tuner on the stored evals, the fleet and `requests` (the labelled set and `sensitive` guarded): its
    result, the draft of its best candidate (None: none within the budget) and how many requests were guarded.
    Raises MissingEvals or SloUnmeetable."""
    deltas, hint = eval_deltas(engine, fleet)
    nodes, shape = fleet_nodes(fleet)
    guard = labelled_guard(next(iter(sorted(active.models())))) + list(sensitive)
    result = Tuner(active, requests, deltas, nodes, shape, slo, budget_pts=budget,
                   category_budget_pts=category_budget, guard=guard, eval_hint=hint).run()
    if result.best is None:
        return result, None, len(guard)
    draft = tuned_policy(active, result.best, slo, version=version, author="quantroute policy tune",
                         created_at=utcnow(), budget=f"{budget:g} / {category_budget:g} pts")
    return result, draft, len(guard)
