"""Small helpers shared by the pages: who is logged in, what they may do, and showing an action's result."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from quantroute.auth import allowed


@dataclass(frozen=True)
class CurrentUser:
    name: str
    role: str


def user() -> CurrentUser:
    u = st.session_state.get("user")
    if not u:
        st.error("not logged in")
        st.stop()
        raise PermissionError("not logged in")  # st.stop() returns when no script runs (bare mode)
    return CurrentUser(u["name"], u["role"])


def can(action: str) -> bool:
    u = st.session_state.get("user")
    return bool(u) and allowed(u["role"], action)


def run_action(label: str, fn, *args, **kwargs):
    """Run a write; show success or the refusal's message (it names the field or the rule that refused).
    Returns the result, or None when it failed."""
    from dashboard import data

    try:
        result = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - every refusal reaches the person, typed errors carry the why
        st.session_state["flash"] = ("error", f"{label} failed: {e}")
        return None
    data.clear()
    st.session_state["flash"] = ("success", f"{label}: done" + (f" ({result})" if result not in (None, True) else ""))
    return result


def flash() -> None:
    """Show (once) the outcome of the last action, which usually happened on the previous run."""
    msg = st.session_state.pop("flash", None)
    if msg:
        (st.success if msg[0] == "success" else st.error)(msg[1])
