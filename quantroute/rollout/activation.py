"""Publishing a rollout's traffic (I/O): write the policy version a transition needs, activate it once the
transition has won its compare-and-swap on the rollout row, and settle races between activations.

Order matters when two actors act on one rollout at once (a guards loop and a person, two dashboard users):
the version is written first (a file nobody serves yet), the row is swapped second (only one actor wins a
revision), and only the winner activates. Two winners of successive revisions can still activate out of order
(the first one stalls between its swap and its activation); `settle` runs after every activation and puts the
newest revision's version back in force when an older activation overtook it."""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import select

from quantroute.db import rollout as db
from quantroute.db.engine import session as db_session
from quantroute.db.policy_state import PolicyActivation
from quantroute.policy.files import read_pointer
from quantroute.policy.store import PolicyConflictError, PolicyStore
from quantroute.rollout import machine, versions
from quantroute.rollout.machine import Phase

SYSTEM = "rollout"  # author of the policy versions a rollout writes
SETTLE_ROUNDS = 5


def write(store: PolicyStore, row: db.Rollout, out: machine.Transition, name: str, by: str) -> tuple[int, bool]:
    """Write (not activate) the version carrying `out`'s traffic for `row` (its status before the transition).
    Returns (version, written); written is False when the active version already carries it (e.g. rolling
    back before any traffic). Retries when another writer took the version number meanwhile."""
    for attempt in range(3):
        active = store.active()
        if out.state.phase == Phase.promoted:
            policy = versions.promoted(active, row.model)
        elif out.state.phase == Phase.rolling_back and active.canary_for(row.model) is None:
            # the active version has no canary for the model: it is the promotion being rolled back
            policy = versions.restored(active, store.load(row.start_version), row.model)  # type: ignore[arg-type]  # a live rollout has its start version
        else:
            spec = active.canary_for(row.model)
            if spec is not None and spec.percent == out.state.percent:
                return active.version, False
            policy = versions.with_percent(active, row.model, out.state.percent)
        message = f"rollout {row.id} ({row.candidate}): {name} by {by}: {out.message}"
        try:
            return store.write_system_version(parent=active.version, author=SYSTEM, message=message,
                                              policy=policy), True
        except PolicyConflictError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def observed(store: PolicyStore, row: db.Rollout) -> bool:
    """The router-visible state is the row's desired state: its version is the active one, or (for a canary
    that is not promoted) the active version carries the same candidate at the same percent."""
    if row.policy_version is None or store.active_version() == row.policy_version:
        return True
    if row.phase == Phase.promoted.value:
        return False
    spec = store.active().canary_for(row.model)
    return spec is not None and spec.candidate == row.candidate and spec.percent == row.percent


def activate(store: PolicyStore, row: db.Rollout, version: int, *, by: str, rollback: bool) -> None:
    """Rollbacks use the store's emergency activation (no approval, recorded as such); steps and the promotion
    are approved by the rollout's reviewer, whose approval covers its steps."""
    reason = f"rollout {row.id} ({row.candidate}): {row.message}"
    if rollback:
        store.activate_system(version, by=by, emergency=True, reason=reason)
        return
    store.approve_system(version, by=row.approved_by or by, actor=by,
                         comment=f"covered by {row.approved_by or by}'s approval of rollout {row.id}")
    store.activate_system(version, by=by)


def settle(store: PolicyStore, engine: Engine, *, rollout_id: int, revision: int, by: str) -> int | None:
    """After this actor (who won `revision`) activated its version: when a later revision of the rollout was
    won meanwhile and its version had already been activated, this activation overtook it; activate it again.
    A later version never activated yet needs nothing: its owner activates it after this point (and settles).
    Returns the version re-activated, if any."""
    again = None
    for _ in range(SETTLE_ROUNDS):
        with db_session(engine) as s:
            cur = db.get_rollout(session=s, rollout_id=rollout_id)
            if cur is None or cur.revision == revision or cur.policy_version is None:
                return again
            want = cur.policy_version
            ever = s.exec(select(PolicyActivation.id).where(PolicyActivation.version == want).limit(1)).first()
        if ever is None:
            return again
        if store.active_version() == want and read_pointer(store.pointer_path) in (want, None):
            return again
        store.activate_system(want, by=by, emergency=not store.is_approved(want) and want != 1,
                       reason=f"rollout {rollout_id}: revision {cur.revision} (version {want}) is newer than the "
                              f"activation of revision {revision}, which overtook it")
        again = want
    return again
