"""Issue #17, what operators, reviewers and analysts stumbled on: each case drives a page through AppTest and
checks what a person reads (one-sentence outcomes, human values, tier order, the Policy tab and version
selectors, read-only editing, refused attempts in the audit, the pinned marker, CSV downloads, spinners)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from dashboard import actions, queries
from quantroute.db.engine import session
from quantroute.db.node import NodeRow, upsert_node
from quantroute.policy.loader import policy_to_data, validate_data
from quantroute.policy.store import PolicyStore
from quantroute.rollout import checklist as cl
from quantroute.rollout.service import RolloutService
from tests.dashboard.conftest import buttons, page
from tests.rollout.conftest import record_eval, record_staircase

MODEL, BASE, CAND = "llama3-8b", "llama3-8b-awq-w4a16", "llama3-8b-awq-w4a16-v2"
PERSON_ITEMS = [i.key for i in cl.ITEMS if not i.system and i.required]
# What a Python object looks like when it leaks onto a page (the list).
REPRS = re.compile(r"datetime\.datetime\(|ItemView\(|RolloutStatus\(|None → None|\.\.\.$|\w+\(\w+=")


def texts(at) -> list[str]:
    """Every string a person can read on the page: messages, markdown, metrics and table cells."""
    out: list[str] = []
    for kind in ("success", "error", "info", "warning", "markdown", "caption", "title", "header", "subheader"):
        out += [str(e.value) for e in getattr(at, kind)]
    out += [f"{m.label}: {m.value} {m.delta or ''}" for m in at.metric]
    for df in at.dataframe:
        out += [str(v) for v in df.value.astype(str).to_numpy().ravel()]
    return out


def no_reprs(at) -> None:
    leaks = [t for t in texts(at) if REPRS.search(t.strip())]
    assert not leaks, leaks


def gate_open(engine) -> None:
    """What the rollout's checklist needs from the system: nodes, a passing eval run on the pinned suite, a
    staircase run of the candidate."""
    with session(engine) as s:
        for key, dep in (("int4-a", BASE), ("int4-canary", CAND)):
            upsert_node(session=s, row=NodeRow(key=key, url=f"http://127.0.0.1:1/{key}", model=MODEL,
                                               deployment=dep, tier="int4", format="int4"))
    record_eval(engine, passed=True, candidate=CAND, suite="golden")
    record_staircase(engine, deployment=CAND)


def click(at, label: str):
    return next(b for b in at.button if b.label == label).click().run()


# ---- 1. rollout outcomes: one sentence with the figures, never the status object ----------------------------

def test_rollout_actions_say_one_sentence_with_the_figures(stack):
    engine, policies = stack
    gate_open(engine)
    op = page("rollouts", "olivia", "operator")
    click(op, f"Start rollout of {CAND}")
    assert not op.exception
    msg = op.success[0].value
    assert msg.startswith(f"Rollout of {CAND} started by olivia; its eval gate passed"), msg
    no_reprs(op)
    assert [m.value for m in op.metric][:3] == ["awaiting-approval", "0 %", "not started (0 of 6)"]

    rev = page("rollouts", "rahul", "reviewer")
    tick = rev.multiselect(key=f"tick_{MODEL}")
    assert BY_TEXT["kernel_support"] in tick.options  # 4. the same sentences as the table beside it
    assert "kernel_support" not in tick.options
    tick.set_value(PERSON_ITEMS + ["baseline_healthy"]).run()
    click(rev, "Tick")
    assert re.fullmatch(r"rahul ticked 7 checklist item\(s\); \d+ of 17 are done\.", rev.success[0].value)
    click(rev, "Approve rollout")
    msg = rev.success[0].value
    assert msg == (f"Rollout approved by rahul: {CAND} now gets 1 % of new {MODEL} sessions at its tier "
                   f"(step 1 of 6, policy version 2)."), msg
    no_reprs(rev)
    assert len(msg) < 200

    click(rev, "Rollback")
    click(rev, "Confirm rollback")
    msg = rev.success[0].value
    assert msg.startswith(f"Rollout of {CAND} rolled back by rahul: all {MODEL} traffic at its tier returns to {BASE}")
    no_reprs(rev)
    metrics = {m.label: m.value for m in rev.metric}
    assert metrics["step"] == "rolled back" and metrics["candidate share"] == "0 %"  # 6. not "step 1 / 6"
    actions_table = rev.dataframe[-1].value
    assert not actions_table["at"].str.contains(r"T\d\d:|\.\d{6}").any()  # 6. no ISO microseconds
    assert not actions_table["policy version"].str.contains("None").any()


BY_TEXT = {i.key: i.text for i in cl.ITEMS}


def test_a_refused_rollout_action_says_why_in_one_sentence_and_is_audited(stack):
    engine, _ = stack  # no eval run: the gate stays closed
    svc = RolloutService(PolicyStore(stack[1], engine))
    svc.start(MODEL, candidate=CAND, by="olivia")
    op = page("rollouts", "olivia", "operator")
    click(op, "Check eval gate")
    err = op.error[0].value
    assert err.startswith("Could not check the eval gate: the eval gate is closed: no finished eval run"), err
    assert "\n" not in err and "RolloutRefused" not in err
    audit = page("audit", "olivia", "operator")  # 10. refused attempts appear in the audit, with why
    frame = audit.dataframe[0].value
    refused = frame[frame["outcome"].str.startswith("refused")]
    assert refused["action"].tolist() == ["rollout.check_gate"]
    assert "eval gate is closed" in refused["outcome"].iloc[0]
    audit.toggle(key="audit_refused").set_value(True).run()
    assert audit.dataframe[0].value["action"].tolist() == ["rollout.check_gate"]


def test_guard_verdict_reads_as_a_sentence():
    from dashboard.pages.rollouts import guard_sentence
    from quantroute.rollout.guards import GuardVerdict

    v = GuardVerdict(status="pass", summary="pass (candidate 60, baseline 300 requests): errors 0.0% vs 0.3%")
    assert guard_sentence(v) == "Guards pass: (candidate 60, baseline 300 requests): errors 0.0% vs 0.3%"
    assert not guard_sentence(v).startswith("guards: pass: pass")


# ---- 2. Policy: the tab stays, the selectors follow a saved version, activate vs roll back explained -------

def _save_threshold_change(engine, policies) -> int:
    store = PolicyStore(policies, engine)
    data = policy_to_data(store.active())
    data["thresholds"][0]["min_score"] += 1
    return actions.save_policy(store=store, actor="olivia", draft=validate_data(data), parent=1, message="+1")


def test_policy_history_actions_keep_the_tab_and_the_version(stack):
    engine, policies = stack
    v = _save_threshold_change(engine, policies)
    at = page("policy", "rahul", "reviewer")
    assert at.session_state["hist_version"] == v  # the newest version is selected
    at.session_state["policy_section"] = "History, approve, activate, rollback"  # as a click on the tab sets it
    at.run()
    click(at, f"Approve version {v}")
    assert at.success[0].value == f"Version {v} approved by rahul; it is not active yet: activate it to route with it."
    assert at.session_state["policy_section"] == "History, approve, activate, rollback"  # still there
    captions = " ".join(c.value for c in at.caption)
    assert "Activate: the normal path" in captions
    click(at, f"Activate version {v}")
    assert at.success[0].value == f"Version {v} is active (was version 1); routers pick it up within seconds."
    assert at.session_state["policy_section"] == "History, approve, activate, rollback"
    at.selectbox(key="hist_version").set_value(1).run()
    captions = " ".join(c.value for c in at.caption)
    assert "Roll back: the emergency path. Version 1 was active before" in captions
    click(at, "Roll back to version 1")
    assert at.success[0].value.startswith(f"Rolled back to version 1 (was version {v}) without an approval step")
    no_reprs(at)


def test_saving_moves_both_version_selectors_to_the_new_version(stack):
    engine, policies = stack
    at = page("policy", "olivia", "operator")
    box = next(n for n in at.number_input if n.label == "min score #1")
    box.set_value(box.value + 1).run()
    at.text_input(key="save_message").input("raise the first threshold")
    click(at, "Save draft as new version")
    assert at.success[0].value.startswith("Saved as version 2 (from version 1, 1 change(s)); a reviewer other than "
                                          "olivia must approve it"), at.success[0].value
    assert at.session_state["policy_base_choice"] == 2 and at.session_state["hist_version"] == 2


def test_diff_shows_a_threshold_change_as_one_row_without_yaml_end_markers(stack):
    at = page("policy", "olivia", "operator")
    box = next(n for n in at.number_input if n.label == "min score #1")
    old = box.value
    box.set_value(old + 1).run()
    weight = next(n for n in at.number_input if n.label == "weight")
    weight.set_value(-2.0).run()
    diff = at.dataframe[0].value
    th = diff[diff["section"] == "thresholds"]
    assert th[["change", "old", "new"]].values.tolist() == [["changed", f"score>={old:g}", f"score>={old + 1:g}"]] or \
        th[["change", "old", "new"]].values.tolist() == [["changed", f"score>={old}", f"score>={old + 1}"]]
    assert "-2" in diff["new"].tolist()
    assert not diff["new"].str.contains(r"\.\.\.|\n").any() and not diff["old"].str.contains(r"\.\.\.|\n").any()


def test_diff_values_read_as_values():
    from dashboard.pages.policy import value_text

    assert value_text(-2.0) == "-2" and value_text(6.5) == "6.5" and value_text(True) == "yes"
    assert value_text({"max": 0.2}) == "{max: 0.2}" and value_text(None) == ""


def test_analyst_sees_a_read_only_note_and_no_edit_or_save_actions(stack):
    at = page("policy", "ana", "analyst")
    assert any(i.value.startswith("Read-only: as analyst you cannot save policy versions") for i in at.info)
    labels = buttons(at) + [b.label for b in at.get("form_submit_button")]
    for hidden in ("Save draft as new version", "Apply YAML", "Add threshold", "Add rule"):
        assert hidden not in labels, labels
    assert next(t for t in at.text_area if t.label.startswith("Draft as YAML")).disabled
    op = page("policy", "olivia", "operator")
    assert not any(i.value.startswith("Read-only") for i in op.info)
    assert "Apply YAML" in buttons(op)


def test_what_if_chart_gets_a_bar_per_rule_and_room_for_its_names():
    from dashboard import charts

    causes = pd.DataFrame({"rule": ["greedy-structured", "long-output", "high-priority"], "requests": [40, 7, 1]})
    spec = charts.replay_causes(causes).to_dict()
    assert spec["height"] >= 28 * 3
    assert spec["layer"][0]["encoding"]["y"]["axis"]["labelLimit"] >= 300
    assert spec["layer"][1]["mark"]["type"] == "text"  # each bar says its count


# ---- 5. Fleet --------------------------------------------------------------------------------------------

def test_fleet_charts_share_the_window_and_read_in_human_units(stack):
    from dashboard import charts

    engine, _ = stack
    ts = queries.tier_timeseries(engine, window_s=900, bucket_s=15)
    end = pd.Timestamp.now(tz="UTC")
    window = (end - pd.Timedelta(seconds=900), end)
    specs = {m: charts.tier_timeseries(ts, m, window).to_dict() for m in ("rps", "error_rate", "mean_ttft_ms")}
    for spec in specs.values():
        assert spec["encoding"]["x"]["scale"]["domain"] == [window[0].isoformat(), window[1].isoformat()]
    assert specs["error_rate"]["encoding"]["y"]["axis"]["format"] == ".1~%"
    zero = ts.assign(error_rate=0.0)
    assert charts.tier_timeseries(zero, "error_rate", window).to_dict()["encoding"]["y"]["scale"]["domain"] == [0, 0.01]
    queue = pd.DataFrame({"time": [end], "tier": ["int4"], "waiting": [0]})
    q = charts.tier_timeseries(queue, "waiting", window).to_dict()
    assert q["encoding"]["y"]["axis"]["format"] == "d" and q["encoding"]["y"]["scale"]["domain"] == [0, 1.0]
    assert ts["mean_ttft_ms"].notna().all()  # the TTFT per tier the page draws


def test_every_tier_is_named_and_labelled_in_the_share_chart_in_fidelity_order():
    from dashboard import charts

    share = pd.DataFrame({"tier": ["int4", "fp16"], "requests": [30, 10], "share": [0.75, 0.25]})
    full = charts.share_frame(share)
    assert full["tier"].tolist() == ["fp16", "fp8", "int8", "int4"]
    assert full["label"].tolist() == ["25.0 % · 10 requests", "0.0 % · 0 requests", "0.0 % · 0 requests",
                                      "75.0 % · 30 requests"]


def test_fleet_page_tables_custom_window_and_queue_history(stack):
    from dashboard.pages import fleet

    at = page("fleet", "olivia", "operator")
    assert len(at.get("vega_lite_chart")) >= 6  # rps, tokens/s, error rate, latency, TTFT, share
    deps = at.dataframe[0].value
    assert deps["tier"].tolist() == sorted(deps["tier"], key=["fp16", "fp8", "int8", "int4"].index)
    assert deps["mean latency (ms)"].map(lambda x: float(x).is_integer()).all()  # no 4 decimals
    assert "Download CSV" in [b.label for b in at.get("download_button")]
    next(s for s in at.selectbox if s.label == "Window").set_value(fleet.CUSTOM).run()
    at.number_input[0].set_value(45).run()
    assert "Per tier, last 45 min" in [h.value for h in at.subheader]
    assert fleet.window_for(45) == (2700, 60) and fleet.window_for(10) == (600, 10)
    with pytest.raises(ValueError, match="window: 0 min is outside 1 to 43200 min"):
        fleet.window_for(0)


def test_queue_history_outlives_a_reload():
    from dashboard.data import QueueHistory

    h = QueueHistory()
    t0 = pd.Timestamp.now(tz="UTC")
    nodes = [{"tier": "int4", "waiting": 2}, {"tier": "int4", "waiting": 1}, {"tier": "fp16", "waiting": 0}]
    h.record(nodes, t0 - pd.Timedelta(seconds=30))
    h.record(nodes, t0)
    got = h.since(t0 - pd.Timedelta(seconds=60))
    assert len(got) == 4 and got.loc[got["tier"] == "int4", "waiting"].tolist() == [3, 3]
    assert len(h.since(t0 - pd.Timedelta(seconds=5))) == 2


# ---- 8. Evals ----------------------------------------------------------------------------------------------

def test_ci_badge_arrow_follows_the_sign():
    from dashboard.pages.evals import overall_metric

    _, value, delta = overall_metric({"cand_rate": 0.8, "delta": -0.05, "ci_low": -0.09, "ci_high": -0.01})
    assert value == "80.0%" and delta.startswith("-5.0 pts")  # Streamlit draws a down arrow
    _, _, up = overall_metric({"cand_rate": 0.9, "delta": 0.02, "ci_low": -0.01, "ci_high": 0.05})
    assert up.startswith("+2.0 pts") and "95 % CI -1.0 to +5.0" in up


def test_eval_error_bars_have_one_axis_title():
    from dashboard import charts

    report = {"overall": {"name": "overall", "n": 10, "base_rate": 0.9, "cand_rate": 0.8},
              "categories": [{"name": "math", "n": 5, "base_rate": 1.0, "cand_rate": 0.6}]}
    spec = charts.eval_categories(charts.category_frame(report)).to_dict()
    titles = {layer["encoding"]["y"].get("title") for layer in spec["spec"]["layer"]}
    assert titles == {"pass rate"}


def test_two_run_comparison_frames():
    from dashboard.pages.evals import comparison_frame, flips_frame

    def view(d_math: float) -> dict:
        return {"report": {"overall": {"name": "overall", "n": 4, "cand_rate": 0.5, "delta": d_math / 2},
                           "categories": [{"name": "math", "n": 2, "cand_rate": 0.5, "delta": d_math}]}}

    cmp = {"a": view(-0.5), "b": view(0.0), "item_changes": [
        {"item_id": "m1", "category": "math", "arm": "candidate", "before": False, "after": True}]}
    frame = comparison_frame(cmp)
    row = frame.set_index("category").loc["math"]
    assert (row["A: Δ vs baseline (pts)"], row["B: Δ vs baseline (pts)"], row["B − A (pts)"]) == (-50, 0, 50)
    assert flips_frame(cmp).to_dict("records") == [{"item": "m1", "category": "math", "arm": "candidate",
                                                    "A → B": "fail → pass"}]


# ---- 10/11. Sessions: tier counters in fidelity order, following the filter; the pinned marker -----------

def test_session_counters_follow_the_filter_in_fidelity_order(stack):
    from datetime import timedelta

    from quantroute.clock import utcnow
    from quantroute.db.session_pin import SessionPin

    engine, _ = stack
    with session(engine) as s:
        for key, tier in (("a-int4", "int4"), ("b-fp8", "fp8"), ("c-int8", "int8"), ("x-int4", "int4")):
            s.add(SessionPin(session_key=key, model=MODEL, tier=tier, expires_at=utcnow() + timedelta(hours=1)))
        s.commit()
    at = page("sessions", "olivia", "operator")
    assert [m.label for m in at.metric] == ["pinned to fp16", "pinned to fp8", "pinned to int8", "pinned to int4"]
    at.text_input[0].input("int4").run()
    assert [(m.label, m.value) for m in at.metric] == [("pinned to int4", "2")]
    table = at.dataframe[-1].value
    assert "routed by the pin" in table.columns and set(table["session"]) == {"a-int4", "x-int4"}
    no_reprs(at)


def test_requests_routed_by_a_pin_are_counted(stack):
    """A session's requests under its pin (the log names the pin by key and creation time): not those of an
    earlier pin of the same key (it expired; the session started over), nor another session's whose pin was
    created at the same microsecond."""
    from datetime import timedelta

    from quantroute.clock import utcnow
    from quantroute.db.request_log import RequestLog
    from quantroute.db.session_pin import SessionPin

    engine, _ = stack
    t0 = utcnow()
    with session(engine) as s:
        for key in ("conv", "twin"):
            s.add(SessionPin(session_key=key, model=MODEL, tier="int4", created_at=t0, last_used=t0,
                             expires_at=t0 + timedelta(hours=1)))
        for dt in (-0.5, 2, 5):  # the first request arrived before its pin was written
            s.add(RequestLog(ts=t0 + timedelta(seconds=dt), model=MODEL, session_key="conv", tier="int4",
                             status=200, latency_ms=10.0, pin_created_at=t0))
        s.add(RequestLog(ts=t0 - timedelta(hours=2), model=MODEL, session_key="conv", tier="fp16", status=200,
                         latency_ms=10.0, pin_created_at=t0 - timedelta(hours=3)))  # the key's earlier pin
        s.add(RequestLog(ts=t0 + timedelta(seconds=1), model=MODEL, session_key="twin", tier="int4", status=200,
                         latency_ms=10.0, pin_created_at=t0))
        s.commit()
    rows = queries.pinned_sessions(engine).set_index("session_key")
    assert (rows.loc["conv", "requests"], rows.loc["conv", "routed_by_pin"]) == (3, 2)
    assert (rows.loc["twin", "requests"], rows.loc["twin", "routed_by_pin"]) == (1, 1)


# ---- 6/12. human timestamps, CSV downloads, spinners ------------------------------------------------------

def test_human_values():
    from dashboard import fmt

    assert fmt.when("2026-11-30T09:51:01.217072Z") == "2026-11-30 09:51:01 UTC"
    assert fmt.pct(0.0) == "0 %" and fmt.pct(2.5) == "2.5 %" and fmt.pct(None) == "–"
    assert fmt.change(fmt.version(None), fmt.version(None)) == "–" and fmt.change("0 %", "1 %") == "0 % → 1 %"
    df = pd.DataFrame({"tier": ["int4", "fp8", "weird", "fp16", "int8"]})
    assert fmt.by_fidelity(df)["tier"].tolist() == ["fp16", "fp8", "int8", "int4", "weird"]


def test_cached_queries_show_a_spinner():
    import inspect

    from dashboard import data

    src = inspect.getsource(data)
    assert "show_spinner=False)\ndef tier_timeseries" not in src
    assert src.count('show_spinner="Reading') >= 10


def test_tables_offer_csv(stack):
    ses = page("sessions", "olivia", "operator")
    assert "Download CSV" in [b.label for b in ses.get("download_button")]


# ---- 8. Evals pages: prompts of failing items, two runs side by side; 7. no Deploy button -------------------

def _run(engine, *, candidate: str, passes: dict[str, tuple[bool, bool]]) -> int:
    """A finished run on the smoke suite: item id -> (baseline passed, candidate passed)."""
    from quantroute.db import eval as evaldb
    from quantroute.evals.suite import load_suite

    suite = load_suite("data/evals/smoke.jsonl")
    cats = {i.id: i.category for i in suite.items}
    with session(engine) as s:
        run = evaldb.create_run(session=s, run=evaldb.EvalRun(
            suite_name=suite.name, suite_path=suite.path, suite_hash=suite.hash, n_items=len(passes),
            baseline_deployment="llama3-8b-fp16", candidate_deployment=candidate, candidate_tier="int4"))
        evaldb.add_results(session=s, results=[
            evaldb.EvalResult(run_id=run.id, item_id=item, category=cats[item], arm=arm, passed=ok,
                              answer=f"{arm} answer to {item}")
            for item, (b, c) in passes.items() for arm, ok in (("baseline", b), ("candidate", c))])
        evaldb.finish_run(session=s, run_id=run.id, status="done")
        return run.id


def test_evals_show_the_prompt_of_failing_items_and_compare_two_runs(stack):
    from quantroute.evals.suite import load_suite

    engine, _ = stack
    items = [i for i in load_suite("data/evals/smoke.jsonl").items][:3]
    a = _run(engine, candidate="int4-before", passes={items[0].id: (True, False), items[1].id: (True, True),
                                                      items[2].id: (True, False)})
    b = _run(engine, candidate="int4-after", passes={items[0].id: (True, True), items[1].id: (True, True),
                                                     items[2].id: (True, False)})
    at = page("evals", "ana", "analyst")
    assert not at.exception, at.exception
    shown = [c.value for c in at.code]
    assert items[2].last_user_text in "\n".join(shown)  # 8. the prompt, above both answers
    metric = next(m for m in at.metric if m.label == "overall pass rate (candidate)")
    assert metric.delta.startswith("-33.3 pts vs baseline")
    cmp = next(d.value for d in at.dataframe if "B − A (pts)" in d.value.columns)
    overall = cmp.set_index("category").loc["overall"]
    assert round(overall["A: Δ vs baseline (pts)"]) == -67 and round(overall["B − A (pts)"]) == 33
    flips = next(d.value for d in at.dataframe if "A → B" in d.value.columns)
    assert flips.to_dict("records") == [{"item": items[0].id, "category": items[0].category, "arm": "candidate",
                                         "A → B": "fail → pass"}]
    assert {at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value} == {a, b}
    no_reprs(at)


def test_the_app_hides_the_deploy_button():
    from streamlit import config
    from streamlit.testing.v1 import AppTest

    from tests.dashboard.conftest import APP

    AppTest.from_file(APP, default_timeout=60).run()
    assert config.get_option("client.toolbarMode") == "viewer"
