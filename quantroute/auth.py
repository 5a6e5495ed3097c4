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
from quantroute.db.user import (
    LoginThrottle,
    User,
    UserToken,
    add_token,
    create_user,
    get_throttle,
    get_user,
    list_tokens,
    list_users,
    token_by_hash,
    update_user,
)

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
    "user.manage": frozenset({Role.operator}),  # add, disable, enable users, set roles, reset passwords
    "key.manage": frozenset({Role.operator}),  # client API keys and tenants' floors and limits
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


def issue_token(engine: Engine, name: str, *, label: str = "", expires_at: datetime | None = None) -> str:
    """A new personal access token for `name` (shown once; only its hash is kept), valid until `expires_at`
    (None: until revoked)."""
    if expires_at is not None and aware(expires_at) <= utcnow():
        raise ValueError(f"expiry {expires_at.isoformat()} is in the past; give a later date")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with open_session(engine) as s:
        user = get_user(session=s, name=name)
        if user is None or user.disabled:
            raise AuthError(f"no enabled user {name!r}")
        add_token(session=s, token=UserToken(user_name=name, token_hash=_token_hash(token), label=label,
                                             expires_at=expires_at))
        audit.record(s, actor=name, action="user.token", subject=name,
                     detail={"label": label, "expires_at": expires_at.isoformat() if expires_at else None})
        s.commit()
    return token


def authenticate_token(engine: Engine, token: str) -> User:
    """The user a personal access token belongs to; revoked or expired tokens and disabled users are refused."""
    with open_session(engine) as s:
        row = token_by_hash(session=s, token_hash=_token_hash(token))
        expires = aware(row.expires_at) if row is not None else None
        live = row is not None and not row.revoked and (expires is None or expires > utcnow())
        user = get_user(session=s, name=row.user_name) if live and row is not None else None
        if row is None or user is None or user.disabled:
            raise AuthError("unknown, revoked, expired or disabled token")
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


# -- managing people -------------------------------------------------------------------------------------------

class UserAdminError(ValueError):
    """A change to users that is refused for what it would do (not for who asks): the message says why."""


def add_user(engine: Engine, *, actor: str | None, name: str, role: Role | str, password: str | None) -> User:
    """Create a user. `actor` None is the bootstrap: allowed only while no user exists (the first operator);
    after that an operator creates users. An operator who sets the new user's password becomes their sponsor
    (they can act as them); `password` None makes a single-sign-on user, whom nobody else can act as."""
    role = parse_role(str(role.value if isinstance(role, Role) else role))
    name = name.strip()
    if not name:
        raise UserAdminError("the user name must not be empty")
    pw_hash = hash_password(password) if password is not None else ""
    if actor is not None:
        require(engine, actor, "user.manage")
    with open_session(engine) as s:
        if actor is None and list_users(session=s):
            raise UserAdminError("--bootstrap creates only the first user and users exist; log in as an operator "
                                 "(QUANTROUTE_TOKEN or QUANTROUTE_USER) and add users without --bootstrap")
        if actor is None and role is not Role.operator:
            raise UserAdminError("the first user must be an operator (--role operator): only an operator can add "
                                 "the others")
        if get_user(session=s, name=name) is not None:
            raise UserAdminError(f"user {name!r} exists; use 'quantroute user set-role' or 'set-password'")
        audit.record(s, actor=actor or name, action="user.bootstrap" if actor is None else "user.add", subject=name,
                     detail={"role": role.value})
        return create_user(session=s, user=User(name=name, role=role.value, password_hash=pw_hash,
                                                sponsor=(actor or "") if pw_hash else ""))


def _enabled_operators(s) -> list[str]:
    return [u.name for u in list_users(session=s) if u.role == Role.operator.value and not u.disabled]


def set_role(engine: Engine, *, actor: str, name: str, role: Role | str) -> User:
    role = parse_role(str(role.value if isinstance(role, Role) else role))
    require(engine, actor, "user.manage")
    with open_session(engine) as s:
        user = get_user(session=s, name=name)
        if user is None:
            raise UserAdminError(f"no user {name!r}")
        if role is not Role.operator and _enabled_operators(s) == [name]:
            raise UserAdminError(f"{name} is the last enabled operator: make another user an operator first, "
                                 "or no one could manage users any more")
        audit.record(s, actor=actor, action="user.set_role", subject=name, detail={"role": role.value})
        return update_user(session=s, name=name, role=role.value)


def set_disabled(engine: Engine, *, actor: str, name: str, disabled: bool) -> User:
    """Disable or enable a user. A disabled user's password and tokens are refused at once (CLI and dashboard
    re-check on every action); the last enabled operator cannot be disabled."""
    require(engine, actor, "user.manage")
    with open_session(engine) as s:
        user = get_user(session=s, name=name)
        if user is None:
            raise UserAdminError(f"no user {name!r}")
        if disabled and _enabled_operators(s) == [name]:
            who = "you are" if name == actor else f"{name} is"
            raise UserAdminError(f"{who} the last enabled operator: enable or add another operator first, "
                                 "or no one could manage users any more")
        audit.record(s, actor=actor, action="user.disable" if disabled else "user.enable", subject=name)
        return update_user(session=s, name=name, disabled=disabled)


def set_password(engine: Engine, *, actor: str, name: str, password: str) -> User:
    """A user sets their own password, or an operator resets another's and becomes their sponsor (they know it).
    A sponsorship is never ended by the user's own change: the sponsor, knowing the password, could make it."""
    pw_hash = hash_password(password)
    if actor != name:
        require(engine, actor, "user.manage")
    with open_session(engine) as s:
        if get_user(session=s, name=name) is None:
            raise UserAdminError(f"no user {name!r}")
        audit.record(s, actor=actor, action="user.set_password", subject=name,
                     detail={} if actor == name else {"reset_by_operator": True})
        return update_user(session=s, name=name, password_hash=pw_hash, sponsor=None if actor == name else actor)


def controllers(engine: Engine, name: str) -> list[str]:
    """Who can act as `name` besides `name`: the operator who set a password of theirs, that operator's sponsor,
    and so on (the four-eyes rule counts them as one person with `name`)."""
    chain: list[str] = []
    with open_session(engine) as s:
        user = get_user(session=s, name=name)
        while user is not None and user.sponsor and user.sponsor not in chain and user.sponsor != name:
            chain.append(user.sponsor)
            user = get_user(session=s, name=user.sponsor)
    return chain


def token_list(engine: Engine, *, actor: str, name: str | None = None) -> list[UserToken]:
    """`actor`'s tokens, or `name`'s (an operator's right). Never the tokens themselves: only hashes are kept."""
    target = name or actor
    if target != actor:
        require(engine, actor, "user.manage")
    with open_session(engine) as s:
        return list_tokens(session=s, user_name=target)


def revoke_token(engine: Engine, *, actor: str, token_id: int) -> UserToken:
    """Revoke one token (one's own, or anyone's as an operator); refused at its next use, on every host."""
    with open_session(engine) as s:
        row = s.get(UserToken, token_id)
        if row is None:
            raise UserAdminError(f"no token with id {token_id}; list them with 'quantroute user token list'")
        if row.user_name != actor:
            require(engine, actor, "user.manage")
        if row.revoked:
            raise UserAdminError(f"token {token_id} of {row.user_name} is already revoked")
        row.revoked = True
        s.add(row)
        audit.record(s, actor=actor, action="user.token_revoke", subject=row.user_name,
                     detail={"token_id": token_id, "label": row.label})
        s.commit()
        s.refresh(row)
        return row
