"""Dashboard users: a name, a role and a scrypt password hash. Roles decide what each person may change."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, Session, SQLModel, col, select

from quantroute.clock import utcnow


class User(SQLModel, table=True):
    """One person who logs in to the dashboard (or an OIDC identity mapped to a role by its email)."""

    __tablename__ = "user"
    name: str = Field(primary_key=True)
    role: str = Field(index=True)  # operator | reviewer | analyst (quantroute.auth.Role)
    password_hash: str = ""  # "scrypt$n$r$p$salt_hex$hash_hex"; empty = password login disabled (OIDC only)
    created_at: datetime = Field(default_factory=utcnow)
    disabled: bool = False
    # The operator who set a password of this user's (at creation or a reset): they could act as this user, so
    # the four-eyes rule never lets this user approve their work (policy.store, rollout.service). Kept when
    # the user changes their own password, which the sponsor could have done as them.
    sponsor: str = ""


def get_user(*, session: Session, name: str) -> User | None:
    return session.get(User, name)


def create_user(*, session: Session, user: User) -> User:
    session.add(user)
    session.commit()
    session.refresh(user)
    return user


def update_user(*, session: Session, name: str, role: str | None = None, password_hash: str | None = None,
                disabled: bool | None = None, sponsor: str | None = None) -> User:
    user = session.get(User, name)
    if user is None:
        raise LookupError(f"no user {name!r}")
    if role is not None:
        user.role = role
    if password_hash is not None:
        user.password_hash = password_hash
    if disabled is not None:
        user.disabled = disabled
    if sponsor is not None:
        user.sponsor = sponsor
    session.add(user)
    session.commit()
    session.refresh(user)
    return user


def list_users(*, session: Session) -> list[User]:
    return list(session.exec(select(User).order_by(User.name)))


class UserToken(SQLModel, table=True):
    """A personal access token the CLI acts with (`quantroute user token NAME`). Only its SHA-256 is stored:
    the token is 32 random bytes, so a fast hash is enough and a leaked table reveals no usable token."""

    __tablename__ = "user_token"
    id: int | None = Field(default=None, primary_key=True)
    user_name: str = Field(index=True, foreign_key="user.name")
    token_hash: str = Field(unique=True)  # sha256 hex of the whole token
    label: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    last_used_at: datetime | None = None
    revoked: bool = False
    expires_at: datetime | None = None  # None = until revoked


class LoginThrottle(SQLModel, table=True):
    """Failed password logins per name (also for names that do not exist, so a lockout says nothing about
    which accounts exist). Reset by a successful login."""

    __tablename__ = "login_throttle"
    name: str = Field(primary_key=True)
    failures: int = 0
    first_failure_at: datetime | None = None
    locked_until: datetime | None = None


def add_token(*, session: Session, token: UserToken) -> UserToken:
    session.add(token)
    session.flush()
    return token


def token_by_hash(*, session: Session, token_hash: str) -> UserToken | None:
    return session.exec(select(UserToken).where(UserToken.token_hash == token_hash)).first()


def list_tokens(*, session: Session, user_name: str) -> list[UserToken]:
    return list(session.exec(select(UserToken).where(UserToken.user_name == user_name).order_by(col(UserToken.id))))


def get_throttle(*, session: Session, name: str) -> LoginThrottle | None:
    return session.get(LoginThrottle, name)
