"""The versioned policy store: immutable policy versions in the database, mirrored as `policy-NNNN.yaml` files.

The database holds each version's content (author, parent, message, canonical hash), so router replicas on any
host, each with its own policies directory, load the same versions. The files are the human-readable,
reviewable form: written for every version, importable (`quantroute policy import DIR`, for policies kept in
git). A file whose content does not hash to its version's stored hash was edited by hand: it is reported, never
loaded. Approvals and activations are observed state (DB). The active version is the newest `policy_activation`
row; a pointer file `<dir>/active` mirrors it, replaced atomically, so a router on the same host reloads on a
file event and replicas elsewhere poll the DB."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from quantroute.auth import controllers, require
from quantroute.clock import utcnow
from quantroute.db import audit
from quantroute.db.policy_state import (
    PolicyActivation,
    PolicyApproval,
    PolicyVersionRow,
    active_version,
    approval_of,
    version_numbers,
    version_row,
    version_rows,
)
from quantroute.policy.files import _write_exclusive, file_versions, read_pointer, version_file, write_pointer
from quantroute.policy.loader import (
    Issue,
    PolicyValidationError,
    canonical_hash,
    dump_policy,
    parse_policy,
    policy_to_data,
    validate_data,
)
from quantroute.policy.model import Policy

log = logging.getLogger(__name__)

POINTER = "active"


class PolicyStoreError(Exception):
    """A refused store operation; the message says why and what would be allowed."""


class PolicyConflictError(PolicyStoreError):
    """Another writer took the version number first; nothing was overwritten."""


@dataclass(frozen=True)
class VersionInfo:
    version: int
    parent: int | None
    author: str
    created_at: datetime
    message: str
    content_hash: str
    approved_by: str | None
    active: bool
    ever_active: bool


@dataclass(frozen=True)
class ImportResult:
    """What `import_dir` did with one file: imported, unchanged (already stored, same hash) or refused (why)."""

    version: int
    path: Path
    outcome: str
    detail: str = ""


def content_hash_of(policy: Policy) -> str:
    return canonical_hash(policy_to_data(policy))


def text_hash(text: str, source: str) -> str | None:
    """The canonical hash of a policy file's content; None when it is not a valid policy (so it matches nothing)."""
    try:
        return content_hash_of(parse_policy(text, source))
    except PolicyValidationError:
        return None


def default_policy_text() -> str:
    """The shipped default policy (version 1), packaged with the reference data."""
    from quantroute.catalog import DATA_DIR

    return (DATA_DIR / "default-policy.yaml").read_text(encoding="utf-8")


class PolicyStore:
    def __init__(self, policies_dir: str | Path, engine: Engine):
        self.dir = Path(policies_dir)
        self.engine = engine

    @property
    def pointer_path(self) -> Path:
        return self.dir / POINTER

    # ---- reading

    def versions(self) -> list[int]:
        self.seed()
        with Session(self.engine) as s:
            return version_numbers(s)

    def path(self, version: int) -> Path:
        return version_file(self.dir, version)

    def row(self, version: int) -> PolicyVersionRow:
        with Session(self.engine) as s:
            row = version_row(s, version)
        if row is None:
            self.seed()
            with Session(self.engine) as s:
                row = version_row(s, version)
        if row is None:
            raise PolicyStoreError(f"no policy version {version} in the database (have: {self._have()})")
        return row

    def load(self, version: int) -> Policy:
        """The version's content from the database (never from its file), mirrored to its file if absent."""
        row = self.row(version)
        policy = parse_policy(row.content, f"policy version {version} (database)")
        if policy.version != version:
            raise PolicyValidationError(f"policy version {version}",
                                        [Issue("version", f"is {policy.version} but it is stored as {version}")])
        self.mirror(row)
        return policy

    def text(self, version: int) -> str:
        return self.row(version).content

    def active_version(self) -> int:
        """The DB's newest activation; else the pointer file (if it names a stored version); else the lowest."""
        with Session(self.engine) as s:
            v = active_version(s)
        if v is not None:
            return v
        have = self.versions()
        if not have:
            raise PolicyStoreError(f"no policy versions in the database or in {self.dir}")
        pointed = read_pointer(self.pointer_path)
        return pointed if pointed in have else have[0]

    def active(self) -> Policy:
        return self.load(self.active_version())

    def history(self) -> list[VersionInfo]:
        current = self.active_version()
        with Session(self.engine) as s:
            approvals = {a.version: a.approved_by for a in s.exec(select(PolicyApproval))}
            ever = {a.version for a in s.exec(select(PolicyActivation))}
            rows = version_rows(s)
        return [VersionInfo(r.version, r.parent, r.author, r.created_at, r.message, r.content_hash,
                            approvals.get(r.version), r.version == current, r.version in ever or r.version == current)
                for r in rows]

    def drift(self) -> list[str]:
        """Files in the directory that are not what the database holds: edited by hand, or never imported."""
        with Session(self.engine) as s:
            stored = {r.version: r for r in version_rows(s)}
        out = []
        for v, path in file_versions(self.dir):
            row = stored.get(v)
            if row is None:
                out.append(f"{path}: version {v} is not in the database (import it: quantroute policy import)")
                continue
            text = path.read_text(encoding="utf-8")
            if text != row.content and text_hash(text, str(path)) != row.content_hash:
                out.append(f"{path}: does not match version {v} in the database ({row.content_hash[:19]}...): "
                           "edited by hand; it is ignored (write a new version instead)")
        return out

    # ---- the files mirror the database

    def mirror(self, row: PolicyVersionRow) -> None:
        """Write a version's file when it is missing. A file that differs is reported and left alone: it is
        evidence of a hand edit, and it is never loaded."""
        path = self.path(row.version)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            try:
                _write_exclusive(path, row.content)
            except FileExistsError:
                pass  # another process mirrored it meanwhile
            except OSError as e:
                log.warning("cannot mirror policy version %d to %s: %s", row.version, path, e)
            return
        except OSError as e:
            log.warning("cannot read %s: %s", path, e)
            return
        if text != row.content and text_hash(text, str(path)) != row.content_hash:
            log.warning("%s does not match policy version %d in the database: edited by hand? The file is ignored; "
                        "the database's content is used", path, row.version)

    def seed(self) -> list[int]:
        """An empty database takes the directory's files (the layout before versions moved into the database),
        or, with no files either, the packaged default as version 1. Returns the versions stored."""
        with Session(self.engine) as s:
            if version_numbers(s):
                return []
        if file_versions(self.dir):
            return [r.version for r in self.import_dir(self.dir, by="bootstrap") if r.outcome == "imported"]
        text = default_policy_text()
        policy = parse_policy(text, "packaged default policy")
        if self._insert(policy, text, by="bootstrap", action="policy.import", subject="packaged default"):
            log.warning("no policy versions in the database or in %s: stored the packaged default as version %d",
                        self.dir, policy.version)
        self.mirror(self.row(policy.version))
        return [policy.version]

    # ---- writing

    def _insert(self, policy: Policy, text: str, *, by: str, action: str, subject: str) -> bool:
        """Store one version (and its audit event). False when the number is taken (nothing overwritten)."""
        row = PolicyVersionRow(version=policy.version, parent=policy.parent, author=policy.author,
                               message=policy.message, created_at=policy.created_at, content=text,
                               content_hash=content_hash_of(policy), stored_by=by)
        with Session(self.engine) as s:
            s.add(row)
            audit.record(s, actor=by, action=action, subject=subject, version_before=policy.parent,
                         version_after=policy.version, detail={"message": policy.message,
                                                               "content_hash": row.content_hash})
            try:
                s.commit()
            except IntegrityError:
                s.rollback()
                return False
        return True

    # ---- writing by a person: each checks the actor's stored role (`auth.require`), whoever calls it

    def new(self, *, parent: int | None, author: str, message: str, policy: Policy) -> int:
        """A version written by a person (an operator). Its canary traffic must be the active version's:
        percents move only through the rollout service (its gate, checklist and guards)."""
        require(self.engine, author, "policy.new")
        issues = canary_changes(policy, self.active()) if self.versions() else []
        if issues:
            raise PolicyValidationError("new policy version", issues)
        return self.write_system_version(parent=parent, author=author, message=message, policy=policy)

    def approve(self, version: int, *, by: str, comment: str = "") -> None:
        """A reviewer who is not the version's author (four-eyes)."""
        require(self.engine, by, "policy.approve")
        self.approve_system(version, by=by, comment=comment)

    def activate(self, version: int, *, by: str, emergency: bool = False, reason: str = "") -> int:
        """Make `version` active. Only approved versions; `emergency` skips the approval but needs an operator
        and a reason, and is flagged in the audit trail. Returns the previous active version."""
        if emergency:
            require(self.engine, by, "policy.emergency")
            if not reason.strip():
                raise PolicyStoreError("an emergency activation needs a reason (--reason): it is recorded with it")
        else:
            require(self.engine, by, "policy.activate")
        return self.activate_system(version, by=by, emergency=emergency, reason=reason)

    def rollback(self, *, by: str, reason: str = "", to: int | None = None) -> int:
        """Activate a known-good version at once, no approval: `to`, or the version active before this one.
        Known-good means it has been active before. Returns the version now active."""
        require(self.engine, by, "policy.rollback")
        return self.rollback_system(by=by, reason=reason, to=to)

    # ---- writing by the system (the rollout service, which checked its own actor; imports): no role check

    def write_system_version(self, *, parent: int | None, author: str, message: str, policy: Policy) -> int:
        """Store `policy` as the next version and write its file. A concurrent writer of the same number loses
        cleanly (the database's primary key decides, on any host)."""
        if not author.strip():
            raise PolicyStoreError("author is required")
        have = self.versions()
        if parent is not None and parent not in have:
            raise PolicyStoreError(f"parent version {parent} does not exist (have: {self._have()})")
        version = (have[-1] + 1) if have else 1
        stamped = policy.model_copy(update={"version": version, "parent": parent, "author": author,
                                            "message": message, "created_at": utcnow(),
                                            "content_hash": None})
        # Re-validate the whole document: model_copy skips validation.
        validate_data(policy_to_data(stamped), source=f"policy-{version:04d}")
        text = dump_policy(stamped)
        if not self._insert(stamped, text, by=author, action="policy.new", subject=self.path(version).name):
            raise PolicyConflictError(
                f"policy version {version} was written by someone else meanwhile; nothing was overwritten. "
                f"Start again from the newest version ({self.versions()[-1]}).")
        self.mirror(self.row(version))
        return version

    def import_dir(self, directory: str | Path, *, by: str) -> list[ImportResult]:
        """Store every `policy-NNNN.yaml` of `directory` the database does not hold yet (GitOps: the files live in
        git). A file whose version is stored with another hash is refused: versions are immutable."""
        results: list[ImportResult] = []
        for v, path in file_versions(Path(directory)):
            text = path.read_text(encoding="utf-8")
            try:
                policy = parse_policy(text, str(path))
            except PolicyValidationError as e:
                results.append(ImportResult(v, path, "refused", str(e)))
                continue
            if policy.version != v:
                results.append(ImportResult(v, path, "refused", f"the file says version {policy.version}"))
                continue
            results.append(self._import_one(policy, text, path, by=by))
        return results

    def _import_one(self, policy: Policy, text: str, path: Path, *, by: str) -> ImportResult:
        v, h = policy.version, content_hash_of(policy)
        with Session(self.engine) as s:
            existing = version_row(s, v)
            have = set(version_numbers(s))
        if existing is None and policy.parent is not None and policy.parent not in have:
            return ImportResult(v, path, "refused", f"its parent version {policy.parent} is not in the database")
        if existing is None and self._insert(policy, text, by=by, action="policy.import", subject=str(path)):
            self.mirror(self.row(v))
            return ImportResult(v, path, "imported", h)
        existing = existing or self.row(v)
        if existing.content_hash == h:
            return ImportResult(v, path, "unchanged", h)
        return ImportResult(v, path, "refused",
                            f"version {v} is stored with hash {existing.content_hash[:19]}..., the file hashes to "
                            f"{h[:19]}...: versions are immutable (edited by hand? write a new version instead)")

    def approve_system(self, version: int, *, by: str, comment: str = "", actor: str | None = None) -> None:
        """`by` approves `version`. `actor`: who acted when that is not `by` (an implicit approval, covered by
        one `by` gave earlier, e.g. a rollout's steps): the audit event names the actor, at the time they
        acted, and says whose approval covers it, instead of crediting `by` with something they did not do."""
        policy = self.load(version)
        if by == policy.author:
            raise PolicyStoreError(f"{by} wrote version {version}; a different reviewer must approve it")
        if policy.author in controllers(self.engine, by):  # a reviewer whose password the author set is the author
            raise PolicyStoreError(f"{policy.author} wrote version {version} and set a password of {by}'s (so could "
                                   f"act as {by}); a reviewer {policy.author} did not create must approve it")
        with Session(self.engine) as s:
            existing = approval_of(s, version)
            if existing:
                raise PolicyStoreError(f"version {version} was already approved by {existing.approved_by}")
            s.add(PolicyApproval(version=version, approved_by=by, comment=comment))
            detail: dict[str, Any] = {"comment": comment} if comment else {}
            if actor is not None and actor != by:
                detail.update(implicit=True, covered_by=by)
            audit.record(s, actor=actor or by, action="policy.approve", subject=self.path(version).name,
                         version_after=version, detail=detail)
            s.commit()

    def is_approved(self, version: int) -> bool:
        with Session(self.engine) as s:
            return approval_of(s, version) is not None

    def activate_system(self, version: int, *, by: str, emergency: bool = False, reason: str = "") -> int:
        """Make `version` active. Only approved versions, unless `emergency` (recorded as such).
        Version 1 is the shipped default and needs no approval. Returns the previous active version."""
        self.load(version)  # must exist and validate
        if version != 1 and not emergency and not self.is_approved(version):
            raise PolicyStoreError(f"version {version} is not approved; a reviewer other than its author must "
                                   "approve it first (or activate with --emergency, which is recorded)")
        kind = "emergency" if emergency else "activate"
        return self._point(version, by=by, kind=kind, reason=reason)

    def rollback_system(self, *, by: str, reason: str = "", to: int | None = None) -> int:
        current = self.active_version()
        with Session(self.engine) as s:
            rows = list(s.exec(select(PolicyActivation).order_by(col(PolicyActivation.id).desc())))
        previously = [r.version for r in rows if r.version != current]
        if to is None:
            if not previously:
                if current != 1 and 1 in self.versions():
                    previously = [1]  # the shipped default is always known-good
                else:
                    raise PolicyStoreError(f"nothing to roll back to: version {current} "
                                           "is the only version ever active")
            to = previously[0]
        elif to not in previously and to != 1:
            raise PolicyStoreError(f"version {to} has never been active, so it is not known-good; "
                                   f"known-good: {sorted(set(previously)) or [1]}")
        self.load(to)
        self._point(to, by=by, kind="rollback", reason=reason)
        return to

    def _point(self, version: int, *, by: str, kind: str, reason: str) -> int:
        previous = self.active_version()
        with Session(self.engine) as s:
            s.add(PolicyActivation(version=version, previous=previous, by=by, kind=kind, reason=reason))
            detail: dict[str, object] = {"reason": reason} if reason else {}
            if kind == "emergency":
                detail["emergency"] = True  # activated without an approval: the audit view flags it
            audit.record(s, actor=by, action=f"policy.{kind}", subject=self.path(version).name,
                         version_before=previous, version_after=version, detail=detail)
            s.commit()
        write_pointer(self.pointer_path, version)
        return previous

    def _have(self) -> str:
        return ", ".join(str(v) for v in self.versions()) or "none"


def canary_changes(draft: Policy, active: Policy) -> list[Issue]:
    """Where a person's version would move canary traffic: every canary percent must equal the active
    version's (0 for a canary the active version does not have), and no canary carrying traffic may vanish."""
    issues = []
    for i, c in enumerate(draft.canaries):
        now = active.canary_for(c.model)
        current = now.percent if now is not None else 0.0
        if c.percent != current:
            issues.append(Issue(f"canaries[{i}].percent",
                                f"is {c.percent:g} but the active canary state of {c.model!r} is {current:g}: canary "
                                "traffic moves only through the rollout service (quantroute rollout approve/step/"
                                f"rollback); keep {current:g} here"))
    for c in active.canaries:
        if c.percent > 0 and draft.canary_for(c.model) is None:
            issues.append(Issue("canaries", f"removes the canary of {c.model!r}, which carries {c.percent:g} % "
                                            "in the active version; roll it back or promote it first"))
    return issues
