"""The versioned policy store: immutable `policy-NNNN.yaml` files plus their state in the database.

Files are desired state and are never rewritten. Approvals and activations are observed state (DB). The
active version is the newest `policy_activation` row; a pointer file `<dir>/active` mirrors it, replaced
atomically, so a router on the same host reloads on a file event and replicas elsewhere poll the DB."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from quantroute.db import audit
from quantroute.db.policy_state import PolicyActivation, PolicyApproval, active_version, approval_of
from quantroute.policy.loader import (Issue, PolicyValidationError, canonical_hash, dump_policy, load_policy,
                                      policy_to_data, validate_data)
from quantroute.policy.model import Policy

FILE_RE = re.compile(r"^policy-(\d{4,})\.yaml$")
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


def version_file(directory: Path, version: int) -> Path:
    return directory / f"policy-{version:04d}.yaml"


class PolicyStore:
    def __init__(self, policies_dir: str | Path, engine: Engine):
        self.dir = Path(policies_dir)
        self.engine = engine

    @property
    def pointer_path(self) -> Path:
        return self.dir / POINTER

    # ---- reading

    def versions(self) -> list[int]:
        if not self.dir.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.dir.iterdir() if (m := FILE_RE.match(p.name)))

    def path(self, version: int) -> Path:
        return version_file(self.dir, version)

    def load(self, version: int) -> Policy:
        path = self.path(version)
        if not path.exists():
            raise PolicyStoreError(f"no policy version {version} in {self.dir} (have: {self._have()})")
        policy = load_policy(path)
        if policy.version != version:
            raise PolicyValidationError(str(path), [Issue("version", f"is {policy.version} but the file name says {version}")])
        return policy

    def active_version(self) -> int:
        """The DB's newest activation; else the pointer file; else the lowest version on disk (bootstrap)."""
        with Session(self.engine) as s:
            v = active_version(s)
        if v is not None:
            return v
        pointed = read_pointer(self.pointer_path)
        if pointed is not None:
            return pointed
        have = self.versions()
        if not have:
            raise PolicyStoreError(f"no policy versions in {self.dir}")
        return have[0]

    def active(self) -> Policy:
        return self.load(self.active_version())

    def history(self) -> list[VersionInfo]:
        current = self.active_version()
        with Session(self.engine) as s:
            approvals = {a.version: a.approved_by for a in s.exec(select(PolicyApproval))}
            ever = {a.version for a in s.exec(select(PolicyActivation))}
        out = []
        for v in self.versions():
            p = self.load(v)
            out.append(VersionInfo(v, p.parent, p.author, p.created_at, p.message,
                                   p.content_hash or canonical_hash(policy_to_data(p)), approvals.get(v),
                                   v == current, v in ever or v == current))
        return out

    # ---- writing

    def new(self, *, parent: int | None, author: str, message: str, policy: Policy) -> int:
        """Write `policy` as the next version. Exclusive: a concurrent writer of the same number loses cleanly."""
        if not author.strip():
            raise PolicyStoreError("author is required")
        if parent is not None and parent not in self.versions():
            raise PolicyStoreError(f"parent version {parent} does not exist (have: {self._have()})")
        have = self.versions()
        version = (have[-1] + 1) if have else 1
        stamped = policy.model_copy(update={"version": version, "parent": parent, "author": author,
                                            "message": message, "created_at": datetime.now(timezone.utc),
                                            "content_hash": None})
        # Re-validate the whole document: model_copy skips validation.
        validate_data(policy_to_data(stamped), source=f"policy-{version:04d}")
        self.dir.mkdir(parents=True, exist_ok=True)
        target = self.path(version)
        fd, tmp = tempfile.mkstemp(prefix=".policy-", suffix=".tmp", dir=self.dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(dump_policy(stamped))
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, target)  # atomic and exclusive: fails if the number was taken meanwhile
            except FileExistsError:
                raise PolicyConflictError(
                    f"policy version {version} was written by someone else meanwhile; nothing was overwritten. "
                    f"Start again from the newest version ({self.versions()[-1]}).") from None
        finally:
            os.unlink(tmp)
        with Session(self.engine) as s:
            audit.record(s, actor=author, action="policy.new", subject=target.name, version_before=parent,
                         version_after=version, detail={"message": message})
            s.commit()
        return version

    def approve(self, version: int, *, by: str, comment: str = "", actor: str | None = None) -> None:
        """`by` approves `version`. `actor`: who acted when that is not `by` (an implicit approval, covered by
        one `by` gave earlier, e.g. a rollout's steps): the audit event names the actor, at the time they
        acted, and says whose approval covers it, instead of crediting `by` with something they did not do."""
        policy = self.load(version)
        if by == policy.author:
            raise PolicyStoreError(f"{by} wrote version {version}; a different reviewer must approve it")
        with Session(self.engine) as s:
            existing = approval_of(s, version)
            if existing:
                raise PolicyStoreError(f"version {version} was already approved by {existing.approved_by}")
            s.add(PolicyApproval(version=version, approved_by=by, comment=comment))
            detail: dict = {"comment": comment} if comment else {}
            if actor is not None and actor != by:
                detail.update(implicit=True, covered_by=by)
            audit.record(s, actor=actor or by, action="policy.approve", subject=self.path(version).name,
                         version_after=version, detail=detail)
            s.commit()

    def is_approved(self, version: int) -> bool:
        with Session(self.engine) as s:
            return approval_of(s, version) is not None

    def activate(self, version: int, *, by: str, emergency: bool = False, reason: str = "") -> int:
        """Make `version` active. Only approved versions, unless `emergency` (recorded as such).
        Version 1 is the shipped default and needs no approval. Returns the previous active version."""
        self.load(version)  # must exist and validate
        if version != 1 and not emergency and not self.is_approved(version):
            raise PolicyStoreError(f"version {version} is not approved; a reviewer other than its author must "
                                   "approve it first (or activate with --emergency, which is recorded)")
        kind = "emergency" if emergency else "activate"
        return self._point(version, by=by, kind=kind, reason=reason)

    def rollback(self, *, by: str, reason: str = "", to: int | None = None) -> int:
        """Activate a known-good version at once, no approval: `to`, or the version active before this one.
        Known-good means it has been active before. Returns the version now active."""
        current = self.active_version()
        with Session(self.engine) as s:
            rows = list(s.exec(select(PolicyActivation).order_by(PolicyActivation.id.desc())))
        previously = [r.version for r in rows if r.version != current]
        if to is None:
            if not previously:
                if current != 1 and 1 in self.versions():
                    previously = [1]  # the shipped default is always known-good
                else:
                    raise PolicyStoreError(f"nothing to roll back to: version {current} is the only version ever active")
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
            audit.record(s, actor=by, action=f"policy.{kind}", subject=self.path(version).name,
                         version_before=previous, version_after=version, detail={"reason": reason} if reason else {})
            s.commit()
        write_pointer(self.pointer_path, version)
        return previous

    def _have(self) -> str:
        return ", ".join(str(v) for v in self.versions()) or "none"


def read_pointer(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def write_pointer(path: Path, version: int) -> None:
    """Replace the pointer atomically: a watcher sees the old number or the new one, never a torn file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".active-", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{version}\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
