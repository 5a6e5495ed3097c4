"""Evals: paired runs (baseline vs candidate on the same items). Per-category pass rates with CI bars, the
delta table, the gate verdict with its reasons, McNemar p, JSON/tool validity, retry rate, and the items that
fail only in the candidate with both answers side by side. Analysts (and operators) start new runs here."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import actions, charts, data, fmt, ui
from dashboard.pages import agreement

_RATE = st.column_config.NumberColumn(format="percent")
_PTS = st.column_config.NumberColumn(format="%+.1f")
DELTA_COLUMNS = {"baseline": _RATE, "candidate": _RATE, "delta (pts)": _PTS, "CI low": _PTS, "CI high": _PTS,
                 "McNemar p": st.column_config.NumberColumn(format="%.3f"), "retry base": _RATE,
                 "retry cand.": _RATE}


def _share(x: float | None) -> str:
    return fmt.DASH if x is None else f"{x:.0%}"


def delta_frame(report: dict) -> pd.DataFrame:
    rows = []
    for c in [report["overall"], *report["categories"]]:
        rows.append({"category": c["name"], "n": c["n"], "baseline": c["base_rate"], "candidate": c["cand_rate"],
                     "delta (pts)": 100 * c["delta"], "CI low": 100 * c["ci_low"], "CI high": 100 * c["ci_high"],
                     "McNemar p": c["p_value"], "only cand. fails": c["only_cand_fail"],
                     "only base fails": c["only_base_fail"],
                     # only JSON/tool items have a validity: "–" elsewhere (a blank cell would read "None")
                     "validity base": _share(c.get("base_validity")), "validity cand.": _share(c.get("cand_validity")),
                     "retry base": c["base_retry_rate"], "retry cand.": c["cand_retry_rate"]})
    return pd.DataFrame(rows)


def overall_metric(o: dict) -> tuple[str, str, str]:
    """(label, value, delta) of the headline metric: the candidate's overall pass rate, and its difference from
    the baseline with the 95 % CI. The delta text starts with the difference's sign, which is what Streamlit
    draws the arrow from (a text starting with "CI" always got an up arrow, even for a negative interval)."""
    d, lo, hi = 100 * o["delta"], 100 * o["ci_low"], 100 * o["ci_high"]
    return ("overall pass rate (candidate)", f"{o['cand_rate']:.1%}",
            f"{d:+.1f} pts vs baseline (95 % CI {lo:+.1f} to {hi:+.1f})")  # the column is wide enough for it


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
    m = st.columns([3, 1.3, 2, 1.6, 1])  # wide enough that the CI and the validity pair are not cut
    label, value, delta = overall_metric(o)
    m[0].metric(label, value, delta, delta_arrow="auto" if abs(o["delta"]) > 1e-12 else "off")
    m[1].metric("McNemar p", f"{o['p_value']:.3f}")
    m[2].metric("JSON/tool validity", "-" if o.get("cand_validity") is None else
                f"{o['cand_validity']:.0%} vs {o['base_validity']:.0%}")
    m[3].metric("retry rate (cand.)", f"{o['cand_retry_rate']:.1%}", f"base {o['base_retry_rate']:.1%}",
                delta_color="off")
    m[4].metric("items", o["n"])
    st.altair_chart(charts.eval_categories(charts.category_frame(report)))
    ui.table(delta_frame(report).round(3), f"eval-run-{run['id']}-categories", column_config=DELTA_COLUMNS)
    fails = view["failing_only_in_candidate"]
    prompts = data.suite_prompts(run.get("suite_path") or "")
    st.subheader(f"Failing only in the candidate ({len(fails)})")
    for f in fails[:50]:
        with st.expander(f"{f['item_id']} · {f['category']}"):
            st.markdown("**prompt**")
            st.code(prompts.get(f["item_id"], f"(not available: the suite file {run.get('suite_path') or '?'} "
                                              "is gone or changed)"), language=None, wrap_lines=True)
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
    router = s.router_url or "http://127.0.0.1:8080"
    with st.form("new_eval"):
        st.markdown(f"**Start a paired run** on the fleet's deployments (through the router, {router})")
        c1, c2 = st.columns(2)
        baseline = c1.selectbox("Baseline deployment", deps, index=deps.index(base_dep) if base_dep in deps else 0)
        candidate = c2.selectbox("Candidate deployment", deps, index=len(deps) - 1 if deps else 0)
        free = ""
        if ui.can("eval.free_url"):  # any other server could answer anything: operators only, and recorded
            free = st.text_input("Or a free candidate endpoint `URL#deployment` (operator; recorded, never opens "
                                 "a rollout gate)", value="")
        suite = st.text_input("Suite", value=str(s.eval_suite))
        go = st.form_submit_button("Start run")
    if go:
        bar = st.progress(0.0, text="starting…")

        def progress(done: int, total: int) -> None:
            bar.progress(done / total, text=f"{done} / {total} answers")

        view = ui.run_action(actions.run_eval, engine=data.engine(), actor=ui.user().name,
                             suite_path=suite, baseline=baseline, candidate=free.strip() or candidate,
                             registered={d: router for d in deps},
                             runs_dir=str(s.eval_runs_dir), progress=progress, failed="run the eval",
                             done=lambda v: (f"Eval run #{v['run']['id']} finished: gate "
                                             f"{'passed' if v['verdict']['passed'] else 'failed'}, {candidate} "
                                             f"{100 * v['report']['overall']['delta']:+.1f} pts vs {baseline} "
                                             f"over {v['report']['overall']['n']} items."))
        if view:
            st.session_state["eval_pick"] = view["run"]["id"]
        st.rerun()


def render() -> None:
    st.title("Evals")
    ui.flash()
    # tracked tabs: only the open one runs (the live agreement reads every shadow pair of its window)
    runs_tab, live_tab = st.tabs(["Paired runs", "Live agreement"], key="evals_section", on_change="rerun")
    if runs_tab.open:
        with runs_tab:
            _runs()
    if live_tab.open:
        with live_tab:
            agreement.render()


def _runs() -> None:
    s = data.settings()
    runs = data.eval_runs(s.db_url)
    if ui.can("eval.run"):
        with st.expander("New run", expanded=runs.empty):
            _new_run()
    if runs.empty:
        st.info("no eval runs yet")
        return
    ui.table(runs_frame(runs), "eval-runs")
    done = runs[runs["status"] == "done"]["id"].tolist()
    if not done:
        return

    def name(i: int) -> str:
        r = runs.loc[runs["id"] == i].iloc[0]
        return f"#{i}: {r['candidate']} vs {r['baseline']}"

    one, two = st.tabs(["One run", "Compare two runs"], key="evals_view", on_change="rerun")
    with one:
        pick = st.session_state.get("eval_pick")
        run_id = st.selectbox("Run", done, index=done.index(pick) if pick in done else 0, format_func=name)
        _run_view(data.eval_run(s.db_url, int(run_id)))
    with two:
        if len(done) < 2:
            st.info("two finished runs are needed to compare")
            return
        c1, c2 = st.columns(2)
        a = c1.selectbox("Run A (before)", done, index=1, format_func=name, key="cmp_a")
        b = c2.selectbox("Run B (after)", done, index=0, format_func=name, key="cmp_b")
        if a == b:
            st.warning("pick two different runs")
            return
        _comparison(data.eval_comparison(s.db_url, int(a), int(b)))


def runs_frame(runs: pd.DataFrame) -> pd.DataFrame:
    out = fmt.whens(runs, "created_at").rename(columns={"created_at": "created", "candidate_tier": "candidate tier",
                                                        "gate_passed": "gate"})
    out["gate"] = out["gate"].map(lambda g: "pass" if g is True else "fail" if g is False else fmt.DASH)
    return out


def comparison_frame(cmp: dict) -> pd.DataFrame:
    """Per category: each run's pass rates and its delta against its own baseline, and B's delta minus A's."""
    a = {c["name"]: c for c in [cmp["a"]["report"]["overall"], *cmp["a"]["report"]["categories"]]}
    b = {c["name"]: c for c in [cmp["b"]["report"]["overall"], *cmp["b"]["report"]["categories"]]}
    rows = []
    for cat in [*a, *[k for k in b if k not in a]]:
        x, y = a.get(cat), b.get(cat)
        da = 100 * x["delta"] if x else None
        db = 100 * y["delta"] if y else None
        rows.append({"category": cat, "n (A)": x["n"] if x else 0, "n (B)": y["n"] if y else 0,
                     "A: candidate": x["cand_rate"] if x else None, "A: Δ vs baseline (pts)": da,
                     "B: candidate": y["cand_rate"] if y else None, "B: Δ vs baseline (pts)": db,
                     "B − A (pts)": (db - da) if da is not None and db is not None else None})
    return pd.DataFrame(rows)


def flips_frame(cmp: dict) -> pd.DataFrame:
    """Items whose verdict differs between the runs (per arm), as "pass → fail" sentences."""
    word = {True: "pass", False: "fail"}
    return pd.DataFrame([{"item": f["item_id"], "category": f["category"], "arm": f["arm"],
                          "A → B": f"{word[f['before']]} → {word[f['after']]}"} for f in cmp["item_changes"]],
                        columns=["item", "category", "arm", "A → B"])


def _comparison(cmp: dict) -> None:
    ra, rb = cmp["a"]["run"], cmp["b"]["run"]
    st.markdown(f"**A** #{ra['id']}: {ra['candidate_deployment']} vs {ra['baseline_deployment']} "
                f"({fmt.when(ra['created_at'])}) · **B** #{rb['id']}: {rb['candidate_deployment']} vs "
                f"{rb['baseline_deployment']} ({fmt.when(rb['created_at'])})")
    if not cmp["same_suite"]:
        st.warning("The runs used different suite contents: item-level changes cover only items in both.")
    for line in cmp["arm_changes"]:
        st.caption(line.replace("->", "→"))
    frame = comparison_frame(cmp)
    st.altair_chart(charts.comparison_deltas(frame), width="stretch")
    ui.table(frame.round(3), f"eval-compare-{ra['id']}-{rb['id']}")
    flips = flips_frame(cmp)
    cand = flips[flips["arm"] == "candidate"]
    st.subheader(f"Items whose candidate verdict changed ({len(cand)})")
    if cand.empty:
        st.caption("none: every item the candidates both answered got the same verdict")
    else:
        ui.table(cand, f"eval-compare-{ra['id']}-{rb['id']}-items")
    base = flips[flips["arm"] == "baseline"]
    if not base.empty:
        st.caption(f"{len(base)} item(s) also changed verdict on the baseline arm (sampling noise or a different "
                   "baseline): " + ", ".join(base["item"].head(20)))
