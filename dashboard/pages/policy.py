"""Policy: edit a draft in forms (or YAML), see validation issues where they are, diff it against the active
version, replay it over the last N logged requests, save it as a new version; then history, approve,
activate and rollback. Routing changes only when a reviewed version is activated."""

from __future__ import annotations

import copy
from itertools import count

import pandas as pd
import streamlit as st
import yaml

from dashboard import actions, charts, data, fmt, policy_form, ui
from quantroute import yamlsafe
from quantroute.policy.diff import diff_policies
from quantroute.policy.loader import Issue, PolicyValidationError, parse_policy, policy_to_data, validate_data
from quantroute.policy.model import Policy
from quantroute.whatif import reclassify

SECTIONS = ["Edit draft", "History, approve, activate, rollback"]


def reset_draft(data_dict: dict, base: int) -> None:
    """Make `data_dict` the editor's draft, started from version `base` (also how Live agreement opens one)."""
    st.session_state["policy_draft"] = data_dict
    st.session_state["policy_base"] = base
    st.session_state["policy_gen"] = st.session_state.get("policy_gen", 0) + 1
    ids = st.session_state.setdefault("policy_row_seq", count())
    st.session_state["policy_rows"] = policy_form.row_ids(data_dict, ids)


def validate(draft: dict) -> tuple[Policy | None, list[Issue]]:
    try:
        return validate_data(draft, source="draft"), []
    except PolicyValidationError as e:
        return None, e.issues


def yaml_issue_lines(text: str) -> list[str]:
    """The draft's issues as the YAML tab's text has them, each with its line ("line 12: rules[0].weight: ..."),
    so a person editing YAML finds them without mapping paths to lines."""
    try:
        parse_policy(text, source="draft")
    except PolicyValidationError as e:
        return [str(i) for i in e.issues]
    return []


def changes_frame(old: Policy, new: Policy) -> pd.DataFrame:
    return pd.DataFrame([{"section": c.section, "change": c.kind, "path": c.path, "old": value_text(c.old),
                          "new": value_text(c.new)} for c in diff_policies(old, new)])


def value_text(v) -> str:
    """A diff value as a person reads it: scalars as they are (2.0 → "2", never YAML's "2.0\n..." document end
    marker), lists and mappings in YAML's one-line flow style."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (int, str)):
        return str(v)
    return yaml.safe_dump(v, default_flow_style=True, sort_keys=False, width=10_000).strip().removesuffix("...").strip()


NOTHING_TO_REPLAY = ("nothing to replay: no logged request carries its body. The router keeps bodies only when "
                     "its prompt storage is `full` or `redacted` (QUANTROUTE_ROUTER_PROMPT_STORAGE); with `none`, or "
                     "before any traffic, there is nothing to re-classify")


def replay_summary(active: Policy, draft: Policy, rows: pd.DataFrame) -> dict:
    """What the page shows after a what-if run (also what the tests check)."""
    report = reclassify(active, draft, zip(rows["id"], rows["replay"]))
    redacted = int(sum(1 for r in rows["replay"] if isinstance(r, dict) and r.get("redacted")))
    ranked = sorted(report.causes().items(), key=lambda kv: -kv[1])  # the rule moving the most requests first
    causes = pd.DataFrame(ranked, columns=["rule", "requests"])
    moves = pd.DataFrame([{"from (active)": a, "to (draft)": b, "requests": n}
                          for (a, b), n in report.transitions().most_common()])
    return {"total": report.total, "changed": len(report.changed), "skipped": report.skipped, "causes": causes,
            "moves": moves, "tiers": report.tier_counts(), "redacted": redacted}


def _editor(store, active: Policy, versions: list[int]) -> None:
    editor = ui.can("policy.new")
    if not editor:
        st.info(f"Read-only: as {ui.user().role} you cannot save policy versions (operators do). You may change "
                "values below to see their diff and what-if replay; nothing here is stored.", icon=":material/lock:")
    if st.session_state.get("policy_base_choice") not in versions:
        st.session_state["policy_base_choice"] = active.version
    base_choice = st.selectbox("Start from version", versions[::-1], key="policy_base_choice",
                               format_func=lambda v: f"{v}{' (active)' if v == active.version else ''}")
    if st.session_state.get("policy_base") != base_choice or "policy_rows" not in st.session_state:
        reset_draft(policy_to_data(store.load(base_choice)), base_choice)
    if editor:
        _tune(store, active)
    slots: dict = {}
    kept: dict[str, list[int]] = {}
    edited = _draft_tabs(editor, base_choice, slots, kept)

    policy, issues = validate(edited)  # a policy exactly when there are no issues
    st.session_state["policy_issue_slots"] = [policy_form.slot_path(i.path, kept) for i in issues]
    left = policy_form.fill(slots, issues, kept)
    if issues:
        st.error(f"{len(issues)} validation problem(s); each is shown next to its field:\n\n"
                 + "\n".join(f"- `{i.path or '(document)'}`: {i.message}" for i in issues))
        for i in left:
            st.error(f"`{i.path}`: {i.message}")
        return
    assert policy is not None

    st.subheader(f"Diff against the active version ({active.version})")
    changes = changes_frame(active, policy)
    if changes.empty:
        st.caption("no changes yet")
    else:
        ui.table(changes, "policy-draft-diff")
    _whatif(active, policy)
    if editor:
        _save(store, policy, base_choice, changes)


def _tune(store, active: Policy) -> None:
    """The tuner as an action: its best proposal for an SLO opens as the draft below (its diff and what-if replay
    follow); saving it is the usual step, and nothing is activated."""
    from quantroute.evals import tuning
    from quantroute.fleet import load_fleet
    from quantroute.slo import SLOS
    from quantroute.tune import MissingEvals, SloUnmeetable

    with st.expander("Tune: the thresholds and rule weights with the most capacity at an SLO, within a quality "
                     "budget", expanded="tune_table" in st.session_state):
        fleet_file = data.settings().fleet_file
        if fleet_file is None:
            st.caption("Set QUANTROUTE_DASHBOARD_FLEET_FILE to the router's fleet file to tune here "
                       "(or run `quantroute policy tune`).")
            return
        c1, c2, c3 = st.columns(3)
        slo = c1.selectbox("SLO", list(SLOS), format_func=lambda n: SLOS[n].label, key="tune_slo")
        budget = c2.number_input("budget: points over all traffic", 0.0, 100.0, 0.5, step=0.1, key="tune_budget")
        category = c3.number_input("budget: points in any category", 0.0, 100.0, 6.0, step=0.5, key="tune_category")
        if st.button("Tune", key="tune_run"):
            requests = tuning.logged_requests(store.engine, limit=5000)
            if not requests:
                st.error(NOTHING_TO_REPLAY.replace("nothing to replay", "nothing to tune for"))
                return
            try:
                result, draft, guarded = tuning.propose(
                    store.engine, active, load_fleet(fleet_file), requests, SLOS[slo], budget=budget,
                    category_budget=category, version=max(store.versions()) + 1)
            except (MissingEvals, SloUnmeetable) as e:
                st.error(str(e))
                return
            rows = [{"candidate": c.label, "predicted tok/s": round(c.capacity_tok_s),
                     "requests per tier": ", ".join(f"{t} {x:.0%}" for t, x in c.tier_share.items()),
                     "loss all (pts)": round(c.quality.overall_pts, 2), "loss worst (pts)":
                     round(c.quality.worst_pts, 2), "worst category": c.quality.worst_category or "",
                     "within budget": "yes" if c.within else "no"} for c in [result.active, *result.candidates]]
            st.session_state["tune_table"] = pd.DataFrame(rows)
            if draft is None:
                st.session_state["tune_note"] = ("error", f"no candidate stays within {budget:g} points overall "
                                                 f"and {category:g} in every category ({guarded} labelled "
                                                 "sensitive requests kept up)")
            else:
                st.session_state["tune_note"] = ("info", f"Draft opened below: {draft.message}. Review its diff "
                                                 "and what-if replay, then save it as a new version.")
                reset_draft(policy_to_data(draft), active.version)
            st.rerun()
        if "tune_table" in st.session_state:
            kind, note = st.session_state.get("tune_note", ("info", ""))
            (st.error if kind == "error" else st.info)(note)
            ui.table(st.session_state["tune_table"], "policy-tune-candidates")


def _draft_tabs(editor: bool, base_choice: int, slots: dict, kept: dict[str, list[int]]) -> dict:
    """The draft as the form's tabs edit it; adding a threshold or a rule, or applying YAML, starts a new draft."""
    draft0, gen = st.session_state["policy_draft"], st.session_state["policy_gen"]
    rows = st.session_state["policy_rows"]
    previous = st.session_state.get("policy_issue_slots", [])
    tab_rules, tab_thresholds, tab_settings, tab_yaml = st.tabs(["Rules", "Thresholds", "Sessions & escalation",
                                                                 "YAML"])
    edited = copy.deepcopy(draft0)
    with tab_thresholds:
        edited["thresholds"], kept["thresholds"] = policy_form.thresholds(draft0, rows["thresholds"], gen, slots)
        add_threshold = editor and st.button("Add threshold")
    with tab_rules:
        edited["rules"], kept["rules"] = policy_form.rules(draft0, rows["rules"], gen, slots, previous)
        rule = policy_form.new_rule(gen) if editor else None
    with tab_settings:
        edited.update(policy_form.settings(draft0, gen, slots))
    if add_threshold or rule is not None:  # after every tab read its widgets: the new draft keeps the edits
        if add_threshold:
            edited["thresholds"].append({"min_score": 100.0, "tier": "fp16"})
        if rule is not None:
            edited["rules"].append(rule)
        reset_draft(edited, base_choice)
        st.rerun()
    with tab_yaml:
        _yaml_tab(editor, edited, gen, base_choice)
    return edited


def _yaml_tab(editor: bool, edited: dict, gen: int, base_choice: int) -> None:
    text = st.text_area("Draft as YAML (edit and apply to replace the form values)" if editor else
                        "Draft as YAML (read-only)",
                        value=yaml.safe_dump(edited, sort_keys=False, allow_unicode=True, width=110),
                        height=420, key=f"yaml{gen}", disabled=not editor)
    for line in st.session_state.pop("policy_yaml_issues", []):  # from the last Apply, with line numbers
        st.error(line)
    if editor and st.button("Apply YAML"):
        try:
            parsed = yamlsafe.safe_load(text)
        except yaml.YAMLError as e:
            st.error(f"not valid YAML: {e}")
        else:
            if isinstance(parsed, dict):
                st.session_state["policy_yaml_issues"] = yaml_issue_lines(text)
                reset_draft(parsed, base_choice)
                st.rerun()
            st.error("a policy is a mapping of keys (version, tiers, rules, thresholds, ...)")


def _whatif(active: Policy, policy: Policy) -> None:
    st.subheader("What-if replay")
    c1, c2 = st.columns([2, 1])
    n = c1.slider("Replay the last N logged requests", 50, 5000, 500, 50)
    if c2.button("Run what-if replay"):
        rows = data.replay_rows(data.settings().db_url, n)
        if rows.empty:
            st.info(NOTHING_TO_REPLAY)
        else:
            st.session_state["whatif"] = replay_summary(active, policy, rows)
    res = st.session_state.get("whatif")
    if res:
        m1, m2, m3 = st.columns(3)
        m1.metric("requests replayed", res["total"])
        m2.metric("change tier", res["changed"], f"{res['changed'] / max(res['total'], 1):.1%}", delta_color="off")
        m3.metric("skipped (malformed)", res["skipped"])
        if res.get("redacted"):
            st.caption(f"{res['redacted']} of the bodies were stored redacted (keys, tokens, e-mail addresses and "
                       "card-like numbers masked): rules matching those strings cannot fire on them")
        if res["changed"]:
            ui.table(res["moves"], "what-if-moves")
            # the chart gets the page's width: rule names are long, a half-width column would squash it
            chart = charts.replay_causes(res["causes"])
            st.altair_chart(chart, width="stretch", height=chart.height + 60)  # "content" would squash it


def _save(store, policy: Policy, base_choice: int, changes: pd.DataFrame) -> None:
    st.subheader("Save as a new version")
    message = st.text_input("Message (what changes and why)", key="save_message")
    if st.button("Save draft as new version", type="primary", disabled=changes.empty):
        me = ui.user().name
        v = ui.run_action(actions.save_policy, store=store, actor=me, draft=policy, parent=base_choice,
                          message=message, failed="save the draft",
                          done=lambda v: (f"Saved as version {v} (from version {base_choice}, {len(changes)} "
                                          f"change(s)); a reviewer other than {me} must approve it before it "
                                          "can be activated."))
        if v:
            st.session_state.pop("whatif", None)
            reset_draft(policy_to_data(store.load(v)), v)
            st.session_state["policy_follow"] = v  # both version selectors move to it on the next run
        st.rerun()


def _history(store, active: Policy) -> None:
    hist = store.history()
    frame = pd.DataFrame([{"version": fmt.version(h.version), "parent": fmt.version(h.parent), "author": h.author,
                           "created": fmt.when(h.created_at), "message": h.message,
                           "approved by": h.approved_by or "", "active": "●" if h.active else "",
                           "known-good": "yes" if h.ever_active else ""} for h in reversed(hist)])
    ui.table(frame, "policy-history")
    by_v = {h.version: h for h in hist}
    if st.session_state.get("hist_version") not in by_v:
        st.session_state["hist_version"] = hist[-1].version
    v = st.selectbox("Version", [h.version for h in reversed(hist)], key="hist_version")
    h = by_v[v]
    pol = store.load(v)
    against = h.parent if h.parent in by_v else None
    if against is not None:
        st.markdown(f"**Changes from its parent, version {against}**")
        ch = changes_frame(store.load(against), pol)
        ui.table(ch, f"policy-{v}-vs-parent-{against}") if not ch.empty else st.caption("identical")
    if v != active.version:
        st.markdown(f"**Changes from the active version {active.version}**")
        ch = changes_frame(active, pol)
        ui.table(ch, f"policy-{v}-vs-active-{active.version}") if not ch.empty else st.caption("identical")
    _version_actions(store, active, h)


def _version_actions(store, active: Policy, h) -> None:
    """Approve, activate, roll back: each with a sentence on what it does, so the two ways of making a version
    active are told apart (activate: the reviewed path; roll back: the emergency path to a known-good one)."""
    me, v = ui.user(), h.version
    cols = st.columns(3)
    if ui.can("policy.approve") and not h.approved_by and v != 1:
        if h.author == me.name:
            cols[0].caption("You wrote this version; another reviewer must approve it.")
        else:
            cols[0].caption("Approve: you vouch for this version's content; it does not route anything until "
                            "someone activates it.")
            if cols[0].button(f"Approve version {v}"):
                ui.run_action(actions.approve_policy, store=store, actor=me.name, version=v,
                              failed=f"approve version {v}",
                              done=lambda _: (f"Version {v} approved by {me.name}; it is not active yet: activate "
                                              "it to route with it."))
                st.rerun()
    if h.active:
        cols[1].caption(f"Version {v} is the active version.")
    elif not h.approved_by and v != 1:
        cols[1].caption(f"Activate: needs a reviewer's approval of version {v} first.")
    if ui.can("policy.activate") and not h.active and (h.approved_by or v == 1):
        cols[1].caption(f"Activate: the normal path. Routers switch from version {active.version} to the "
                        f"reviewed version {v} within seconds.")
        if cols[1].button(f"Activate version {v}", type="primary"):
            ui.run_action(actions.activate_policy, store=store, actor=me.name, version=v,
                          failed=f"activate version {v}",
                          done=lambda prev: (f"Version {v} is active (was version {prev}); routers pick it up "
                                             "within seconds."))
            st.rerun()
    if ui.can("policy.rollback") and not h.active and (h.ever_active or v == 1):  # the shipped default is known-good
        cols[2].caption(f"Roll back: the emergency path. Version {v} was active before, so it is re-activated at "
                        "once with no approval step, and recorded as a rollback.")
        if cols[2].button(f"Roll back to version {v}"):
            ui.run_action(actions.rollback_policy, store=store, actor=me.name, to=v, reason="dashboard rollback",
                          failed=f"roll back to version {v}",
                          done=lambda to: (f"Rolled back to version {to} (was version {active.version}) without an "
                                           "approval step; routers pick it up within seconds."))
            st.rerun()


def render() -> None:
    st.title("Policy")
    ui.flash()
    store = data.store()
    active = store.active()
    live, why = data.router_call("policy")
    st.caption(f"Active version **{active.version}** by {active.author}: {active.message}"
               + (f" · router serving version **{live['version']}**" if live else f" · router: {why}"))
    if live and len(set(live["replicas"].values())) > 1:  # replicas converge within their reload interval
        st.warning("router replicas serve different versions: "
                   + ", ".join(f"{url} v{v}" for url, v in live["replicas"].items()))
    follow = st.session_state.pop("policy_follow", None)
    if follow is not None:  # a version was just saved: both selectors show it (set before the widgets exist)
        st.session_state["policy_base_choice"] = st.session_state["hist_version"] = follow
    # Keyed tabs that track their selection: unkeyed tabs forget it when the page above them changes (the
    # message after an action), which sent a reviewer back to the editor after every approve.
    # Both render on every run (not lazily): the editor's widgets hold the draft's unsaved edits.
    tab_edit, tab_hist = st.tabs(SECTIONS, key="policy_section", on_change="rerun")
    with tab_edit:
        _editor(store, active, store.versions())
    with tab_hist:
        _history(store, active)
