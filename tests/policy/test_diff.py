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
    assert any(l.startswith("- rules.casual-chat:") for l in lines)
    assert any(l.startswith("+ rules.batch-jobs:") for l in lines)
    assert "- thresholds.score>=3.0: fp8" in lines and "+ thresholds.score>=4.0: fp8" in lines
    assert "~ canaries.llama3-8b.percent: 0.0 -> 5.0" in lines
    assert "~ sessions.max_wait_ms: 2000 -> 500" in lines
    assert diff_policies(a, a) == []
