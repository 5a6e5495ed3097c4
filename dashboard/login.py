"""Login: username + password (scrypt hashes in the `user` table), or OIDC through `st.login` when an
`[auth]` section is configured in `.streamlit/secrets.toml`; an OIDC identity gets the role of the user row
named by its email (`quantroute user add alice@example.com --role reviewer`), only when the provider verified
that address (`email_verified`). Failed password logins are throttled in `quantroute.auth` (lockout, audited)."""

from __future__ import annotations

import streamlit as st

from dashboard import data
from quantroute.auth import AuthError, authenticate, oidc_email
from quantroute.db.engine import session as open_session
from quantroute.db.user import get_user


def _oidc_configured() -> bool:
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file at all
        return False


def _refresh(name: str) -> dict | None:
    """The stored role, re-read on every run: a changed role or a disabled user counts at once."""
    with open_session(data.engine()) as s:
        row = get_user(session=s, name=name)
    if row is None or row.disabled:
        return None
    return {"name": row.name, "role": row.role}


def current_user() -> dict | None:
    u = st.session_state.get("user")
    if u:
        u = _refresh(u["name"])
        st.session_state["user"] = u
        if u:
            return u
    if _oidc_configured() and getattr(st.user, "is_logged_in", False):
        email = oidc_email(st.user.to_dict())
        if email is None:
            st.error("your identity provider has not verified your e-mail address; verify it there first "
                     "(an unverified address is not matched to a dashboard role)")
            return None
        u = _refresh(email)
        if u:
            st.session_state["user"] = u
            return u
        st.error(f"{email} has no dashboard role; an operator can add one with "
                 f"`quantroute user add {email} --role analyst`")
    return None


def login_form() -> None:
    st.title("quantroute")
    st.caption("Precision-tiered routing: policy, fleet, sessions, evals and rollouts.")
    with st.form("login"):
        name = st.text_input("User")
        password = st.text_input("Password", type="password")
        submitted = st.form_submit_button("Log in")
    if submitted:
        try:
            row = authenticate(data.engine(), name, password)
        except AuthError as e:
            st.error(str(e))
        else:
            st.session_state["user"] = {"name": row.name, "role": row.role}
            st.rerun()
    if _oidc_configured():
        st.button("Log in with single sign-on", on_click=st.login)


def logout() -> None:
    st.session_state.pop("user", None)
    if _oidc_configured() and getattr(st.user, "is_logged_in", False):
        st.logout()
