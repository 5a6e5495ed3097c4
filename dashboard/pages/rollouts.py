"""Rollouts: per model, the canary's phase, percent and step timeline; next step / pause / resume / promote
(operator), approve and checklist (reviewer), a prominent one-click Rollback with a confirm; guard metrics
per arm with their limits drawn; and every action on the rollout."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from quantroute.rollout.checklist import BY_KEY

from dashboard import actions, charts, data, ui


def service():
    return actions.rollout_service(data.store(), data.router())


def _do(svc, action: str, model: str, **kw) -> None:
    ui.run_action(f"rollout {action}", actions.rollout_action, service=svc, actor=ui.user().name, action=action,
                  model=model, **kw)
    st.rerun()


def timeline(status) -> pd.DataFrame:
    rows = [{"at": e["at"], "actor": e["actor"], "action": e["action"] + (" (refused)" if e["refused"] else ""),
             "phase": f"{e.get('phase_before') or '-'} → {e.get('phase_after') or '-'}",
             "percent": f"{e.get('percent_before') or 0:g} → {e.get('percent_after') if e.get('percent_after') is not None else '-'}",
             "versions": f"{e.get('version_before')} → {e.get('version_after')}", "message": e["message"]}
            for e in status.events]
    return pd.DataFrame(rows[::-1])


def _buttons(svc, st_, model: str) -> None:
    phase = st_.phase
    me = ui.user()
    live = phase not in ("promoted", "rolled-back")
    if live and ui.can("rollout.rollback"):
        if st.button("Rollback", icon=":material/undo:", type="primary", key=f"rb_{model}", width="stretch"):
            st.session_state["rollback_pending"] = model
        if st.session_state.get("rollback_pending") == model:
            st.error(f"Roll back the canary of {model}? All traffic returns to {st_.baseline} at once.")
            a, b = st.columns(2)
            if a.button("Confirm rollback", type="primary", key=f"rb_yes_{model}"):
                st.session_state.pop("rollback_pending", None)
                _do(svc, "rollback", model, reason="rolled back from the dashboard")
            if b.button("Cancel", key=f"rb_no_{model}"):
                st.session_state.pop("rollback_pending", None)
                st.rerun()
    cols = st.columns(6)
    if phase == "gated" and ui.can("rollout.start") and cols[0].button("Check eval gate", key=f"gate_{model}"):
        _do(svc, "check_gate", model)
    if phase == "awaiting-approval" and ui.can("rollout.approve") and me.name != st_.started_by:
        if cols[0].button("Approve rollout", key=f"ap_{model}"):
            _do(svc, "approve", model)
    if phase == "progressing" and ui.can("rollout.step"):
        nxt = st_.steps[st_.step_index + 1] if st_.step_index + 1 < len(st_.steps) else None
        if nxt is not None and cols[1].button(f"Next step → {nxt:g} %", key=f"step_{model}"):
            _do(svc, "step", model)
        if cols[2].button("Pause", key=f"pause_{model}"):
            _do(svc, "pause", model)
    if phase == "paused" and ui.can("rollout.resume") and cols[3].button("Resume", key=f"resume_{model}"):
        _do(svc, "resume", model)
    if phase in ("progressing", "paused") and ui.can("rollout.promote") and cols[4].button("Promote to 100 %",
                                                                                          key=f"promote_{model}"):
        _do(svc, "promote", model)


def _person_may_tick(item) -> bool:
    """Offer only what the service would accept: items the system cannot know, and system items whose fact it
    could not get right now (the checklist then says a named person may tick them)."""
    return not BY_KEY[item.key].system or item.detail.endswith("a named person may tick it")


def _checklist(svc, st_, model: str) -> None:
    items = pd.DataFrame([i.model_dump() for i in st_.checklist])
    with st.expander(f"Checklist ({int(items['done'].sum())}/{len(items)} done)",
                     expanded=st_.phase == "awaiting-approval"):
        st.dataframe(items[["section", "text", "required", "done", "by", "detail"]], hide_index=True,
                     width="stretch")
        open_items = [i.key for i in st_.checklist if not i.done and _person_may_tick(i)]
        if ui.can("rollout.approve") and open_items and st_.phase not in ("promoted", "rolled-back"):
            pick = st.multiselect("Tick items you have verified", open_items, key=f"tick_{model}")
            if pick and st.button("Tick", key=f"tickbtn_{model}"):
                _do(svc, "tick", model, items=pick)


def _guards(st_, model: str) -> None:
    spec = data.store().active().canary_for(model)
    g = st_.guards
    if g is not None:
        (st.success if g.status == "pass" else st.error if g.status == "breach" else st.info)(f"guards: {g.status}: {g.summary}")
    df = data.arm_guard_series(data.settings().db_url, model, 1800, 30)
    if df.empty:
        st.caption("no canary traffic logged in the last 30 min")
        return
    limits = spec.guards if spec else None
    a, b, c = st.columns(3)
    a.altair_chart(charts.guard_metric(df, "error_rate", limits.max_error_rate if limits else None),
                   width="stretch")
    b.altair_chart(charts.guard_metric(df, "p95_latency_ms", limits.max_p95_latency_ratio if limits else None,
                                       ratio=True), width="stretch")
    c.altair_chart(charts.guard_metric(df, "p95_ttft_ms", limits.max_ttft_ratio if limits else None, ratio=True),
                   width="stretch")


def _start(svc, policy) -> None:
    for spec in policy.canaries:
        st.markdown(f"Policy version {policy.version} defines a canary for **{spec.model}**: "
                    f"{spec.candidate} vs {spec.baseline}, steps {', '.join(f'{x:g}' for x in spec.steps)} %")
        if ui.can("rollout.start") and st.button(f"Start rollout of {spec.candidate}", key=f"start_{spec.model}"):
            _do(svc, "start", spec.model, candidate=spec.candidate)


def render() -> None:
    st.title("Rollouts")
    ui.flash()
    svc = service()
    policy = data.store().active()
    rows = svc.list()
    models = list(dict.fromkeys([r.model for r in rows] + [c.model for c in policy.canaries]))
    if not models:
        st.info(f"no rollouts, and the active policy (version {policy.version}) defines no canary; add one under "
                "`canaries` in a new policy version (model, baseline, candidate, steps, guards)")
        return
    for model in models:
        st.header(model)
        try:
            st_ = svc.status(model)
        except Exception:  # noqa: BLE001 - no rollout of this model yet
            _start(svc, policy)
            continue
        m = st.columns(4)
        m[0].metric("phase", st_.phase)
        m[1].metric("candidate share", f"{st_.percent:g} %")
        m[2].metric("step", f"{st_.step_index + 1} / {len(st_.steps)}")
        m[3].metric("policy version", st_.policy_version or "-")
        st.caption(f"{st_.candidate} vs {st_.baseline} · started by {st_.started_by} · approved by "
                   f"{st_.approved_by or '-'} · gate: {st_.gate}" + (f" · aborted: {st_.aborted_reason}"
                                                                     if st_.aborted_reason else ""))
        st.progress(min(st_.percent / 100, 1.0), text=" → ".join(
            f"**{x:g}%**" if i == st_.step_index else f"{x:g}%" for i, x in enumerate(st_.steps)))
        _buttons(svc, st_, model)
        _guards(st_, model)
        _checklist(svc, st_, model)
        st.subheader("Actions")
        st.dataframe(timeline(st_), hide_index=True, width="stretch")
        if st_.phase in ("promoted", "rolled-back"):
            _start(svc, policy)
