"""Fleet files: the shipped ones load with the intended composition; bad ones fail naming field and valid values."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from quantroute.fleet import FleetError, load_fleet, parse_fleet
from quantroute.tiers import Tier

REPO = Path(__file__).resolve().parent.parent

NODE = """
  - id: {id}
    port: {port}
    deployment: {{model: llama3-8b, id: {dep}, tier: {tier}, format: {fmt}}}
    hardware: {hw}
"""


def fleet_text(*nodes: dict) -> str:
    defaults = {"port": 0, "dep": "llama3-8b-fp16", "tier": "fp16", "fmt": "bf16", "hw": "a100-80g"}
    return "model_shape: llama3-8b\nnodes:" + "".join(NODE.format(**{**defaults, **n}) for n in nodes)


def test_demo_fleet_composition():
    fleet = load_fleet(REPO / "data" / "fleet.yaml")
    tiers = Counter(n.deployment.tier for n in fleet.nodes)
    assert tiers == {Tier.fp16: 2, Tier.fp8: 1, Tier.int8: 1, Tier.int4: 3}
    assert {n.deployment.model for n in fleet.nodes} == {"llama3-8b"}
    assert "llama3-8b-awq-w4a16-v2" in {n.deployment.id for n in fleet.nodes}  # the canary candidate
    assert [n.port for n in fleet.nodes] == list(range(18101, 18108))
    assert fleet.node("int4-a").url == "http://127.0.0.1:18105"
    assert fleet.node("fp16-a").vram_gb == 80  # defaulted from data/hardware.yaml


def test_seed000_fleet_is_4_fp16_and_4_int4_a100_nodes_of_a_13b_model():
    fleet = load_fleet(REPO / "data" / "fleet-seed000.yaml")
    assert Counter(n.deployment.tier for n in fleet.nodes) == {Tier.fp16: 4, Tier.int4: 4}
    assert {n.hardware for n in fleet.nodes} == {"a100-80g"} and fleet.model_shape == "llama-13b"


def test_errors_name_the_field_path_and_what_is_valid():
    with pytest.raises(FleetError) as e:
        parse_fleet(fleet_text({"id": "a", "tier": "int5"}, {"id": "b", "hw": "v100"}))
    paths = [p for p, _ in e.value.issues]
    assert paths == ["nodes[0].deployment.tier"]
    assert "'fp16', 'fp8', 'int8' or 'int4'" in e.value.issues[0][1]
    with pytest.raises(FleetError) as e:
        parse_fleet(fleet_text({"id": "a"}, {"id": "a", "hw": "v100"}))
    assert ("nodes[1].hardware" in str(e.value) and "a100-80g" in str(e.value)
            and "nodes[1].id" in str(e.value))


def test_a_format_must_belong_to_its_tier_and_a_deployment_id_to_one_tier():
    with pytest.raises(FleetError, match=r"nodes\[0\].deployment: .*format 'int4' belongs to tier int4, not fp16"):
        parse_fleet(fleet_text({"id": "a", "fmt": "int4"}))
    with pytest.raises(FleetError, match=r"nodes\[1\].deployment.id: deployment 'llama3-8b-fp16' is tier fp16"):
        parse_fleet(fleet_text({"id": "a"}, {"id": "b", "tier": "int4", "fmt": "int4"}))
