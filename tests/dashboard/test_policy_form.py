"""The Policy form places each validation issue on the row it is about, also after rows were removed (the
validated list is then shorter than the rows on screen, so positions differ)."""

from __future__ import annotations

from types import SimpleNamespace

from dashboard import policy_form
from tests.dashboard.conftest import page


def tab(at, label: str):
    return next(t for t in at.tabs if t.label == label)


def threshold_errors(at) -> dict[int, list[str]]:
    """Errors in the Thresholds tab by the row (its `min score #n` label) they are shown under."""
    out: dict[int, list[str]] = {}
    row = 0
    for child in tab(at, "Thresholds").children.values():
        labels = [n.label for n in getattr(child, "number_input", [])]
        if labels:
            row = int(labels[0].rsplit("#", 1)[1])
        for e in getattr(child, "error", []):
            out.setdefault(row, []).append(e.value)
    return out


def rule_expander(at, name: str):
    return next(e for e in at.expander if e.label.split("  (")[0].removeprefix("⚠️ ") == name)


def test_rule_issue_lands_on_its_rule_after_an_earlier_rule_is_removed(stack):
    at = page("policy", "olivia", "operator")
    names = [e.label.split("  (")[0] for e in at.expander if any(c.label == "remove rule" for c in e.checkbox)]
    first, second, third = names[:3]
    next(c for c in rule_expander(at, first).checkbox if c.label == "remove rule").check()
    next(t for t in rule_expander(at, third).text_area if t.label == "condition (YAML)").input("bogus: 1")
    at.run()
    assert not at.exception
    # the third rule is the second one validated: the issue says rules[1], and sits under the third rule
    mine = [e.value for e in rule_expander(at, third).error]
    assert any(v.startswith("`rules[1].when`") and "exactly one of" in v for v in mine), mine
    assert not rule_expander(at, second).error
    assert not rule_expander(at, first).error
    at.run()  # the next run opens the rule that had the issue, and marks it
    assert rule_expander(at, third).label.startswith("⚠️ ")
    assert not rule_expander(at, second).label.startswith("⚠️ ")


def test_threshold_issue_lands_on_its_row_after_a_row_is_removed(stack):
    at = page("policy", "olivia", "operator")
    assert [n.label for n in at.number_input if n.label.startswith("min score")] == [
        "min score #1", "min score #2", "min score #3"]
    next(c for c in tab(at, "Thresholds").checkbox if c.label == "remove").check()  # row 1 (score 6, fp16)
    next(s for s in at.selectbox if s.label == "tier #3").set_value("fp16")  # score 0 now needs fp16
    at.run()
    # kept: row 2 (3 -> fp8), row 3 (0 -> fp16): not monotone, reported at thresholds[0], which is row 2
    errors = threshold_errors(at)
    assert list(errors) == [2], errors
    assert errors[2][0].startswith("`thresholds[0]`") and "monotone" in errors[2][0]


def test_add_threshold_keeps_the_edits_made_so_far(stack):
    at = page("policy", "olivia", "operator")
    next(c for c in tab(at, "Thresholds").checkbox if c.label == "remove").check()
    next(n for n in at.number_input if n.label == "min score #2").set_value(2.5)
    next(b for b in at.button if b.label == "Add threshold").click().run()
    scores = [n.value for n in at.number_input if n.label.startswith("min score")]
    assert scores == [2.5, 0.0, 100.0]


def test_placements_map_positions_of_kept_rows_to_row_ids():
    slots = {"rules[#10]": 0, "rules[#11]": 0, "rules[#12]": 0, "thresholds[#3]": 0, "thresholds": 0,
             "sessions": 0}
    kept = {"rules": [10, 12], "thresholds": [3]}  # rule #11 removed

    def issue(path):
        return SimpleNamespace(path=path, message="m")

    placed, left = policy_form.placements(slots, [issue("rules[1].when"), issue("rules[0]"), issue("thresholds[0]"),
                                                  issue("thresholds"), issue("sessions.ttl_s"), issue("canaries[0]"),
                                                  issue("rules[5]")], kept)
    assert [(owner, i.path) for owner, i in placed] == [
        ("rules[#12]", "rules[1].when"), ("rules[#10]", "rules[0]"), ("thresholds[#3]", "thresholds[0]"),
        ("thresholds", "thresholds"), ("sessions", "sessions.ttl_s")]
    assert [i.path for i in left] == ["canaries[0]", "rules[5]"]
