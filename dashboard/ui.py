"""Small helpers shared by the pages: who is logged in, what they may do, showing an action's result, and
tables with a CSV download."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
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
    return allowed(u["role"], action) if u else False


def refusal(failed: str, error: Exception) -> str:
    """One sentence: what could not be done and why. Refusals from the services already start with the
    action ("approve refused: ..."); those are shown as they are, with a capital letter."""
    why = str(error).strip() or type(error).__name__
    if " refused" in why.split(":", 1)[0]:
        return why[0].upper() + why[1:]
    return f"Could not {failed}: {why}"


def run_action(fn: Callable[..., Any], *args: Any, done: Callable[[Any], str], failed: str, **kwargs: Any) -> Any:
    """Run a write; keep for the next run a one-sentence outcome: `done(result)` on success, or the refusal's
    reason (it names the field or the rule that refused) after "Could not <failed>". Returns the result, or
    None when it failed."""
    from dashboard import data

    try:
        result = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - every refusal reaches the person, typed errors carry the why
        st.session_state["flash"] = ("error", refusal(failed, e))
        return None
    data.clear()
    st.session_state["flash"] = ("success", done(result))
    return result


def flash() -> None:
    """Show (once) the outcome of the last action, which usually happened on the previous run."""
    msg = st.session_state.pop("flash", None)
    if msg:
        (st.success if msg[0] == "success" else st.error)(msg[1])


def table(df: pd.DataFrame, name: str, **kwargs: Any) -> None:
    """A table with a "Download CSV" button under it (the file is named after the table)."""
    st.dataframe(df, hide_index=True, width="stretch", **kwargs)
    if not df.empty:
        st.download_button("Download CSV", df.to_csv(index=False).encode(), file_name=f"{name}.csv",
                           mime="text/csv", key=f"csv_{name}", icon=":material/download:")
