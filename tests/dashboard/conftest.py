"""Dashboard tests: a real SQLite DB with one user per role, a copy of policies/, logged requests (with replay
payloads from data/traffic/mixed.jsonl) and the dashboard's settings in the environment."""

from __future__ import annotations

import json
import random
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from quantroute.auth import hash_password
from quantroute.clock import utcnow
from quantroute.db.engine import init_db, make_engine, session
from quantroute.db.request_log import RequestLog
from quantroute.db.request_stats import rebuild_minute_stats
from quantroute.db.session_pin import SessionPin
from quantroute.db.user import User, create_user

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "dashboard" / "app.py")
PASSWORD = "pw-for-tests"
USERS = {"olivia": "operator", "rahul": "reviewer", "ana": "analyst"}


def seed_requests(engine, n: int = 200, seed: int = 0) -> None:
    lines = [json.loads(x) for x in (REPO / "data/traffic/mixed.jsonl").read_text().splitlines() if x.strip()]
    rnd = random.Random(seed)
    now = utcnow()
    rows = []
    for i in range(n):
        line = lines[i % len(lines)]
        tier = rnd.choice(["fp16", "fp8", "int8", "int4"])
        arm = rnd.choice(["baseline", "candidate"]) if tier == "int4" else None
        rows.append(RequestLog(ts=now - timedelta(seconds=rnd.uniform(0, 600)), request_id=f"r{i}",
                               session_key=line["session"], model="llama3-8b", deployment=f"dep-{tier}",
                               node=f"{tier}-a", tier=tier, arm=arm, policy_version=1, rules=[],
                               score=0.0, status=rnd.choice([200] * 30 + [503]), latency_ms=rnd.uniform(50, 900),
                               ttft_ms=rnd.uniform(10, 200), completion_tokens=rnd.randint(10, 500),
                               replay={"body": line["body"], "headers": line["headers"]}))
    with session(engine) as s:
        s.add_all(rows)
        s.commit()
    with engine.begin() as c:  # rows written outside the router's writer: fold them into the minute rollup
        rebuild_minute_stats(conn=c)


@pytest.fixture
def stack(tmp_path: Path, monkeypatch):
    """DB + policies + users + settings env; yields (engine, policies_dir)."""
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    engine = make_engine(url)
    init_db(engine)
    policies = tmp_path / "policies"
    shutil.copytree(REPO / "policies", policies, ignore=shutil.ignore_patterns("active"))
    with session(engine) as s:
        for name, role in USERS.items():
            create_user(session=s, user=User(name=name, role=role, password_hash=hash_password(PASSWORD)))
    seed_requests(engine)
    with session(engine) as s:
        s.add(SessionPin(session_key="s-0010.demo", model="llama3-8b", tier="fp16",
                         expires_at=utcnow() + timedelta(hours=1)))
        s.commit()
    monkeypatch.setenv("QUANTROUTE_DASHBOARD_DB_URL", url)
    monkeypatch.setenv("QUANTROUTE_DASHBOARD_POLICIES_DIR", str(policies))
    monkeypatch.delenv("QUANTROUTE_DASHBOARD_ROUTER_URL", raising=False)
    monkeypatch.chdir(REPO)
    yield engine, policies
    engine.dispose()


# Page helpers shared by the dashboard tests.
def page(module: str, name: str, role: str) -> AppTest:
    at = AppTest.from_string(f"""
from dashboard.pages import {module}
{module}.render()
""", default_timeout=60)
    at.session_state["user"] = {"name": name, "role": role}
    return at.run()


def buttons(at: AppTest) -> list[str]:
    return [b.label for b in at.button]
