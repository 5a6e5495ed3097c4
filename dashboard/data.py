"""Data access for the pages: the engine (cached once per URL), cached SQL queries (short TTL), the policy
store and the router's admin API. Pages call these and never write SQL; writes go through actions.py."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy.engine import Engine

from dashboard import queries
from dashboard.settings import DashboardSettings
from quantroute.admin_client import RouterAdmin, RouterUnavailable
from quantroute.policy.store import PolicyStore

TTL_S = 5


def settings() -> DashboardSettings:
    return DashboardSettings()


@st.cache_resource(show_spinner=False)
def _engine(db_url: str | None) -> Engine:
    from quantroute.db.engine import make_engine, require_schema

    # `quantroute db upgrade` creates the schema; a dashboard on a schema that is not its own refuses to start.
    return require_schema(make_engine(db_url))


def engine() -> Engine:
    return _engine(settings().db_url)


def store() -> PolicyStore:
    return PolicyStore(settings().policies_dir, engine())


@st.cache_resource(show_spinner=False)
def _router(urls: str, token: str | None) -> RouterAdmin:
    # One pooled client per process, like the engine: a client made per render would leave its connections
    # to the garbage collector.
    return RouterAdmin(urls, token)


def router() -> RouterAdmin | None:
    s = settings()
    return _router(s.router_url, s.admin_token) if s.router_url else None


# ---- cached queries (keyed by the DB URL so two dashboards in one process never share results) -----------
# Each shows a spinner with what it reads while it runs: a slow query must not look like an empty page.

@st.cache_data(ttl=TTL_S, show_spinner="Reading usage per tenant…")
def tenant_usage(db_url: str | None, window_s: int, bucket_s: int) -> pd.DataFrame:
    return queries.tenant_usage(_engine(db_url), window_s=window_s, bucket_s=bucket_s)


@st.cache_data(ttl=TTL_S, show_spinner="Reading tenants and keys…")
def tenants_and_keys(db_url: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    return queries.tenants_and_keys(_engine(db_url))


@st.cache_data(ttl=TTL_S, show_spinner="Reading per-tier traffic…")
def tier_timeseries(db_url: str | None, window_s: int, bucket_s: int) -> pd.DataFrame:
    return queries.tier_timeseries(_engine(db_url), window_s=window_s, bucket_s=bucket_s)


@st.cache_data(ttl=TTL_S, show_spinner="Reading traffic shares…")
def tier_share(db_url: str | None, window_s: int) -> pd.DataFrame:
    return queries.tier_share(_engine(db_url), window_s=window_s)


@st.cache_data(ttl=TTL_S, show_spinner="Reading per-deployment figures…")
def deployment_summary(db_url: str | None, window_s: int) -> pd.DataFrame:
    return queries.deployment_summary(_engine(db_url), window_s=window_s)


@st.cache_data(ttl=TTL_S, show_spinner="Reading session pins…")
def pinned_sessions(db_url: str | None) -> pd.DataFrame:
    return queries.pinned_sessions(_engine(db_url))


@st.cache_data(ttl=TTL_S, show_spinner="Reading pinned 503s…")
def pin_failures(db_url: str | None, window_s: int) -> pd.DataFrame:
    return queries.pin_failures(_engine(db_url), window_s=window_s)


@st.cache_data(ttl=TTL_S, show_spinner="Reading canary guard metrics…")
def arm_guard_series(db_url: str | None, model: str, window_s: int, bucket_s: int) -> pd.DataFrame:
    return queries.arm_guard_series(_engine(db_url), model=model, window_s=window_s, bucket_s=bucket_s)


@st.cache_data(ttl=TTL_S, show_spinner="Reading logged requests…")
def replay_rows(db_url: str | None, limit: int) -> pd.DataFrame:
    return queries.replay_rows(_engine(db_url), limit=limit)


@st.cache_data(ttl=TTL_S, show_spinner="Reading shadow pairs…")
def shadow_pairs(db_url: str | None, window_s: int) -> list[dict[str, Any]]:
    return queries.shadow_pairs(_engine(db_url), window_s=window_s)


@st.cache_data(ttl=TTL_S, show_spinner="Reading disagreeing shadow pairs…")
def shadow_disagreements(db_url: str | None, window_s: int, rule: str | None, limit: int) -> list[dict[str, Any]]:
    return queries.shadow_disagreements(_engine(db_url), window_s=window_s, rule=rule, limit=limit)


@st.cache_data(ttl=TTL_S, show_spinner="Reading shadow load…")
def shadow_load(db_url: str | None, window_s: int, bucket_s: int) -> pd.DataFrame:
    return queries.shadow_load(_engine(db_url), window_s=window_s, bucket_s=bucket_s)


@st.cache_data(ttl=TTL_S, show_spinner="Reading the audit log…")
def audit_events(db_url: str | None, actor: str | None, action_prefix: str | None, search: str | None,
                 limit: int) -> pd.DataFrame:
    return queries.audit_events(_engine(db_url), actor=actor, action_prefix=action_prefix, search=search,
                                limit=limit)


@st.cache_data(ttl=TTL_S, show_spinner="Reading the audit log…")
def audit_facets(db_url: str | None) -> tuple[list[str], list[str]]:
    return queries.audit_facets(_engine(db_url))


@st.cache_data(ttl=TTL_S, show_spinner="Reading eval runs…")
def eval_runs(db_url: str | None) -> pd.DataFrame:
    from quantroute.evals.runs import list_runs

    rows = list_runs(_engine(db_url), limit=200)
    return pd.DataFrame([{"id": r.id, "created_at": r.created_at, "status": r.status, "suite": r.suite_name,
                          "baseline": r.baseline_deployment, "candidate": r.candidate_deployment,
                          "candidate_tier": r.candidate_tier, "gate_passed": r.gate_passed} for r in rows])


@st.cache_data(ttl=TTL_S, show_spinner="Reading the eval run…")
def eval_run(db_url: str | None, run_id: int) -> dict[str, Any]:
    from quantroute.evals.runs import load_run

    return load_run(_engine(db_url), run_id).model_dump(mode="json")


@st.cache_data(ttl=TTL_S, show_spinner="Comparing the two runs…")
def eval_comparison(db_url: str | None, run_a: int, run_b: int) -> dict[str, Any]:
    from quantroute.evals.runs import compare_runs

    return compare_runs(_engine(db_url), run_a, run_b).model_dump(mode="json")


@st.cache_data(ttl=300, show_spinner=False)
def suite_prompts(path: str) -> dict[str, str]:
    """Item id -> the prompt as a person reads it (role-prefixed turns), from the suite file a run used; empty
    when the file is gone (runs keep answers, not prompts)."""
    from quantroute.evals.suite import SuiteError, load_suite

    try:
        suite = load_suite(path)
    except (SuiteError, OSError):
        return {}
    return {i.id: "\n\n".join(f"{m['role']}: {m['content']}" for m in i.chat_messages()) for i in suite.items}


# ---- queue history (the request log has no queue: waiting counts are sampled from the nodes) ----------------

class QueueHistory:
    """Waiting requests per tier, sampled whenever any session renders the fleet state; one per process and
    router, so the history survives a page reload and is the same for every viewer."""

    def __init__(self, maxlen: int = 20_000) -> None:
        self._rows: deque[dict[str, Any]] = deque(maxlen=maxlen)
        self._lock = threading.Lock()

    def record(self, nodes: list[dict], now: pd.Timestamp | None = None) -> None:
        now = now or pd.Timestamp.now(tz="UTC")
        per_tier: dict[str, int] = {}
        for n in nodes:
            per_tier[n["tier"]] = per_tier.get(n["tier"], 0) + int(n.get("waiting") or 0)
        with self._lock:
            self._rows.extend({"time": now, "tier": t, "waiting": w} for t, w in per_tier.items())

    def since(self, start: pd.Timestamp) -> pd.DataFrame:
        with self._lock:
            rows = [r for r in self._rows if r["time"] >= start]
        return pd.DataFrame(rows, columns=["time", "tier", "waiting"])


@st.cache_resource(show_spinner=False)
def _queue(router_urls: str) -> QueueHistory:
    return QueueHistory()


def record_queue(nodes: list[dict]) -> None:
    _queue(settings().router_url or "").record(nodes)


def queue_history(start: pd.Timestamp) -> pd.DataFrame:
    return _queue(settings().router_url or "").since(start)


def clear() -> None:
    """After a write: the next read must see it, not a cached result."""
    st.cache_data.clear()


# ---- router admin API (live state; not cached beyond one render) ------------------------------------------

def router_call(what: str) -> tuple[Any, str | None]:
    """(result, None) or (None, why it failed) for policy | nodes | sessions | metrics."""
    admin = router()
    if admin is None:
        return None, "no router configured (QUANTROUTE_DASHBOARD_ROUTER_URL)"
    try:
        with st.spinner(f"Asking the router for its {what}…"):  # a slow replica shows as such, not as a blank
            return {"policy": admin.policy, "nodes": admin.nodes, "sessions": admin.sessions,
                    "metrics": admin.metrics_text}[what](), None
    except RouterUnavailable as e:
        return None, str(e)
