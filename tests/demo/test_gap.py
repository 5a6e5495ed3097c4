"""What `make demo-real` shows of the quantization gap: the demo's shadow section, paired evals stored with their
verdicts, shadowed traffic by rule, and the agreement lines, on a simulated fleet behind a real router."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from quantroute.db.engine import init_db, make_engine
from quantroute.demo import gap
from quantroute.evals.runs import list_runs
from quantroute.evals.suite import load_suite
from quantroute.fleet import parse_fleet
from quantroute.launcher.policy import fleet_policy
from quantroute.policy.loader import validate_data
from quantroute.router.app import create_app
from quantroute.router.settings import RouterSettings
from quantroute.router.testing import running_router
from quantroute.sim.runner import running_fleet
from tests.conftest import wait_until
from tests.shadow.seed import seed_pairs

REPO = Path(__file__).resolve().parents[2]
MODEL = "tiny-skills"
BF16, INT8, INT4 = "tiny-skills-bf16", "tiny-skills-rtn-w8a8", "tiny-skills-rtn-w4a8"
FLEET = f"""
model_shape: llama3-8b
nodes:
  - {{id: bf16-a, port: 0, hardware: a100-80g, max_num_seqs: 32, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {BF16}, tier: fp16, format: bf16}}}}
  - {{id: int8-a, port: 0, hardware: a100-80g, max_num_seqs: 32, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {INT8}, tier: int8, format: int8, method: rtn}}}}
  - {{id: int4-a, port: 0, hardware: a100-80g, max_num_seqs: 32, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {INT4}, tier: int4, format: int4, method: rtn}}}}
"""
META = {"calibration_set": "none", "eval_suite": "tiny-skills", "checksum": "sha256:" + "0" * 64}


def demo_policy() -> dict:
    base = yaml.safe_load((REPO / "policies/policy-0001.yaml").read_text())
    data = fleet_policy(base, model=MODEL, tiers={"fp16": [BF16], "int8": [INT8], "int4": [INT4]},
                        deployments={BF16: {"format": "bf16", "method": "none", **META},
                                     INT8: {"format": "int8", "method": "rtn", **META},
                                     INT4: {"format": "int4", "method": "rtn", **META}})
    data["shadow"] = gap.shadow_config([t["name"] for t in data["tiers"]])
    validate_data(data, source="test")
    return data


def test_shadow_config_pairs_every_tier_with_the_other_end_and_validates():
    cfg = gap.shadow_config(["fp16", "int8", "int4"])
    assert cfg is not None and cfg["rate"] == 1.0
    assert cfg["pairs"] == [{"served": ["fp16"], "shadow": "int4"}, {"served": ["int8"], "shadow": "fp16"},
                            {"served": ["int4"], "shadow": "fp16"}]
    assert gap.shadow_config(["fp16", "int8"]) is None and gap.shadow_config(["int8", "int4"]) is None
    demo_policy()  # a policy with it validates


def test_agreement_lines_give_rates_by_rule_and_disagreements_side_by_side(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'q.db'}")
    init_db(engine)
    seed_pairs(engine, rule="greedy-structured", served="fp16", shadow="int4", n=20, agree=14)
    seed_pairs(engine, rule="low-priority", served="int4", shadow="fp16", n=10, agree=10)
    rows = gap.wait_for_pairs(engine, 0, 30, timeout_s=0)
    lines = gap.agreement_lines(rows, examples=2)
    assert any("greedy-structured" in x and "14/20" in x and "70.0%" in x for x in lines), lines
    assert any("low-priority" in x and "10/10" in x for x in lines), lines
    shown = lines[lines.index("  disagreements (prompt | served | shadow):") + 1:]
    assert len(shown) == 2 and "'item 14'" in shown[0] and "is 12." in shown[0] and "is 13." in shown[0]
    # fewer pairs than asked for: what is there once the deadline passes
    assert len(gap.wait_for_pairs(engine, gap.last_pair_id(engine) - 5, 10, timeout_s=0)) == 5
    engine.dispose()


@pytest.fixture
def stack(tmp_path):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "policy-0001.yaml").write_text(yaml.safe_dump(demo_policy(), sort_keys=False))
    engine = make_engine(f"sqlite:///{tmp_path / 'q.db'}")
    init_db(engine)
    with running_fleet(parse_fleet(FLEET, source="tests/demo"), time_scale=0.002) as sim:
        fleet_file = tmp_path / "fleet.yaml"
        fleet_file.write_text(yaml.safe_dump(sim.fleet.model_dump(mode="json")))
        settings = RouterSettings(policies_dir=policies, fleet_file=fleet_file, admin_token="t",
                                  db_url=str(engine.url), probe_interval_s=0.2, log_flush_interval_s=0.05)
        with running_router(settings, app=create_app(settings, engine=engine)) as url:
            yield url, engine
    engine.dispose()


def test_gap_evals_and_shadowed_traffic_on_a_routed_fleet(stack, tmp_path):
    url, engine = stack
    items = [json.loads(x) for x in (REPO / "data/evals/tiny-skills.jsonl").read_text().splitlines()]
    suite = tmp_path / "tiny.jsonl"  # a few items of each category, the suite's own shape
    picked = [it for c in ("math", "json", "structured", "chat") for it in [i for i in items if i["category"] == c][:3]]
    suite.write_text("".join(json.dumps(it) + "\n" for it in picked))
    views = gap.gap_evals(url, BF16, [INT8, INT4], suite, engine, tmp_path / "runs")
    assert [v.run["candidate"]["deployment"] for v in views] == [INT8, INT4]
    assert [r.candidate_deployment for r in list_runs(engine, limit=2)] == [INT4, INT8]  # stored, newest first
    lines = gap.eval_lines(views[1])
    assert lines[0].startswith(f"{BF16} vs {INT4} (eval run ") and "gate " in lines[0]
    assert sorted(x.split()[0] for x in lines[1:]) == ["chat", "json", "math", "overall", "structured"]

    json_items = [i for i in load_suite(suite).items if i.category == "json"][:2]
    assert gap.send_traffic(url, MODEL, json_items, {}) == 2
    wait_until(lambda: len(gap.wait_for_pairs(engine, 0, 2, timeout_s=0)) >= 2, what="two shadow pairs", timeout=30)
    after = gap.last_pair_id(engine)
    rows = gap.shadowed_traffic(url, MODEL, suite, engine, per_category=3, timeout_s=30)
    assert len(rows) == 6 and all(r["id"] > after for r in rows)
    by = {(r["rules"][0] if r["rules"] else "-", r["served_tier"], r["shadow_tier"]) for r in rows}
    assert ("greedy-structured", "fp16", "int4") in by and ("low-priority", "int4", "fp16") in by, by
    text = "\n".join(gap.agreement_lines(rows))
    assert "greedy-structured" in text and "low-priority" in text
