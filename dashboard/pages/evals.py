"""Evals: paired runs (baseline vs candidate on the same items). Per-category pass rates with CI bars, the
delta table, the gate verdict with its reasons, McNemar p, JSON/tool validity, retry rate, and the items that
fail only in the candidate with both answers side by side. Analysts (and operators) start new runs here."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import actions, charts, data, ui


def delta_frame(report: dict) -> pd.DataFrame:
    rows = []
    for c in [report["overall"], *report["categories"]]:
        rows.append({"category": c["name"], "n": c["n"], "baseline": c["base_rate"], "candidate": c["cand_rate"],
                     "delta (pts)": 100 * c["delta"], "CI low": 100 * c["ci_low"], "CI high": 100 * c["ci_high"],
                     "McNemar p": c["p_value"], "only cand. fails": c["only_cand_fail"],
                     "only base fails": c["only_base_fail"],
                     "validity base": c.get("base_validity"), "validity cand.": c.get("cand_validity"),
                     "retry base": c["base_retry_rate"], "retry cand.": c["cand_retry_rate"]})
    return pd.DataFrame(rows)


def _run_view(view: dict) -> None:
    run, report, verdict = view["run"], view["report"], view["verdict"]
    o = report["overall"]
    (st.success if verdict["passed"] else st.error)(
        f"Gate {'PASS' if verdict['passed'] else 'FAIL'}: {run['candidate_deployment']} "
        f"({run.get('candidate_tier') or '?'}) vs {run['baseline_deployment']} on {run['suite_name']}")
    for r in verdict["reasons"]:
        st.markdown(f"- {r['message']}")
    for note in verdict.get("notes", []):
        st.caption(note)
    m = st.columns(5)
    m[0].metric("overall delta", f"{100 * o['delta']:+.1f} pts", f"CI {100 * o['ci_low']:+.1f} … {100 * o['ci_high']:+.1f}",
                delta_color="off")
    m[1].metric("McNemar p", f"{o['p_value']:.3f}")
    m[2].metric("JSON/tool validity", "-" if o.get("cand_validity") is None else
                f"{o['cand_validity']:.0%} vs {o['base_validity']:.0%}")
    m[3].metric("retry rate (cand.)", f"{o['cand_retry_rate']:.1%}", f"base {o['base_retry_rate']:.1%}", delta_color="off")
    m[4].metric("items", o["n"])
    st.altair_chart(charts.eval_categories(charts.category_frame(report)))
    st.dataframe(delta_frame(report).round(3), hide_index=True, width="stretch")
    fails = view["failing_only_in_candidate"]
    st.subheader(f"Failing only in the candidate ({len(fails)})")
    for f in fails[:50]:
        with st.expander(f"{f['item_id']} · {f['category']}"):
            a, b = st.columns(2)
            a.markdown("**baseline**")
            a.code(f["baseline_answer"] or "(empty)", language=None)
            a.caption(f["baseline_detail"])
            b.markdown("**candidate**")
            b.code(f["candidate_answer"] or "(empty)", language=None)
            b.caption(f["candidate_detail"])


def _new_run() -> None:
    s = data.settings()
    policy = data.store().active()
    deps = sorted({d for t in policy.tiers for ds in t.deployments.values() for d in ds})
    top = policy.tier_ladder()[0]
    base_dep = next(iter(policy.deployments_for(next(iter(sorted(policy.models()))), top)), deps[0] if deps else "")
    with st.form("new_eval"):
        st.markdown("**Start a paired run** (each endpoint is `URL#deployment`; through the router by default)")
        url = st.text_input("Endpoint URL", value=s.router_url or "http://127.0.0.1:8080")
        c1, c2 = st.columns(2)
        baseline = c1.selectbox("Baseline deployment", deps, index=deps.index(base_dep) if base_dep in deps else 0)
        candidate = c2.selectbox("Candidate deployment", deps, index=len(deps) - 1 if deps else 0)
        suite = st.text_input("Suite", value=str(s.eval_suite))
        go = st.form_submit_button("Start run")
    if go:
        bar = st.progress(0.0, text="starting…")

        def progress(done: int, total: int) -> None:
            bar.progress(done / total, text=f"{done} / {total} answers")

        view = ui.run_action("eval run", actions.run_eval, engine=data.engine(), actor=ui.user().name,
                             suite_path=suite, baseline=f"{url}#{baseline}", candidate=f"{url}#{candidate}",
                             runs_dir=str(s.eval_runs_dir), progress=progress)
        if view:
            st.session_state["eval_pick"] = view["run"]["id"]
        st.rerun()


def render() -> None:
    st.title("Evals")
    ui.flash()
    s = data.settings()
    runs = data.eval_runs(s.db_url)
    if ui.can("eval.run"):
        with st.expander("New run", expanded=runs.empty):
            _new_run()
    if runs.empty:
        st.info("no eval runs yet")
        return
    st.dataframe(runs, hide_index=True, width="stretch")
    done = runs[runs["status"] == "done"]["id"].tolist()
    if not done:
        return
    pick = st.session_state.get("eval_pick")
    run_id = st.selectbox("Run", done, index=done.index(pick) if pick in done else 0,
                          format_func=lambda i: f"#{i}: " + " vs ".join(
                              runs.loc[runs["id"] == i, ["candidate", "baseline"]].iloc[0].astype(str)))
    _run_view(data.eval_run(s.db_url, int(run_id)))
