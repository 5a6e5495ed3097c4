import sys
import threading

import pytest
import yaml
from sqlmodel import Session

from quantroute.auth import PermissionDenied
from quantroute.db import audit
from quantroute.policy.files import read_pointer
from quantroute.policy.loader import PolicyValidationError, parse_policy
from quantroute.policy.store import PolicyConflictError, PolicyStore, PolicyStoreError
from tests.conftest import REPO, add_users


@pytest.fixture
def store(tmp_path, engine):
    add_users(engine, olga="operator", a="operator", writer0="operator", writer1="operator", rex="reviewer",
              rita="reviewer", b="reviewer")
    d = tmp_path / "policies"
    d.mkdir()
    (d / "policy-0001.yaml").write_text((REPO / "policies" / "policy-0001.yaml").read_text())
    return PolicyStore(d, engine)


def edited(store, **changes):
    data = yaml.safe_load((store.dir / "policy-0001.yaml").read_text())
    data.update(changes)
    return parse_policy(yaml.safe_dump(data))


def test_bootstrap_active_is_the_shipped_default(store):
    assert store.active_version() == 1
    assert store.active().version == 1


def test_new_approve_activate_rollback_with_audit(store):
    v = store.new(parent=1, author="olga", message="stricter",
                  policy=edited(store, fleet_warning={"top_tier_share": 0.6}))
    assert v == 2 and store.load(2).parent == 1 and store.load(2).author == "olga"
    with pytest.raises(PolicyStoreError, match="not approved"):
        store.activate(2, by="olga")
    with pytest.raises(PermissionDenied, match="policy.approve is not allowed for role operator"):
        store.approve(2, by="olga")
    store.approve(2, by="rex")
    with pytest.raises(PolicyStoreError, match="already approved"):
        store.approve(2, by="rita")
    assert store.activate(2, by="olga") == 1
    assert store.active_version() == 2 and read_pointer(store.pointer_path) == 2
    assert store.rollback(by="olga", reason="errors up") == 1
    assert store.active_version() == 1 and read_pointer(store.pointer_path) == 1
    with Session(store.engine) as s:
        actions = [e.action for e in reversed(audit.list_events(s))]
        last = audit.list_events(s)[0]
    # the first read stored the directory's version 1 in the database (imported, audited)
    assert actions == ["policy.import", "policy.new", "policy.approve", "policy.activate", "policy.rollback"]
    assert (last.version_before, last.version_after, last.detail) == (2, 1, {"reason": "errors up"})


def test_emergency_activation_is_recorded(store):
    store.new(parent=1, author="olga", message="hotfix", policy=store.load(1))
    store.activate(2, by="olga", emergency=True, reason="INT4 nodes down")
    with Session(store.engine) as s:
        assert audit.list_events(s)[0].action == "policy.emergency"


def test_rollback_only_to_known_good(store):
    store.new(parent=1, author="a", message="x", policy=store.load(1))
    store.new(parent=2, author="a", message="y", policy=store.load(1))
    store.approve(3, by="b")
    store.activate(3, by="b")
    with pytest.raises(PolicyStoreError, match="never been active"):
        store.rollback(by="b", to=2)
    assert store.rollback(by="b") == 1


def test_a_hand_edited_file_is_detected_by_its_hash_and_never_loaded(store, caplog):
    store.new(parent=1, author="a", message="x", policy=store.load(1))
    path = store.path(2)
    path.write_text(path.read_text().replace("max_wait_ms: 2000", "max_wait_ms: 9"))
    assert store.load(2).sessions.max_wait_ms == 2000  # the database's content, not the file's
    assert "edited by hand" in caplog.text
    assert [d for d in store.drift() if "policy-0002.yaml" in d and "edited by hand" in d]
    [result] = [r for r in store.import_dir(store.dir, by="ci") if r.version == 2]
    assert result.outcome == "refused" and "content_hash: does not match the content" in result.detail
    # a hand edit that also rewrote the hash is caught the same way: the stored hash decides
    data = yaml.safe_load(path.read_text())
    data.pop("content_hash")
    path.write_text(yaml.safe_dump(data))
    [result] = [r for r in store.import_dir(store.dir, by="ci") if r.version == 2]
    assert result.outcome == "refused" and "versions are immutable" in result.detail


def test_a_missing_file_is_written_again_from_the_database(store):
    store.new(parent=1, author="a", message="x", policy=store.load(1))
    text = store.path(2).read_text()
    store.path(2).unlink()
    store.load(2)
    assert store.path(2).read_text() == text


def test_import_stores_new_versions_and_reports_unchanged_ones(store, tmp_path, engine):
    store.new(parent=1, author="a", message="x", policy=store.load(1))
    git = tmp_path / "git-policies"  # a checkout of the policy repository, one version ahead
    git.mkdir()
    for v in (1, 2):
        (git / store.path(v).name).write_text(store.path(v).read_text())
    other = PolicyStore(tmp_path / "elsewhere", engine)
    ahead = PolicyStore(git, engine)
    v3 = ahead.load(2).model_copy(update={"version": 3, "parent": 2, "message": "from git"})
    from quantroute.policy.loader import dump_policy

    (git / "policy-0003.yaml").write_text(dump_policy(v3))
    outcomes = {r.version: r.outcome for r in store.import_dir(git, by="ci")}
    assert outcomes == {1: "unchanged", 2: "unchanged", 3: "imported"}
    assert other.load(3).message == "from git" and (tmp_path / "elsewhere" / "policy-0003.yaml").exists()
    orphan = dump_policy(v3.model_copy(update={"version": 5, "parent": 4}))
    (git / "policy-0005.yaml").write_text(orphan)
    [five] = [r for r in store.import_dir(git, by="ci") if r.version == 5]
    assert five.outcome == "refused" and "parent version 4" in five.detail


def test_racing_writers_one_wins_other_gets_conflict(store, monkeypatch):
    """Two writers that computed the same next number: exactly one file, one clean conflict."""
    barrier = threading.Barrier(2)
    real_versions = PolicyStore.versions

    waited = threading.local()

    def slow_versions(self):
        out = real_versions(self)
        # The read the next number is computed from (a writer's first read in write_system_version) waits for the
        # other writer's, so both have read the same "newest" before either writes. `new` also reads the versions
        # for its canary check, and a loser for its message: a barrier on a thread's first read of all let one
        # writer store 2 and the other then read 2 and store 3.
        if threading.current_thread().name.startswith("writer") and not getattr(waited, "done", False) \
                and sys._getframe(1).f_code.co_name == "write_system_version":
            waited.done = True
            barrier.wait(timeout=60)
        return out

    monkeypatch.setattr(PolicyStore, "versions", slow_versions)
    results: dict[str, object] = {}

    def write(name):
        try:
            results[name] = store.new(parent=None, author=name, message=name, policy=store.load(1))
        except Exception as e:  # noqa: BLE001 - the test inspects which exception
            results[name] = e

    threads = [threading.Thread(target=write, args=(f"writer{i}",), name=f"writer{i}") for i in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    wins = [r for r in results.values() if r == 2]
    conflicts = [r for r in results.values() if isinstance(r, PolicyConflictError)]
    assert len(wins) == 1 and len(conflicts) == 1, results
    assert "nothing was overwritten" in str(conflicts[0])
    monkeypatch.setattr(PolicyStore, "versions", real_versions)
    assert store.versions() == [1, 2]
    assert not [p for p in store.dir.iterdir() if p.name.startswith(".policy-")]
    assert store.load(2).author == wins_author(results)


def wins_author(results: dict) -> str:
    return next(name for name, r in results.items() if r == 2)


def test_invalid_policy_is_never_written(store):
    bad = store.load(1).model_copy(update={"thresholds": []})
    with pytest.raises(PolicyValidationError):
        store.new(parent=1, author="a", message="bad", policy=bad)
    assert store.versions() == [1]
