"""The controller's part of the Rollouts page: whether anyone is watching the rollouts (the leader's heartbeat),
webhook deliveries that failed, and a refresh of the page while a rollout is live. Self-contained: the page
calls `render(live=...)` once, above its rollouts.

    controller: alive, last pass 3 s ago (leader host:pid, every 5 s)      <- green
    controller: no pass for 47 s (leader host:pid, every 5 s) ...         <- red: rollouts are not watched
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import streamlit as st
from sqlalchemy import func
from sqlmodel import select

from dashboard import data
from quantroute.clock import utcnow
from quantroute.controller.loop import leader_status
from quantroute.db import notification as outbox
from quantroute.db import rollout as rdb
from quantroute.db.engine import session as db_session

REFRESH_S = 10  # a fragment run per 10 s: cheap (two small queries), and rare enough not to keep the page busy
TOKEN_KEY = "controller_status.rollouts_token"
FAILURES_SINCE = timedelta(hours=24)


def delivery_failures(engine, now: datetime) -> pd.DataFrame:
    with db_session(engine) as s:
        rows = outbox.failures(session=s, since=now - FAILURES_SINCE)
    return pd.DataFrame([{"notification": n.kind, "model": n.payload.get("model"), "at": n.at, "url": d.url,
                          "status": d.status, "tries": d.attempts, "error": d.last_error} for n, d in rows])


def _change_token(engine) -> tuple:
    """Changes whenever any rollout changes (a new event or a status write): the page is re-run then."""
    with db_session(engine) as s:
        ev = s.exec(select(func.max(rdb.RolloutEvent.id))).one()
        rev = s.exec(select(func.sum(rdb.Rollout.revision))).one()
    return ev, rev


def _status(engine) -> None:
    now = utcnow()
    line = leader_status(engine, now)
    show = st.success if line.ok else st.error
    show(line.text, icon=":material/monitor_heart:" if line.ok else ":material/warning:")
    failed = delivery_failures(engine, now)
    if not failed.empty:
        st.warning(f"{len(failed)} webhook notification(s) not delivered in the last 24 h (retried with backoff; "
                   "'failed' ones were given up)")
        st.dataframe(failed, hide_index=True, width="stretch")


@st.fragment(run_every=REFRESH_S)
def _live_status() -> None:
    """Re-runs on its own every REFRESH_S while a rollout is live; the whole page re-runs when a rollout moved
    since the page last rendered (the page stores its token first, so a full run - after a person's own action,
    with its outcome message - never re-runs itself and loses that message)."""
    engine = data.engine()
    _status(engine)
    token = _change_token(engine)
    if st.session_state.get(TOKEN_KEY) != token:
        st.session_state[TOKEN_KEY] = token
        st.rerun(scope="app")


def render(*, live: bool) -> None:
    if live:
        st.session_state[TOKEN_KEY] = _change_token(data.engine())
        _live_status()
    else:
        _status(data.engine())
