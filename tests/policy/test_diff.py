import yaml

from quantroute.policy.diff import diff_policies
from quantroute.policy.loader import parse_policy
from tests.conftest import REPO


def test_semantic_diff_lists_rule_threshold_and_canary_changes():
    data = yaml.safe_load((REPO / "policies" / "policy-0001.yaml").read_text())
    a = parse_policy(yaml.safe_dump(data))
    next(r for r in data["rules"] if r["name"] == "long-output")["weight"] = 8
    data["rules"] = [r for r in data["rules"] if r["name"] != "casual-chat"]
    data["rules"].append({"name": "batch-jobs", "weight": -2, "when": {"priority": {"max": 2}}})
    data["thresholds"][1]["min_score"] = 4
    data["canaries"][0]["percent"] = 5
    data["sessions"]["max_wait_ms"] = 500
    b = parse_policy(yaml.safe_dump(data))
    lines = [str(c) for c in diff_policies(a, b)]
    assert "~ rules.long-output.weight: 6.0 -> 8.0" in lines
    assert any(line.startswith("- rules.casual-chat:") for line in lines)
    assert any(line.startswith("+ rules.batch-jobs:") for line in lines)
    assert "~ thresholds.fp8: score>=3.0 -> score>=4.0" in lines  # one change, not a removal plus an addition
    assert not any(line.startswith(("- thresholds", "+ thresholds")) for line in lines)
    assert "~ canaries.llama3-8b.percent: 0.0 -> 5.0" in lines
    assert "~ sessions.max_wait_ms: 2000 -> 500" in lines
    assert diff_policies(a, a) == []


def test_threshold_diffs_pair_by_tier_then_by_score():
    data = yaml.safe_load((REPO / "policies" / "policy-0001.yaml").read_text())
    a = parse_policy(yaml.safe_dump(data))
    scores = [t["min_score"] for t in data["thresholds"]]
    data["thresholds"][0]["tier"] = "fp8" if data["thresholds"][0]["tier"] != "fp8" else "fp16"
    b = parse_policy(yaml.safe_dump(data))
    th = [c for c in diff_policies(a, b) if c.section == "thresholds"]
    assert [(c.kind, c.path) for c in th] == [("changed", f"thresholds.score>={float(scores[0])}")]
