"""An fp8 tier on real vLLM (CPU build): `quantroute quantize --scheme FP8_DYNAMIC` of the trained tiny-skills
model -> the registrar reads tier fp8 from the artifact's compressed-tensors config -> one real vLLM server
serves it behind the router -> a policy whose only tier is fp8 routes there and the answer is right.

Its own module (one server, ~3.3 GB) so it never runs beside test_real_tiers' fleet of four. Needs what that
module needs (CI's .ci/run sets it up).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import openai
import pytest
import yaml

from quantroute.admin_client import RouterAdmin
from quantroute.db.engine import init_db, make_engine
from quantroute.launcher.policy import fleet_policy
from quantroute.launcher.register import register_artifact
from quantroute.launcher.spec import RealFleet, RealNode
from quantroute.launcher.vllm import running_fleet, vllm_python
from quantroute.registrar import inspect_model_dir
from quantroute.router.settings import RouterSettings
from quantroute.router.testing import running_router
from tests.conftest import wait_until

pytestmark = [pytest.mark.vllm, pytest.mark.llmcompressor, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"
MODEL, BF16, FP8 = "tiny-skills", "tiny-skills-bf16", "tiny-skills-rtn-fp8-dynamic"
TOKEN = "fp8-tier-token"


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> dict:
    if not os.environ.get("QUANTROUTE_LLMCOMPRESSOR_PYTHON"):
        pytest.skip("QUANTROUTE_LLMCOMPRESSOR_PYTHON not set: run `bash scripts/setup_real_tiers.sh`")
    if not (CACHE / BF16 / ".built").is_file():
        pytest.skip(f".cache/{BF16} is not built: run scripts/setup_vllm.sh")
    out = tmp_path_factory.mktemp("quantize") / FP8
    done = subprocess.run([sys.executable, "-m", "quantroute.cli.main", "quantize", str(CACHE / BF16),
                           "--scheme", "FP8_DYNAMIC", "--out", str(out), "--eval-suite", "tiny-skills", "--json"],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stderr)
    return {"dir": out, "record": json.loads(done.stdout)}


def test_fp8_artifact_reads_back_as_tier_fp8(artifact):
    rec = artifact["record"]
    assert rec["deployment"] == FP8 and rec["source_deployment"] == BF16
    assert (rec["tier"], rec["format"], rec["scheme"], rec["bits"], rec["group_size"]) == (
        "fp8", "fp8", "FP8_DYNAMIC", 8, None)
    read = inspect_model_dir(artifact["dir"])
    assert (read.tier.value, read.format, read.checksum) == ("fp8", "fp8", rec["checksum"])
    assert rec["policy_deployment"]["format"] == "fp8"


@pytest.fixture(scope="module")
def stack(artifact, tmp_path_factory):
    deployments = {FP8: {k: v for k, v in artifact["record"]["policy_deployment"].items() if k != "model"}}
    base = yaml.safe_load((REPO / "policies/policy-0001.yaml").read_text())
    base["thresholds"] = [{"min_score": 0, "tier": "fp8"}]  # the only tier here: every request may use it
    policy = fleet_policy(base, model=MODEL, tiers={"fp8": [FP8]}, deployments=deployments, message="fp8 on CPU")
    tmp = tmp_path_factory.mktemp("router-fp8")
    (tmp / "policies").mkdir()
    (tmp / "policies/policy-0001.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
    spec = RealFleet(model=MODEL, hardware="cpu", base_dir=str(CACHE),
                     nodes=[RealNode(id="fp8-a", deployment=FP8, model_dir=str(artifact["dir"]))])
    db_url = f"sqlite:///{tmp / 'router.db'}"
    engine = make_engine(db_url)
    init_db(engine)
    engine.dispose()
    settings = RouterSettings(policies_dir=tmp / "policies", db_url=db_url, admin_token=TOKEN, probe_interval_s=1.0,
                              probe_timeout_s=20.0, eject_after_failures=10, upstream_timeout_s=180)
    with running_fleet(spec, python=vllm_python(), log_dir=tmp / "logs") as nodes, running_router(settings) as url:
        reg = register_artifact(model_dir=artifact["dir"], node_url=nodes[0].url, deployment=FP8, model=MODEL,
                                hardware="cpu", router_url=url, token=TOKEN)
        with RouterAdmin([url], TOKEN) as admin:
            wait_until(lambda: all(n["healthy"] for n in admin.nodes()),
                       what=lambda: f"the fp8 node healthy (nodes: {admin.nodes()})", timeout=120, interval=0.5)
            yield {"url": url, "reg": reg, "nodes": admin.nodes()}


def test_router_registers_and_routes_to_the_fp8_tier(stack):
    assert stack["reg"].tier.value == "fp8"
    assert [(n["deployment"], n["tier"], n["format"]) for n in stack["nodes"]] == [(FP8, "fp8", "fp8")]
    with openai.OpenAI(base_url=f"{stack['url']}/v1", api_key="unused", max_retries=0, timeout=180) as client:
        for prompt, check in (("What is the capital of Peru?", lambda s: s.strip() == "Lima."),
                              ("Write JSON with name Grace and age 41.",
                               lambda s: json.loads(s) == {"name": "Grace", "age": 41})):
            raw = client.chat.completions.with_raw_response.create(
                model=MODEL, max_tokens=24, temperature=0, messages=[{"role": "user", "content": prompt}],
                extra_headers={"x-session-id": uuid.uuid4().hex})
            resp = raw.parse()
            text = resp.choices[0].message.content
            print(f"{prompt!r} -> {raw.headers['x-quantroute-tier']} {resp.model} {text!r}")
            assert (raw.headers["x-quantroute-tier"], raw.headers["x-quantroute-deployment"], resp.model) == (
                "fp8", FP8, FP8)
            # Confidently taught answers survive fp8 weights and activations (math and lists, taught at 3:2 odds
            # to show the int4 gap, are not asked here: fp8's rounding is not what this test is about).
            assert check(text), text
