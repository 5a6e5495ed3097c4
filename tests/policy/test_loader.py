import pytest
import yaml

from quantroute.policy.loader import PolicyValidationError, dump_policy, load_policy, parse_policy
from quantroute.tiers import Tier
from tests.conftest import REPO

DEFAULT = REPO / "policies" / "policy-0001.yaml"


def base() -> dict:
    return yaml.safe_load(DEFAULT.read_text())


def issues_of(data) -> dict[str, str]:
    with pytest.raises(PolicyValidationError) as ei:
        parse_policy(yaml.safe_dump(data), "draft.yaml")
    return {i.path: i.message for i in ei.value.issues}


def test_shipped_default_is_valid():
    p = load_policy(DEFAULT)
    assert p.version == 1
    assert p.tier_ladder() == [Tier.fp16, Tier.fp8, Tier.int8, Tier.int4]
    assert p.deployment_tier("llama3-8b-awq-w4a16") == Tier.int4
    assert p.canary_for("llama3-8b").candidate == "llama3-8b-awq-w4a16-v2"
    assert p.fleet_warning.top_tier_share == 0.7


def test_all_structural_errors_reported_at_once_with_paths():
    d = base()
    d["rules"][3]["when"] = {"output_tokens": {"min": 10, "max": 5}}
    d["rules"][0]["when"]["all"][0]["temperature"]["maxx"] = 1
    d["rules"][1]["weight"] = "heavy"
    d["sessions"]["ttl_s"] = -1
    d["surprise"] = True
    d["thresholds"][0]["tier"] = "fp4"
    found = issues_of(d)
    assert "rules[3].when.output_tokens" in found
    assert "min (10.0) must be <= max (5.0)" in found["rules[3].when.output_tokens"]
    assert found["rules[0].when.all[0].temperature.maxx"] == "unknown key"
    assert "rules[1].weight" in found
    assert "sessions.ttl_s" in found
    assert found["surprise"] == "unknown key"
    assert "fp16" in found["thresholds[0].tier"] and "int4" in found["thresholds[0].tier"]


def test_condition_with_unknown_kind_names_the_valid_kinds():
    d = base()
    d["rules"][0]["when"] = {"temprature": {"max": 0}}
    msg = issues_of(d)["rules[0].when"]
    assert "exactly one of" in msg and "temperature" in msg and "keywords" in msg


def test_semantic_errors_all_at_once():
    d = base()
    d["rules"][1]["name"] = d["rules"][0]["name"]
    d["tiers"].append({"name": "fp8", "deployments": {}})
    d["thresholds"] = [{"min_score": 6, "tier": "int4"}, {"min_score": 0, "tier": "fp16"}]
    d["canaries"][0]["percent"] = 7
    d["canaries"][0]["candidate"] = "llama3-8b-nowhere"
    d["deployments"]["orphan-dep"] = {"model": "llama3-8b"}
    found = issues_of(d)
    assert "duplicate rule name" in found["rules[1].name"]
    assert "duplicate tier" in found["tiers[4].name"]
    assert "not monotone" in found["thresholds[0]"]
    assert "not 0 or one of the steps" in found["canaries[0].percent"]
    assert "not listed by any tier" in found["canaries[0].candidate"]
    assert "no tier lists" in found["deployments.orphan-dep"]
    assert "fidelity order" in found["tiers"]


def test_bad_regex_and_out_of_range_canary():
    d = base()
    d["rules"][0]["when"]["all"][1]["keywords"]["regex"].append("([unclosed")
    d["canaries"][0]["steps"] = [1, 5, 150]
    found = issues_of(d)
    path = "rules[0].when.all[1].keywords.regex"
    assert "does not compile" in found[path]
    assert "(0, 100]" in found["canaries[0].steps"]


def test_invalid_yaml_names_line():
    with pytest.raises(PolicyValidationError) as ei:
        parse_policy("version: 1\nrules: [\n  - a\n", "x.yaml")
    assert ei.value.issues[0].path.startswith("line ")


def test_dump_round_trip_carries_a_hash_that_detects_edits():
    p = load_policy(DEFAULT)
    text = dump_policy(p)
    again = parse_policy(text)
    assert again.rules == p.rules
    tampered = text.replace("weight: 6.0", "weight: 7.0", 1)
    with pytest.raises(PolicyValidationError) as ei:
        parse_policy(tampered)
    assert ei.value.issues[-1].path == "content_hash"


def test_cross_field_checks_still_run_when_some_items_are_broken_with_true_indices():
    d = base()
    d["rules"][0]["when"]["all"][0]["temperature"]["max"] = "low"  # rules[0] fails field validation
    d["rules"][2]["name"] = d["rules"][1]["name"]
    found = issues_of(d)
    assert "rules[0].when.all[0].temperature.max" in found
    assert found["rules[2].name"] == f"duplicate rule name {d['rules'][1]['name']!r} (also rules[1])"


def test_issues_carry_the_yaml_line_of_what_they_name(tmp_path):
    """Field errors, unknown keys, cross-field errors and missing keys each point at a line of the file."""
    text = "surprise: true\n" + DEFAULT.read_text()
    rules_at = text.splitlines().index("rules:") + 1
    # a duplicate rule name (cross-field) and a typo'd key in a third rule
    bad = text.replace("rules:\n", "rules:\n  - name: dup\n    weight: 1\n    when: {stream: true}\n"
                                   "  - name: dup\n    weight: 1\n    when: {stream: true}\n"
                                   "  - name: typo\n    weight: 1\n    when: {temperature: {maxx: 1}}\n", 1)
    path = tmp_path / "policy-0002.yaml"
    path.write_text(bad)
    with pytest.raises(PolicyValidationError) as ei:
        load_policy(path)
    by_path = {i.path: i for i in ei.value.issues}
    assert by_path["surprise"].line == 1
    assert by_path["rules[2].when.temperature.maxx"].line == rules_at + 9
    assert by_path["rules[1].name"].line == rules_at + 4
    assert str(by_path["rules[1].name"]).startswith(f"line {rules_at + 4}: rules[1].name: duplicate rule name")
    assert f"line {rules_at + 9}: rules[2].when.temperature.maxx: unknown key" in str(ei.value)


def test_a_missing_key_points_at_its_parent():
    with pytest.raises(PolicyValidationError) as ei:
        parse_policy("version: 1\nauthor: a\ncreated_at: '2026-01-01T00:00:00Z'\nmessage: m\ntiers:\n"
                     "  - deployments: {m: [m-1]}\n", "x.yaml")
    missing = {i.path: i for i in ei.value.issues}["tiers[0].name"]
    assert missing.message == "required key is missing" and missing.line == 6


@pytest.mark.parametrize("kind,bounds,valid", [
    ("temperature", {"max": -1}, "valid 0 to 2"), ("temperature", {"min": 2.5}, "valid 0 to 2"),
    ("priority", {"min": 0}, "valid 1 to 10"), ("priority", {"max": 11}, "valid 1 to 10"),
    ("output_tokens", {"min": -5}, "valid 0 to inf"), ("latency_budget_ms", {"max": -1}, "valid 0 to inf"),
    ("entropy", {"min": 8}, "valid 0 to 7.9"), ("prompt_chars", {"max": -1}, "valid 0 to inf")])
def test_a_bound_the_signal_cannot_take_is_refused(kind, bounds, valid):
    """A rule whose range lies outside what its signal can be would silently never (or always) fire."""
    d = base()
    d["rules"][0]["when"] = {kind: bounds}
    msg = issues_of(d)[f"rules[0].when.{kind}"]
    assert f"{next(iter(bounds))} {next(iter(bounds.values())):g} is outside" in msg and valid in msg


def test_issues_from_a_file_come_in_file_order():
    text = DEFAULT.read_text().replace("sessions:\n", "sessions:\n  max_wait: 500\n", 1) + "surprise: 1\n"
    text = text.replace("max: 0.2", 'max: "low"', 1)
    with pytest.raises(PolicyValidationError) as ei:
        parse_policy(text, "x.yaml")
    lines = [i.line for i in ei.value.issues]
    assert lines == sorted(lines) and len(lines) == 3
