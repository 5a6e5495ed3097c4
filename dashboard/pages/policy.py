"""Policy: edit a draft in forms (or YAML), see validation issues where they are, diff it against the active
version, replay it over the last N logged requests, save it as a new version; then history, approve,
activate and rollback. Routing changes only when a reviewed version is activated."""

from __future__ import annotations

import copy
from itertools import count

import pandas as pd
import streamlit as st
import yaml

from dashboard import actions, charts, data, policy_form, ui
from quantroute.policy.diff import diff_policies
from quantroute.policy.loader import Issue, PolicyValidationError, parse_policy, policy_to_data, validate_data
from quantroute.policy.model import Policy
from quantroute.whatif import replay


def _reset_draft(data_dict: dict, base: int) -> None:
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
    return pd.DataFrame([{"section": c.section, "change": c.kind, "path": c.path, "old": _fmt(c.old),
                          "new": _fmt(c.new)} for c in diff_policies(old, new)])


def _fmt(v) -> str:
    return "" if v is None else (v if isinstance(v, str) else yaml.safe_dump(v, default_flow_style=True).strip())


def replay_summary(active: Policy, draft: Policy, rows: pd.DataFrame) -> dict:
    """What the page shows after a what-if run (also what the tests check)."""
    report = replay(active, draft, zip(rows["id"], rows["replay"]))
    causes = pd.DataFrame(sorted(report.causes().items(), key=lambda kv: -kv[1]), columns=["rule", "requests"])
    moves = pd.DataFrame([{"from (active)": a, "to (draft)": b, "requests": n}
                          for (a, b), n in report.transitions().most_common()])
    return {"total": report.total, "changed": len(report.changed), "skipped": report.skipped, "causes": causes,
            "moves": moves, "tiers": report.tier_counts()}


def _editor(store, active: Policy, versions: list[int]) -> None:
    base_choice = st.selectbox("Start from version", versions[::-1], index=versions[::-1].index(active.version),
                               format_func=lambda v: f"{v}{' (active)' if v == active.version else ''}")
    if st.session_state.get("policy_base") != base_choice or "policy_rows" not in st.session_state:
        _reset_draft(policy_to_data(store.load(base_choice)), base_choice)
    draft0, gen = st.session_state["policy_draft"], st.session_state["policy_gen"]
    rows = st.session_state["policy_rows"]
    previous = st.session_state.get("policy_issue_slots", [])
    slots: dict = {}
    kept: dict[str, list[int]] = {}

    tab_rules, tab_thresholds, tab_settings, tab_yaml = st.tabs(["Rules", "Thresholds", "Sessions & escalation", "YAML"])
    edited = copy.deepcopy(draft0)
    with tab_thresholds:
        edited["thresholds"], kept["thresholds"] = policy_form.thresholds(draft0, rows["thresholds"], gen, slots)
        add_threshold = st.button("Add threshold")
    with tab_rules:
        edited["rules"], kept["rules"] = policy_form.rules(draft0, rows["rules"], gen, slots, previous)
        rule = policy_form.new_rule(gen)
    with tab_settings:
        edited.update(policy_form.settings(draft0, gen, slots))
    if add_threshold or rule is not None:  # after every tab read its widgets: the new draft keeps the edits
        if add_threshold:
            edited["thresholds"].append({"min_score": 100.0, "tier": "fp16"})
        if rule is not None:
            edited["rules"].append(rule)
        _reset_draft(edited, base_choice)
        st.rerun()
    with tab_yaml:
        text = st.text_area("Draft as YAML (edit and apply to replace the form values)",
                            value=yaml.safe_dump(edited, sort_keys=False, allow_unicode=True, width=110),
                            height=420, key=f"yaml{gen}")
        for line in st.session_state.pop("policy_yaml_issues", []):  # from the last Apply, with line numbers
            st.error(line)
        if st.button("Apply YAML"):
            try:
                parsed = yaml.safe_load(text)
            except yaml.YAMLError as e:
                st.error(f"not valid YAML: {e}")
            else:
                if isinstance(parsed, dict):
                    st.session_state["policy_yaml_issues"] = yaml_issue_lines(text)
                    _reset_draft(parsed, base_choice)
                    st.rerun()
                st.error("a policy is a mapping of keys (version, tiers, rules, thresholds, ...)")

    policy, issues = validate(edited)
    st.session_state["policy_issue_slots"] = [policy_form.slot_path(i.path, kept) for i in issues]
    left = policy_form.fill(slots, issues, kept)
    if issues:
        st.error(f"{len(issues)} validation problem(s); each is shown next to its field:\n\n"
                 + "\n".join(f"- `{i.path or '(document)'}`: {i.message}" for i in issues))
        for i in left:
            st.error(f"`{i.path}`: {i.message}")
        return

    st.subheader(f"Diff against the active version ({active.version})")
    changes = changes_frame(active, policy)
    if changes.empty:
        st.caption("no changes yet")
    else:
        st.dataframe(changes, hide_index=True, width="stretch")

    st.subheader("What-if replay")
    c1, c2 = st.columns([2, 1])
    n = c1.slider("Replay the last N logged requests", 50, 5000, 500, 50)
    if c2.button("Run what-if replay"):
        rows = data.replay_rows(data.settings().db_url, n)
        if rows.empty:
            st.info("no logged requests with replay data yet (the router logs them as traffic arrives)")
        else:
            st.session_state["whatif"] = replay_summary(active, policy, rows)
    res = st.session_state.get("whatif")
    if res:
        m1, m2, m3 = st.columns(3)
        m1.metric("requests replayed", res["total"])
        m2.metric("change tier", res["changed"], f"{res['changed'] / max(res['total'], 1):.1%}", delta_color="off")
        m3.metric("skipped (malformed)", res["skipped"])
        if res["changed"]:
            a, b = st.columns(2)
            a.dataframe(res["moves"], hide_index=True, width="stretch")
            b.altair_chart(charts.replay_causes(res["causes"]), width="stretch")

    if ui.can("policy.new"):
        st.subheader("Save as a new version")
        message = st.text_input("Message (what changes and why)", key="save_message")
        if st.button("Save draft as new version", type="primary", disabled=changes.empty):
            v = ui.run_action("save", actions.save_policy, store=store, actor=ui.user().name, draft=policy,
                              parent=base_choice, message=message)
            if v:
                st.session_state.pop("whatif", None)
                st.session_state["flash"] = ("success", f"saved as version {v}; a reviewer must approve it")
                _reset_draft(policy_to_data(store.load(v)), v)
            st.rerun()


def _history(store, active: Policy) -> None:
    hist = store.history()
    frame = pd.DataFrame([{"version": h.version, "parent": h.parent, "author": h.author,
                           "created": h.created_at.strftime("%Y-%m-%d %H:%M"), "message": h.message,
                           "approved by": h.approved_by or "", "active": "●" if h.active else "",
                           "known-good": h.ever_active} for h in reversed(hist)])
    st.dataframe(frame, hide_index=True, width="stretch")
    by_v = {h.version: h for h in hist}
    v = st.selectbox("Version", [h.version for h in reversed(hist)], key="hist_version")
    h = by_v[v]
    pol = store.load(v)
    against = h.parent if h.parent in by_v else None
    if against is not None:
        st.markdown(f"**Changes from its parent, version {against}**")
        ch = changes_frame(store.load(against), pol)
        st.dataframe(ch, hide_index=True, width="stretch") if not ch.empty else st.caption("identical")
    if v != active.version:
        st.markdown(f"**Changes from the active version {active.version}**")
        ch = changes_frame(active, pol)
        st.dataframe(ch, hide_index=True, width="stretch") if not ch.empty else st.caption("identical")
    me = ui.user()
    cols = st.columns(3)
    if ui.can("policy.approve") and not h.approved_by and v != 1:
        if h.author == me.name:
            cols[0].caption("you wrote this version; another reviewer must approve it")
        elif cols[0].button(f"Approve version {v}"):
            ui.run_action(f"approve {v}", actions.approve_policy, store=store, actor=me.name, version=v)
            st.rerun()
    if ui.can("policy.activate") and not h.active and (h.approved_by or v == 1):
        if cols[1].button(f"Activate version {v}", type="primary"):
            ui.run_action(f"activate {v}", actions.activate_policy, store=store, actor=me.name, version=v)
            st.rerun()
    if ui.can("policy.rollback") and not h.active and h.ever_active:
        if cols[2].button(f"Roll back to version {v}"):
            ui.run_action(f"rollback to {v}", actions.rollback_policy, store=store, actor=me.name, to=v,
                          reason="dashboard rollback")
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
    tab_edit, tab_hist = st.tabs(["Edit draft", "History, approve, activate, rollback"])
    with tab_edit:
        _editor(store, active, store.versions())
    with tab_hist:
        _history(store, active)
