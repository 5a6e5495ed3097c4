"""Dashboard users: a name, a role and a scrypt password hash. Roles decide what each person may change."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, Session, SQLModel, select

from quantroute.clock import utcnow


class User(SQLModel, table=True):
    """One person who logs in to the dashboard (or an OIDC identity mapped to a role by its email)."""

    __tablename__ = "user"
    name: str = Field(primary_key=True)
    role: str = Field(index=True)  # operator | reviewer | analyst (quantroute.auth.Role)
    password_hash: str = ""  # "scrypt$n$r$p$salt_hex$hash_hex"; empty = password login disabled (OIDC only)
    created_at: datetime = Field(default_factory=utcnow)
    disabled: bool = False


def get_user(*, session: Session, name: str) -> User | None:
    return session.get(User, name)


def create_user(*, session: Session, user: User) -> User:
    session.add(user)
    session.commit()
    session.refresh(user)
    return user


def update_user(*, session: Session, name: str, role: str | None = None, password_hash: str | None = None) -> User:
    user = session.get(User, name)
    if user is None:
        raise LookupError(f"no user {name!r}")
    if role is not None:
        user.role = role
    if password_hash is not None:
        user.password_hash = password_hash
    session.add(user)
    session.commit()
    session.refresh(user)
    return user


def list_users(*, session: Session) -> list[User]:
    return list(session.exec(select(User).order_by(User.name)))
