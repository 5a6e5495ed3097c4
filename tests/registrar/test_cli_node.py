"""`quantroute node inspect|register` as a person runs them: a real subprocess, posting to a real HTTP server
on a free loopback port."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from quantroute.node import NodeIdentity
from quantroute.router.testing import serve_app
from tests.registrar.model_files import awq_layer, edges, float_layer, llama_config

TOKEN = "s3cret"
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128}


def quantroute(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "quantroute.cli.main", *args], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.fixture
def admin_server():
    """A minimal stand-in for the router's admin API: checks the bearer token, validates the body with the
    shared NodeIdentity model and keeps what it received."""
    received: list[dict] = []

    async def nodes(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return JSONResponse({"error": {"message": "admin endpoints need a bearer token", "type": "unauthorized",
                                           "param": None, "code": "unauthorized"}}, status_code=401)
        body = await request.json()
        received.append(body)
        return JSONResponse(NodeIdentity.model_validate(body).model_dump(mode="json"), status_code=201)

    app = Starlette(routes=[Route("/admin/nodes", nodes, methods=["POST"])])
    with serve_app(app) as url:
        yield url, received


@pytest.fixture
def awq_dir(make_model):
    return make_model("model-fp16", llama_config(torch_dtype="float16", quantization_config=AWQ),
                      edges("F16") | awq_layer())


def test_inspect_prints_the_detected_tier(awq_dir):
    out = quantroute("node", "inspect", str(awq_dir))
    assert out.returncode == 0, out.stderr
    assert "tier       int4" in out.stdout and "method     awq, 4-bit, group_size 128" in out.stdout
    as_json = json.loads(quantroute("node", "inspect", "--json", str(awq_dir)).stdout)
    assert (as_json["tier"], as_json["format"], as_json["dtype_histogram"]) == ("int4", "int4", {"I32": 14, "F16": 10})


def test_inspect_conflict_exits_with_the_reason(make_model):
    d = make_model("liar", llama_config(quantization_config=AWQ), edges("BF16") | float_layer("BF16"))
    out = quantroute("node", "inspect", str(d))
    assert out.returncode == 1
    assert "conflicting evidence" in out.stderr and "awq" in out.stderr and "BF16" in out.stderr


def test_register_posts_the_registration(admin_server, awq_dir):
    url, received = admin_server
    out = quantroute("node", "register", "--router", url, "--node", "http://10.0.0.5:8000", "--model-dir",
                     str(awq_dir), "--model", "llama3-8b", "--deployment", "llama3-8b-awq-w4a16",
                     "--hardware", "a100-80g", "--vram-gb", "80", "--token", TOKEN)
    assert out.returncode == 0, out.stderr
    assert "registered http://10.0.0.5:8000 as llama3-8b-awq-w4a16 (tier int4" in out.stdout
    [body] = received
    assert body["tier"] == "int4" and body["format"] == "int4" and body["method"] == "awq"
    assert (body["model"], body["deployment"], body["hardware"], body["vram_gb"]) == (
        "llama3-8b", "llama3-8b-awq-w4a16", "a100-80g", 80.0)
    assert body["checksum"].startswith("sha256:") and len(body["checksum"]) == 7 + 64


def test_register_token_from_environment_and_default_deployment(admin_server, awq_dir):
    url, received = admin_server
    env = os.environ | {"QUANTROUTE_ADMIN_TOKEN": TOKEN}
    out = quantroute("node", "register", "--router", url, "--node", "http://n1:8000", "--model-dir", str(awq_dir),
                     env=env)
    assert out.returncode == 0, out.stderr
    # The directory name may name the deployment; it never decides the format.
    assert (received[0]["deployment"], received[0]["model"], received[0]["tier"]) == ("model-fp16", "model-fp16",
                                                                                      "int4")


def test_register_rejected_token_shows_the_router_error(admin_server, awq_dir):
    url, received = admin_server
    out = quantroute("node", "register", "--router", url, "--node", "http://n1:8000", "--model-dir", str(awq_dir),
                     "--token", "wrong")
    assert out.returncode == 1 and received == []
    assert "answered 401: admin endpoints need a bearer token" in out.stderr


def test_register_dry_run_sends_nothing(admin_server, awq_dir):
    url, received = admin_server
    out = quantroute("node", "register", "--router", url, "--node", "http://n1:8000", "--model-dir", str(awq_dir),
                     "--deployment", "d1", "--dry-run")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert NodeIdentity.model_validate(body).tier.value == "int4"
    assert received == []


def test_register_unreachable_router_and_missing_token(awq_dir):
    from quantroute.ports import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    out = quantroute("node", "register", "--router", dead, "--node", "http://n1:8000", "--model-dir", str(awq_dir),
                     "--token", TOKEN)
    assert out.returncode == 1 and "--router: cannot reach" in out.stderr
    env = {k: v for k, v in os.environ.items() if "ADMIN_TOKEN" not in k}
    out = quantroute("node", "register", "--router", dead, "--node", "http://n1:8000", "--model-dir", str(awq_dir),
                     env=env)
    assert out.returncode == 1 and "--token: missing" in out.stderr
