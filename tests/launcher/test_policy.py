"""fleet_policy: the shipped rules over a real fleet's tiers; thresholds never send work below the tier asked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from quantroute.launcher.policy import fleet_policy

REPO = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((REPO / "policies/policy-0001.yaml").read_text())
META = {"format": "bf16", "method": "none", "calibration_set": "none", "eval_suite": "tiny-skills",
        "checksum": "sha256:a"}


def test_tiers_deployments_and_thresholds_follow_the_fleet():
    data = fleet_policy(BASE, model="m", tiers={"fp16": ["m-bf16"], "int8": ["m-w8a8"], "int4": ["m-w4a16"]},
                        deployments={d: META for d in ("m-bf16", "m-w8a8", "m-w4a16")})
    assert [(t["name"], t["deployments"]) for t in data["tiers"]] == [
        ("fp16", {"m": ["m-bf16"]}), ("int8", {"m": ["m-w8a8"]}), ("int4", {"m": ["m-w4a16"]})]
    assert data["deployments"]["m-w8a8"]["model"] == "m" and data["canaries"] == []
    # "at least fp8" with no fp8 node is met by fp16, never by int8.
    assert data["thresholds"] == [{"min_score": 3, "tier": "fp16"}, {"min_score": 0, "tier": "int8"}]
    assert [r["name"] for r in data["rules"]] == [r["name"] for r in BASE["rules"]]


def test_without_int8_score_zero_stays_on_fp16():
    data = fleet_policy(BASE, model="m", tiers={"fp16": ["a"], "int4": ["b", "c"]},
                        deployments={d: META for d in "abc"},
                        canary={"model": "m", "baseline": "b", "candidate": "c", "steps": [10, 100], "percent": 0})
    assert data["thresholds"] == [{"min_score": 0, "tier": "fp16"}]
    assert data["canaries"][0]["candidate"] == "c"


def test_a_fleet_below_every_threshold_is_refused():
    with pytest.raises(ValueError, match="meet none of the policy's thresholds"):
        fleet_policy(BASE, model="m", tiers={"int4": ["b"]}, deployments={"b": META})


def test_spill_stays_as_the_base_says_unless_turned_off():
    tiers, deployments = {"fp16": ["a"], "int4": ["b"]}, {d: META for d in "ab"}
    assert "spill" not in fleet_policy(BASE, model="m", tiers=tiers, deployments=deployments)
    data = fleet_policy(BASE, model="m", tiers=tiers, deployments=deployments, spill=False)
    assert data["spill"] == {"enabled": False}
