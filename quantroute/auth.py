"""Identities and roles: who may do what, from the dashboard or the CLI.

Passwords are hashed with scrypt (hashlib, per-user random salt) and compared in constant time; repeated
failures lock a name for a while (audited). The CLI acts as a user too: a personal access token
(`quantroute user token NAME`, stored as its SHA-256) or a name and password, never a free-text name.
Every write names an action; `require` re-checks the actor's role as stored in the database, and the services
(policy store, rollout service) call it themselves, so the dashboard and the CLI meet the same rule."""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from sqlalchemy.engine import Engine

from quantroute.clock import aware, utcnow
from quantroute.db import audit
from quantroute.db.engine import session as open_session
from quantroute.db.user import LoginThrottle, User, UserToken, add_token, get_throttle, get_user, token_by_hash

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
    "policy.emergency": frozenset({Role.operator}),  # activation without approval: an operator, with a reason
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
    "eval.free_url": frozenset({Role.operator}),  # an eval against a URL that is not a registered deployment
}
TOKEN_PREFIX = "qrt_"


@dataclass(frozen=True)
class Throttle:
    """Failed password logins allowed per name within `window`, and how long the name is locked after."""
    max_failures: int = 5
    window: timedelta = timedelta(minutes=15)
    lockout: timedelta = timedelta(minutes=15)
    clock: Callable[[], datetime] = field(default=utcnow)


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


def authenticate(engine: Engine, name: str, password: str, *, throttle: Throttle = Throttle()) -> User:
    """The user for a correct name and password. After `throttle.max_failures` failures within its window the
    name is locked for `throttle.lockout`, even for the right password; failures and lockouts are audited."""
    name, now = name.strip(), throttle.clock()
    with open_session(engine) as s:
        state = get_throttle(session=s, name=name)
        locked_until = aware(state.locked_until) if state else None
        if locked_until is not None and locked_until > now:
            verify_password(password, _DUMMY_HASH)  # same cost as a real attempt
            audit.record(s, actor=name, action="auth.login_refused", subject=name,
                         detail={"reason": "locked", "locked_until": locked_until.isoformat()})
            s.commit()
            minutes = max(1, math.ceil((locked_until - now).total_seconds() / 60))
            raise AuthError(f"too many failed logins for {name!r}: locked, try again in {minutes} min")
        user = get_user(session=s, name=name)
        if user is None or user.disabled or not user.password_hash:
            verify_password(password, _DUMMY_HASH)
            ok = False
        else:
            ok = verify_password(password, user.password_hash)
        if ok and user is not None:
            if state is not None:
                s.delete(state)
                s.commit()
            return user
        _count_failure(s, name, state, now, throttle)
        s.commit()
    raise AuthError("unknown user or wrong password")


def _count_failure(s, name: str, state: LoginThrottle | None, now: datetime, throttle: Throttle) -> None:
    state = state or LoginThrottle(name=name)
    first = aware(state.first_failure_at)
    if first is None or now - first > throttle.window:
        state.failures, state.first_failure_at, state.locked_until = 0, now, None
    state.failures += 1
    audit.record(s, actor=name, action="auth.login_failed", subject=name, detail={"failures": state.failures})
    if state.failures >= throttle.max_failures:
        state.locked_until = now + throttle.lockout
        audit.record(s, actor=name, action="auth.lockout", subject=name,
                     detail={"failures": state.failures, "locked_until": state.locked_until.isoformat()})
    s.add(state)


def oidc_email(claims: Mapping[str, Any]) -> str | None:
    """The e-mail an OIDC identity may be matched by: only one the provider says it verified. An unverified
    address is whatever someone typed at the provider, so it must not inherit that user's role."""
    email = claims.get("email")
    if not isinstance(email, str) or not email.strip():
        return None
    verified = claims.get("email_verified")
    if verified is True or (isinstance(verified, str) and verified.lower() == "true"):
        return email.strip()
    return None


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.strip().encode()).hexdigest()


def issue_token(engine: Engine, name: str, *, label: str = "") -> str:
    """A new personal access token for `name` (shown once; only its hash is kept)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with open_session(engine) as s:
        user = get_user(session=s, name=name)
        if user is None or user.disabled:
            raise AuthError(f"no enabled user {name!r}")
        add_token(session=s, token=UserToken(user_name=name, token_hash=_token_hash(token), label=label))
        audit.record(s, actor=name, action="user.token", subject=name, detail={"label": label})
        s.commit()
    return token


def authenticate_token(engine: Engine, token: str) -> User:
    """The user a personal access token belongs to; revoked tokens and disabled users are refused."""
    with open_session(engine) as s:
        row = token_by_hash(session=s, token_hash=_token_hash(token))
        user = get_user(session=s, name=row.user_name) if row is not None and not row.revoked else None
        if row is None or user is None or user.disabled:
            raise AuthError("unknown, revoked or disabled token")
        row.last_used_at = utcnow()
        s.add(row)
        s.commit()
        s.refresh(user)
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
