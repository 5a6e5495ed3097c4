"""Every write the dashboard makes. Each function re-checks the actor's role against the database
(`quantroute.auth.require`) before acting, whatever the UI showed, and leaves an audit event (the policy
store and the rollout service audit their own writes with the same actor)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from quantroute.admin_client import RouterAdmin, RouterUnavailable
from quantroute.auth import require
from quantroute.db import audit
from quantroute.db.engine import session as open_session
from quantroute.db.session_pin import delete_pin
from quantroute.policy.model import Policy
from quantroute.policy.store import PolicyStore


@contextmanager
def refusals_audited(engine: Engine, *, actor: str, action: str, subject: str) -> Iterator[None]:
    """A write that is refused (role, four-eyes, state machine, bad input) leaves an audit event too, with
    `detail.refused` saying why: the audit trail shows attempts, not only what happened."""
    try:
        yield
    except Exception as e:
        with open_session(engine) as s:
            audit.record(s, actor=actor, action=action, subject=subject,
                         detail={"refused": str(e) or type(e).__name__})
            s.commit()
        raise


# ---- policy versions -------------------------------------------------------------------------------------

def save_policy(*, store: PolicyStore, actor: str, draft: Policy, parent: int | None, message: str) -> int:
    with refusals_audited(store.engine, actor=actor, action="policy.new", subject=f"draft from version {parent}"):
        require(store.engine, actor, "policy.new")
        if not message.strip():
            raise ValueError("message: say what this version changes and why")
        return store.new(parent=parent, author=actor, message=message.strip(), policy=draft)


def approve_policy(*, store: PolicyStore, actor: str, version: int, comment: str = "") -> None:
    with refusals_audited(store.engine, actor=actor, action="policy.approve", subject=store.path(version).name):
        require(store.engine, actor, "policy.approve")
        store.approve(version, by=actor, comment=comment)


def activate_policy(*, store: PolicyStore, actor: str, version: int, reason: str = "") -> int:
    with refusals_audited(store.engine, actor=actor, action="policy.activate", subject=store.path(version).name):
        require(store.engine, actor, "policy.activate")
        return store.activate(version, by=actor, reason=reason)


def rollback_policy(*, store: PolicyStore, actor: str, to: int | None, reason: str = "") -> int:
    subject = store.path(to).name if to is not None else "previous version"
    with refusals_audited(store.engine, actor=actor, action="policy.rollback", subject=subject):
        require(store.engine, actor, "policy.rollback")
        return store.rollback(by=actor, to=to, reason=reason)


# ---- session pins ----------------------------------------------------------------------------------------

def unpin_session(*, engine: Engine, router: RouterAdmin | None, actor: str, session_key: str) -> bool:
    """Through the router when there is one (it also forgets its cached pin), else in the DB directly."""
    with refusals_audited(engine, actor=actor, action="session.unpin", subject=session_key):
        require(engine, actor, "session.unpin")
    failed = None
    if router is not None:
        try:
            found = router.unpin(session_key)
        except RouterUnavailable as e:  # some replicas may have dropped it: audit what was tried, then say so
            found, failed = None, e
    else:
        with open_session(engine) as s:
            found = delete_pin(session=s, session_key=session_key)
    with open_session(engine) as s:
        audit.record(s, actor=actor, action="session.unpin", subject=session_key,
                     detail={"found": found, "via": "router" if router is not None else "db",
                             **({"error": str(failed)} if failed else {})})
        s.commit()
    if failed is not None:
        raise failed
    return bool(found)


# ---- evals -----------------------------------------------------------------------------------------------

def run_eval(*, engine: Engine, actor: str, suite_path: str, baseline: str, candidate: str, runs_dir: str,
             registered: dict[str, str], progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """A paired eval run: each arm a registered deployment id (`registered`: deployment -> base URL, e.g. the
    configured router) or, for operators, a free `URL#deployment` (recorded); returns the stored run view."""
    from pathlib import Path

    from quantroute.evals.runs import start_run
    from quantroute.evals.suite import load_suite
    from quantroute.evals.targets import resolve_targets

    with refusals_audited(engine, actor=actor, action="eval.run", subject=suite_path):
        targets = resolve_targets(engine, actor=actor, baseline=baseline, candidate=candidate,
                                  registered=registered)
    with open_session(engine) as s:
        audit.record(s, actor=actor, action="eval.run", subject=Path(suite_path).name,
                     detail={"baseline": targets.baseline, "candidate": targets.candidate, "source": targets.source})
        s.commit()
    view = start_run(suite=load_suite(suite_path), baseline=targets.baseline, candidate=targets.candidate,
                     engine=engine, runs_dir=Path(runs_dir), progress=progress, source=targets.source,
                     started_by=actor)
    return view.model_dump(mode="json")


# ---- rollouts (quantroute.rollout.service) ---------------------------------------------------------------

ROLLOUT_ACTIONS = ("start", "approve", "step", "pause", "resume", "promote", "rollback", "tick", "check_gate")
_PERMISSION = {"tick": "rollout.approve", "check_gate": "rollout.start"}


def rollout_service(store: PolicyStore, router: RouterAdmin | None):
    from quantroute.rollout.service import RolloutService

    return RolloutService(store, router=router)


def rollout_action(*, service: Any, actor: str, action: str, model: str, **kwargs: Any) -> Any:
    """One rollout action by name; the service writes and activates the policy versions and audits them.
    Checklist ticks belong to reviewers (a person vouching for a fact the system cannot see)."""
    if action not in ROLLOUT_ACTIONS:
        raise ValueError(f"unknown rollout action {action!r}; valid: {', '.join(ROLLOUT_ACTIONS)}")
    with refusals_audited(service.engine, actor=actor, action=f"rollout.{action}", subject=model):
        require(service.engine, actor, _PERMISSION.get(action, f"rollout.{action}"))
        fn = getattr(service, action)
        if action == "tick":
            return fn(model, kwargs.pop("items"), by=actor, **kwargs)
        if action == "check_gate":
            return fn(model, by=actor)
        return fn(model, by=actor, **kwargs)


# ---- tenants and client keys (the service checks the role and audits each change under the actor) ---------

def create_key(*, engine: Engine, actor: str, tenant: str, label: str = "", tier_floor: str | None = None,
               rpm: int | None = None, tpm: int | None = None, expires_at: datetime | None = None):
    from quantroute.tenants import create_key as create

    with refusals_audited(engine, actor=actor, action="key.create", subject=tenant):
        return create(engine, actor=actor, tenant=tenant, label=label, tier_floor=tier_floor, rpm=rpm, tpm=tpm,
                      expires_at=expires_at)


def revoke_key(*, engine: Engine, actor: str, prefix: str):
    from quantroute.tenants import revoke_key as revoke

    with refusals_audited(engine, actor=actor, action="key.revoke", subject=prefix):
        return revoke(engine, actor=actor, prefix=prefix)


def set_tenant(*, engine: Engine, actor: str, name: str, **changes: Any):
    from quantroute.tenants import set_tenant as change

    with refusals_audited(engine, actor=actor, action="tenant.set", subject=name):
        return change(engine, actor=actor, name=name, **changes)
