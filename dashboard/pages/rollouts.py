"""Rollouts: per model, the canary's phase, percent and step timeline; next step / pause / resume / promote
(operator), approve and checklist (reviewer), a prominent one-click Rollback with a confirm; guard metrics
per arm with their limits drawn; and every action on the rollout."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import actions, charts, controller_status, data, fmt, ui
from quantroute.rollout.checklist import BY_KEY

GUARD_WINDOW_S = 1800
FAILED = {"start": "start the rollout", "check_gate": "check the eval gate", "approve": "approve the rollout",
          "step": "take the next step", "pause": "pause the rollout", "resume": "resume the rollout",
          "promote": "promote the candidate", "rollback": "roll the rollout back", "tick": "tick the items"}


def service():
    return actions.rollout_service(data.store(), data.router())


def _do(svc, action: str, model: str, **kw) -> None:
    me = ui.user().name
    items = kw.get("items")
    ui.run_action(actions.rollout_action, service=svc, actor=me, action=action, model=model,
                  done=lambda st_: fmt.rollout_done(action, st_, me, items=items), failed=FAILED[action], **kw)
    st.rerun()


def _pcts(before, after) -> str:
    b = fmt.pct(before) if before is not None else fmt.DASH
    return fmt.change(b, fmt.pct(after) if after is not None else b)


def timeline(status) -> pd.DataFrame:
    """Every action on the rollout, newest first, in human units (no None, no ISO timestamps)."""
    rows = [{"at": fmt.when(e["at"]), "who": e["actor"],
             "action": e["action"].replace("_", " ") + (" (refused)" if e["refused"] else ""),
             "phase": fmt.change(e.get("phase_before") or fmt.DASH, e.get("phase_after") or fmt.DASH),
             "candidate share": _pcts(e.get("percent_before"), e.get("percent_after")),
             "policy version": fmt.change(fmt.version(e.get("version_before")), fmt.version(e.get("version_after"))),
             "message": e["message"]}
            for e in status.events]
    return pd.DataFrame(rows[::-1])


def guard_sentence(g) -> str:
    """The guard verdict as one sentence ("Guards pass: ...", not "guards: pass: pass (...)")."""
    summary = g.summary
    if g.status == "pass" and summary.startswith("pass "):
        summary = summary[len("pass "):].strip()
    head = {"pass": "Guards pass", "breach": "Guards breached", "inconclusive": "Guards inconclusive"}[g.status]
    return f"{head}: {summary}"


def _buttons(svc, st_, model: str) -> None:
    phase = st_.phase
    me = ui.user()
    live = phase not in ("promoted", "rolled-back", "rolling-back")
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
        ui.table(items[["section", "text", "required", "done", "by", "detail"]], f"checklist-{model}")
        open_items = [i.key for i in st_.checklist if not i.done and _person_may_tick(i)]
        if ui.can("rollout.approve") and open_items and st_.phase not in ("promoted", "rolled-back"):
            # the same sentences as the table beside it; the key is what the service stores
            pick = st.multiselect("Tick items you have verified", open_items, key=f"tick_{model}",
                                  format_func=lambda k: BY_KEY[k].text)
            if pick and st.button("Tick", key=f"tickbtn_{model}"):
                _do(svc, "tick", model, items=pick)


def _guards(st_, model: str) -> None:
    spec = data.store().active().canary_for(model)
    g = st_.guards
    if g is not None:
        (st.success if g.status == "pass" else st.error if g.status == "breach" else st.info)(guard_sentence(g))
        if g.judgement is not None:
            _judgement(g.judgement)
    df = data.arm_guard_series(data.settings().db_url, model, GUARD_WINDOW_S, 30)
    if df.empty:
        st.caption("no canary traffic logged in the last 30 min")
        return
    limits = spec.guards if spec else None
    if limits is not None and limits.judge is not None:
        limits = None  # the statistical form has no ratio limits to draw on the per-arm series
    end = pd.Timestamp.now(tz="UTC")
    window = (end - pd.Timedelta(seconds=GUARD_WINDOW_S), end)  # the three charts share one time axis
    a, b, c = st.columns(3)
    a.altair_chart(charts.guard_metric(df, "error_rate", limits.max_error_rate if limits else None, window=window),
                   width="stretch")
    b.altair_chart(charts.guard_metric(df, "p95_latency_ms", limits.max_p95_latency_ratio if limits else None,
                                       ratio=True, window=window), width="stretch")
    c.altair_chart(charts.guard_metric(df, "p95_ttft_ms", limits.max_ttft_ratio if limits else None, ratio=True,
                                       window=window), width="stretch")


def _judgement(j) -> None:
    """Why the step holds, advances or rolls back: each metric's effect with its interval against the allowed band,
    its verdict, and the sample still needed."""
    st.markdown(f"**Judge: {j.verdict}** (score {j.score:g}, {100 * j.confidence:g} % confidence, "
                f"{j.candidate_requests} candidate requests)" + (f" · {j.needs}" if j.needs else ""))
    frame = charts.judge_frame(j.model_dump(mode="json"))
    cols = st.columns(max(1, len(frame)))
    for col, (_, row) in zip(cols, frame.iterrows()):
        col.altair_chart(charts.judge_effect(row), width="stretch")
    st.dataframe(frame, hide_index=True, width="stretch")


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
    controller_status.render(live=any(r.phase not in ("promoted", "rolled-back") for r in rows))
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
        m = st.columns([4, 2, 2, 2])
        m[0].metric("phase", st_.phase)  # the widest column: "awaiting-approval" must not be cut
        m[1].metric("candidate share", fmt.pct(st_.percent))
        m[2].metric("step", fmt.step_text(st_))
        m[3].metric("policy version", fmt.version(st_.policy_version))
        st.caption(f"{st_.candidate} vs {st_.baseline} · started by {st_.started_by} "
                   f"{fmt.when(st_.started_at)} · approved by {st_.approved_by or 'nobody yet'} · gate: {st_.gate}"
                   + (f" · ended: {st_.aborted_reason}" if st_.aborted_reason else ""))
        st.progress(min(st_.percent / 100, 1.0), text=" → ".join(
            f"**{x:g}%**" if i == st_.step_index else f"{x:g}%" for i, x in enumerate(st_.steps)))
        _buttons(svc, st_, model)
        _guards(st_, model)
        _checklist(svc, st_, model)
        st.subheader("Actions")
        ui.table(timeline(st_), f"rollout-{st_.id}-actions")
        if st_.phase in ("promoted", "rolled-back"):
            _start(svc, policy)
