"""Router tests: a small simulated fleet on free ports, policies written per test, routers on free ports."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from quantroute.db.engine import init_db, make_engine
from quantroute.fleet import parse_fleet
from quantroute.ports import free_port
from quantroute.router.app import create_app
from quantroute.router.settings import RouterSettings
from quantroute.router.testing import running_router
from quantroute.sim.runner import running_fleet
from tests.conftest import wait_until

TOKEN = "test-admin-token"
MODEL = "llama3-8b"
INT4, INT4_V2, INT8, FP16 = "llama3-8b-awq-w4a16", "llama3-8b-awq-w4a16-v2", "llama3-8b-w8a8-int8", "llama3-8b-fp16"

FLEET = f"""
model_shape: llama3-8b
nodes:
  - {{id: fp16-a, port: 0, hardware: a100-80g, max_num_seqs: 16, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {FP16}, tier: fp16, format: bf16}}}}
  - {{id: int8-a, port: 0, hardware: a100-80g, max_num_seqs: 16, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {INT8}, tier: int8, format: int8}}}}
  - {{id: int4-a, port: 0, hardware: a100-80g, max_num_seqs: 16, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {INT4}, tier: int4, format: int4, method: awq}}}}
  - {{id: int4-b, port: 0, hardware: a100-80g, max_num_seqs: 16, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {INT4}, tier: int4, format: int4, method: awq}}}}
  - {{id: int4-v2, port: 0, hardware: a100-80g, max_num_seqs: 16, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {INT4_V2}, tier: int4, format: int4, method: awq}}}}
"""

SENSITIVE = [{"role": "user", "content": "Write python code to solve this equation step by step"}]
TOLERANT = [{"role": "user", "content": "hi, tell me a joke"}]


def policy_data(version: int, **over) -> dict:
    data = {
        "version": version, "author": "test", "created_at": "2026-01-01T00:00:00Z", "message": f"v{version}",
        "tiers": [{"name": "fp16", "deployments": {MODEL: [FP16]}},
                  {"name": "int8", "deployments": {MODEL: [INT8]}},
                  {"name": "int4", "deployments": {MODEL: [INT4, INT4_V2]}}],
        "rules": [{"name": "precise-work", "weight": 6,
                   "when": {"keywords": {"any": ["code", "python", "equation", "step by step"]}}},
                  {"name": "casual", "weight": -2, "when": {"keywords": {"any": ["hi", "joke"]}}}],
        "thresholds": [{"min_score": 6, "tier": "fp16"}, {"min_score": 3, "tier": "int8"}],
        "sessions": {"affinity": True, "ttl_s": 600, "max_wait_ms": 300, "quiescence_s": 60},
        "escalation": {"enabled": True, "max_tier": "fp16"},
        # these tests pin down where rules send a request; spill's own tests turn it on
        "spill": {"enabled": False},
    }
    data.update(over)
    return data


def write_policy(policies: Path, version: int, activate: bool = True, **over) -> Path:
    policies.mkdir(parents=True, exist_ok=True)
    path = policies / f"policy-{version:04d}.yaml"
    path.write_text(yaml.safe_dump(policy_data(version, **over), sort_keys=False))
    if activate:
        activate_pointer(policies, version)
    return path


def activate_pointer(policies: Path, version: int) -> None:
    tmp = policies / ".active.tmp"
    tmp.write_text(f"{version}\n")
    tmp.replace(policies / "active")  # atomic, as the policy store does


@pytest.fixture(scope="module")
def sim():
    fleet = parse_fleet(FLEET, source="tests/router")
    with running_fleet(fleet, time_scale=0.002) as rf:
        yield rf


def write_fleet_file(rf, path: Path) -> Path:
    path.write_text(yaml.safe_dump(rf.fleet.model_dump(mode="json")))
    return path


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    write_policy(tmp_path / "policies", 1)
    return tmp_path / "policies"


@pytest.fixture
def make_settings(tmp_path: Path, policies: Path, sim):
    fleet_file = write_fleet_file(sim, tmp_path / "fleet.yaml")

    def make(**over) -> RouterSettings:
        base = dict(policies_dir=policies, fleet_file=fleet_file, db_url=f"sqlite:///{tmp_path / 'router.db'}",
                    admin_token=TOKEN, probe_interval_s=0.1, probe_timeout_s=0.5, eject_after_failures=2,
                    log_flush_interval_s=0.05, policy_poll_s=0.2)
        base.update(over)
        return RouterSettings(**base)

    return make


@contextlib.contextmanager
def router_at(settings: RouterSettings, **kw):
    if kw.get("engine") is None and kw.get("use_db", True):
        init_db(make_engine(settings.db_url))  # what `quantroute db upgrade` does before routers start
    app = create_app(settings, **kw)
    with running_router(settings, app=app) as url:
        yield url, app


@pytest.fixture
def router(make_settings):
    with router_at(make_settings()) as (url, app):
        yield url, app


def admin(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=10)


def chat(url: str, messages, session: str | None = None, **body) -> httpx.Response:
    headers = {"x-session-id": session} if session else {}
    return httpx.post(f"{url}/v1/chat/completions", headers=headers, timeout=30,
                      json={"model": MODEL, "messages": messages, "max_tokens": 8, **body})


def set_faults(rf, node_id: str, **faults) -> None:
    httpx.post(rf.urls[node_id] + "/sim/faults", json=faults, timeout=5).raise_for_status()


@pytest.fixture
def sqlite_engine(sqlite_url):
    """An engine on a SQLite file at the current schema, disposed afterwards."""
    eng = make_engine(sqlite_url)
    yield eng
    eng.dispose()


def router_process(settings, *, workers: int, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """`quantroute router` as a real process (its own process group, so a kill takes every worker)."""
    init_db(make_engine(settings.db_url))  # what `quantroute db upgrade` does before routers start
    port = free_port()
    env = {**os.environ, "QUANTROUTE_ROUTER_PROBE_INTERVAL_S": "0.1", "QUANTROUTE_ROUTER_LOG_FLUSH_INTERVAL_S": "0.05",
           "QUANTROUTE_ROUTER_POLICY_POLL_S": "0.2", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "quantroute.cli.main", "router", "--policies",
                             str(settings.policies_dir), "--fleet", str(settings.fleet_file), "--db", settings.db_url,
                             "--port", str(port), "--admin-token", TOKEN, "--workers", str(workers)],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else proc.returncode
        return httpx.get(url + "/v1/models", timeout=2).status_code == 200

    wait_until(up, what="the router process to start", timeout=120, interval=0.1, ignore=(httpx.HTTPError,))
    return proc, url


def kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
