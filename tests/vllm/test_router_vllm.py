"""The whole chain against a real vLLM: `quantroute node register` reads the tiny model's artifact and
registers the vLLM server with a real router; the openai SDK then talks to the router, which routes chat
(plain and streamed) and completions to vLLM."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from quantroute.db.engine import init_db, make_engine
from quantroute.router.settings import RouterSettings
from quantroute.router.testing import running_router
from tests.conftest import wait_until

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(600)]

TOKEN = "vllm-test-token"
NO_EOS = {"ignore_eos": True}


def write_policy(policies: Path, deployment: str, model: str) -> None:
    """One tier (fp16) holding the real node's deployment; one rule so decisions carry a rule name."""
    policies.mkdir()
    policy = {
        "version": 1, "author": "tests/vllm", "created_at": "2026-01-01T00:00:00Z", "message": "real vLLM",
        "tiers": [{"name": "fp16", "deployments": {model: [deployment]}}],
        "deployments": {deployment: {"model": model, "format": "bf16", "method": "none"}},
        "rules": [{"name": "greedy", "weight": 1, "when": {"temperature": {"max": 0.2}}}],
        "thresholds": [{"min_score": 0, "tier": "fp16"}],
    }
    (policies / "policy-0001.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
    (policies / "active").write_text("1\n")


@pytest.fixture(scope="module")
def router_url(vllm_server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("router-vllm")
    write_policy(tmp / "policies", vllm_server.deployment, vllm_server.model)
    # vLLM answers /health and /metrics late when its 2 cores are busy: a generous probe timeout keeps
    # the real node from being ejected under the test's own load.
    settings = RouterSettings(policies_dir=tmp / "policies", db_url=f"sqlite:///{tmp / 'router.db'}",
                              admin_token=TOKEN, probe_interval_s=1.0, probe_timeout_s=15.0,
                              eject_after_failures=5, upstream_timeout_s=120)
    init_db(make_engine(settings.db_url))
    with running_router(settings) as url:
        out = subprocess.run(
            [sys.executable, "-m", "quantroute.cli.main", "node", "register", "--router", url,
             "--node", vllm_server.url, "--model-dir", str(vllm_server.model_dir), "--model", vllm_server.model,
             "--deployment", vllm_server.deployment, "--hardware", "cpu", "--token", TOKEN],
            capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        wait_healthy(url)
        yield url


def wait_healthy(url: str, timeout: float = 60) -> dict:
    def node() -> dict:
        [one] = httpx.get(f"{url}/admin/nodes", headers={"authorization": f"Bearer {TOKEN}"},
                          timeout=10).json()["nodes"]
        return one

    return wait_until(lambda: (n := node())["healthy"] and n, what=lambda: f"the node healthy ({node()})",
                      timeout=timeout, interval=0.2)


@pytest.fixture
def client(router_url):
    with openai.OpenAI(base_url=f"{router_url}/v1", api_key="unused", max_retries=0, timeout=120) as c:
        yield c


def test_registered_node_carries_what_the_artifact_says(router_url, vllm_server):
    node = wait_healthy(router_url)
    assert (node["tier"], node["format"], node["method"], node["deployment"]) == ("fp16", "bf16", "none",
                                                                                  vllm_server.deployment)
    assert node["checksum"].startswith("sha256:") and node["url"] == vllm_server.url


def test_chat_through_the_router(client, vllm_server):
    raw = client.chat.completions.with_raw_response.create(
        model=vllm_server.model, max_tokens=8, temperature=0, extra_body=NO_EOS,
        messages=[{"role": "user", "content": "Say hello."}], extra_headers={"x-session-id": "real-1"})
    resp = raw.parse()
    assert resp.model == vllm_server.deployment
    assert resp.usage.completion_tokens == 8 and resp.choices[0].finish_reason == "length"
    h = raw.headers
    assert (h["x-quantroute-tier"], h["x-quantroute-deployment"]) == ("fp16", vllm_server.deployment)
    assert h["x-quantroute-node"] == vllm_server.url and h["x-quantroute-policy-version"] == "1"
    assert "greedy" in h["x-quantroute-rules"]


def test_chat_stream_through_the_router(client, vllm_server):
    with client.chat.completions.with_streaming_response.create(
            model=vllm_server.model, max_tokens=6, stream=True, stream_options={"include_usage": True},
            extra_body=NO_EOS, messages=[{"role": "user", "content": "Count to three."}]) as raw:
        assert raw.headers["x-quantroute-tier"] == "fp16"
        assert raw.headers["content-type"].startswith("text/event-stream")
        chunks = list(raw.parse())
    assert {c.model for c in chunks} == {vllm_server.deployment}
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].usage.completion_tokens == 6
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_completions_through_the_router(client, vllm_server):
    raw = client.completions.with_raw_response.create(model=vllm_server.model, prompt="the router",
                                                      max_tokens=5, extra_body=NO_EOS)
    resp = raw.parse()
    assert (resp.model, resp.usage.completion_tokens) == (vllm_server.deployment, 5)
    assert raw.headers["x-quantroute-deployment"] == vllm_server.deployment
    chunks = list(client.completions.create(model=vllm_server.model, prompt="the router", max_tokens=4,
                                            stream=True, stream_options={"include_usage": True},
                                            extra_body=NO_EOS))
    assert chunks[-1].usage.completion_tokens == 4 and {c.object for c in chunks} == {"text_completion"}


def test_async_client_through_the_router(router_url, vllm_server):
    async def talk():
        async with openai.AsyncOpenAI(base_url=f"{router_url}/v1", api_key="unused", max_retries=0) as c:
            resp = await c.chat.completions.create(model=vllm_server.model, max_tokens=4, extra_body=NO_EOS,
                                                   messages=[{"role": "user", "content": "hi"}])
            stream = await c.chat.completions.create(model=vllm_server.model, max_tokens=4, stream=True,
                                                     extra_body=NO_EOS, messages=[{"role": "user", "content": "hi"}])
            return resp, [ch async for ch in stream]

    resp, chunks = asyncio.run(talk())
    assert resp.usage.completion_tokens == 4
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "length"


def test_router_models_and_vllm_errors_pass_through(client, router_url, vllm_server):
    ids = {m.id for m in client.models.list().data}
    assert {vllm_server.model, vllm_server.deployment} <= ids
    # vLLM's own 400 (max_tokens over max_model_len) reaches the client as an OpenAI error.
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=vllm_server.model, prompt="x", max_tokens=600)
    assert "max_tokens" in json.dumps(e.value.body)
