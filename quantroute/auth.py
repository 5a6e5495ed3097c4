"""Passwords and roles: who may do what in the dashboard.

Passwords are hashed with scrypt (hashlib, per-user random salt) and compared in constant time. Every write
the dashboard offers names an action; `require` re-checks the actor's role as stored in the database, so a
hidden button is a convenience and the check in the action is the rule."""

from __future__ import annotations

import hashlib
import hmac
import os
from enum import Enum

from sqlalchemy.engine import Engine

from quantroute.db.engine import session as open_session
from quantroute.db.user import User, get_user

# scrypt cost: n=2**14, r=8 takes ~16 MiB and ~50 ms; enough against offline guessing for an internal tool.
SCRYPT_N, SCRYPT_R, SCRYPT_P, DKLEN = 2**14, 8, 1, 32


class Role(str, Enum):
    operator = "operator"  # edits drafts, steps/pauses canaries, rolls back, unpins sessions
    reviewer = "reviewer"  # approves policy versions and rollout steps (never their own)
    analyst = "analyst"  # reads everything, runs evals


# action -> roles allowed. Reading is open to every role; these are the writes.
PERMISSIONS: dict[str, frozenset[Role]] = {
    "policy.new": frozenset({Role.operator}),
    "policy.approve": frozenset({Role.reviewer}),
    "policy.activate": frozenset({Role.operator, Role.reviewer}),
    "policy.rollback": frozenset({Role.operator, Role.reviewer}),
    "session.unpin": frozenset({Role.operator}),
    "rollout.start": frozenset({Role.operator}),
    "rollout.step": frozenset({Role.operator}),
    "rollout.pause": frozenset({Role.operator}),
    "rollout.resume": frozenset({Role.operator}),
    "rollout.promote": frozenset({Role.operator}),
    "rollout.approve": frozenset({Role.reviewer}),
    "rollout.rollback": frozenset({Role.operator, Role.reviewer}),
    "eval.run": frozenset({Role.analyst, Role.operator}),
}


class AuthError(Exception):
    """Login failed; the message never says whether the name or the password was wrong."""


class PermissionDenied(Exception):
    """The actor's role does not allow the action; the message names both and who may."""


def parse_role(value: str) -> Role:
    try:
        return Role(value.strip().lower())
    except ValueError:
        raise ValueError(f"unknown role {value!r}; valid roles: {', '.join(r.value for r in Role)}") from None


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    if not password:
        raise ValueError("password must not be empty")
    salt = salt or os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=DKLEN)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt_hex, hash_hex = stored.split("$")
        if scheme != "scrypt":
            return False
        want = bytes.fromhex(hash_hex)
        got = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt_hex), n=int(n), r=int(r), p=int(p),
                             dklen=len(want))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, want)


# A hash of a random password, verified when the user does not exist, so a wrong name costs as long as a
# wrong password (no user enumeration by timing).
_DUMMY_HASH = hash_password(os.urandom(8).hex())


def authenticate(engine: Engine, name: str, password: str) -> User:
    with open_session(engine) as s:
        user = get_user(session=s, name=name.strip())
    if user is None or user.disabled or not user.password_hash:
        verify_password(password, _DUMMY_HASH)
        raise AuthError("unknown user or wrong password")
    if not verify_password(password, user.password_hash):
        raise AuthError("unknown user or wrong password")
    return user


def allowed(role: Role | str, action: str) -> bool:
    try:
        return Role(role) in PERMISSIONS[action]
    except (KeyError, ValueError):
        return False


def require(engine: Engine, actor: str, action: str) -> User:
    """The server-side check every write makes: the actor exists, is enabled, and their *stored* role allows
    the action (a role changed since login counts at once)."""
    with open_session(engine) as s:
        user = get_user(session=s, name=actor)
    if user is None or user.disabled:
        raise PermissionDenied(f"{action}: unknown or disabled user {actor!r}")
    if not allowed(user.role, action):
        who = ", ".join(sorted(r.value for r in PERMISSIONS.get(action, ()))) or "nobody"
        raise PermissionDenied(f"{action} is not allowed for role {user.role} ({actor}); allowed: {who}")
    return user
