"""Shadow comparison over real vLLM: two vLLM servers of the tiny model behind the router, one listed as
the fp16 deployment and one as an int4 deployment (the same weights under another id). Greedy requests served by
the first are shadowed to the second after the client has its answer; with the same weights every pair agrees
exactly. A check of the mechanics end to end: real responses (plain and streamed) parsed, compared and stored."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
import yaml
from sqlalchemy import select

from quantroute.db.engine import init_db, make_engine, table_of
from quantroute.db.shadow_pair import ShadowPair
from quantroute.router.settings import RouterSettings
from quantroute.router.testing import running_router
from tests.support.metrics import series
from tests.support.waiting import wait_until
from tests.vllm.conftest import start_vllm

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]

TOKEN = "vllm-shadow-token"
SHADOW_DEPLOYMENT = "tiny-llama-same-weights"
PROMPTS = ["What is 2 + 3?", "List the numbers from 1 to 5.", "What is the capital of France?"]


def write_policy(policies: Path, served: str, shadow: str, model: str) -> None:
    policies.mkdir()
    policy = {
        "version": 1, "author": "tests/vllm", "created_at": "2026-01-01T00:00:00Z", "message": "shadow on vLLM",
        "tiers": [{"name": "fp16", "deployments": {model: [served]}},
                  {"name": "int4", "deployments": {model: [shadow]}}],
        "rules": [{"name": "greedy", "weight": 6, "when": {"temperature": {"max": 0.2}}}],
        "thresholds": [{"min_score": 6, "tier": "fp16"}],
        # max_concurrent above what one sequential client can leave in flight: with 2, a slow twin still answering
        # the first two shadows made the third sampled request "busy" and it was never shadowed (a CI failure)
        "shadow": {"rate": 1.0, "max_concurrent": 64, "max_target_load": 1000, "timeout_s": 120,
                   "pairs": [{"served": ["fp16"], "shadow": "int4"}]},
    }
    (policies / "policy-0001.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
    (policies / "active").write_text("1\n")


def register(url: str, server, tier: str) -> None:
    r = httpx.post(f"{url}/admin/nodes", headers={"authorization": f"Bearer {TOKEN}"}, timeout=30, json={
        "url": server.url, "model": server.model, "deployment": server.deployment, "tier": tier, "format": "bf16",
        "hardware": "cpu", "node_id": f"{tier}-node"})
    assert r.status_code in (200, 201), r.text


def test_greedy_shadow_pairs_of_the_same_weights_agree_exactly(vllm_server, tmp_path):
    with start_vllm(tmp_path, deployment=SHADOW_DEPLOYMENT, model=vllm_server.model) as twin:
        write_policy(tmp_path / "policies", vllm_server.deployment, twin.deployment, vllm_server.model)
        settings = RouterSettings(policies_dir=tmp_path / "policies", db_url=f"sqlite:///{tmp_path / 'r.db'}",
                                  admin_token=TOKEN, probe_interval_s=1.0, probe_timeout_s=15.0,
                                  eject_after_failures=5, upstream_timeout_s=120, log_flush_interval_s=0.2)
        init_db(make_engine(settings.db_url))
        with running_router(settings) as url:
            register(url, vllm_server, "fp16")
            register(url, twin, "int4")
            with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120) as client:
                for i, prompt in enumerate(PROMPTS):
                    messages = [{"role": "user", "content": prompt}]
                    if i == 1:  # one streamed: the served answer is read back from its SSE chunks
                        stream = client.chat.completions.create(model=vllm_server.model, messages=messages,
                                                                temperature=0, max_tokens=24, stream=True)
                        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
                    else:
                        r = client.chat.completions.create(model=vllm_server.model, messages=messages,
                                                           temperature=0, max_tokens=24)
                        assert r.model == vllm_server.deployment
                        text = r.choices[0].message.content
                    assert text
            engine = make_engine(settings.db_url)

            def pairs() -> list:
                with engine.connect() as c:
                    rows = c.execute(select(table_of(ShadowPair))).mappings().all()
                return rows if len(rows) == len(PROMPTS) else []

            def shadow_series() -> str:  # on failure: what the router did with each sample (skipped, why, sent)
                return f"{len(PROMPTS)} shadow pairs; router: " + "; ".join(series(
                    url, "quantroute_shadow_requests_total", "quantroute_shadow_skipped_total",
                    "quantroute_requests_total", nonzero=True))

            rows = wait_until(pairs, what=shadow_series, timeout=240, interval=0.5)
    for r in rows:
        assert (r["served_deployment"], r["shadow_deployment"]) == (vllm_server.deployment, SHADOW_DEPLOYMENT)
        assert r["shadow_status"] == 200 and r["compared"], r["shadow_error"]
        assert r["exact"] and r["agree"] and r["diverge_char"] is None, (r["bodies"], r)
        assert r["served_tokens"] == r["shadow_tokens"]
        assert r["stream"] or r["served_tokens"]  # usage counts come with whole responses (no include_usage here)
    assert sum(1 for r in rows if r["stream"]) == 1
