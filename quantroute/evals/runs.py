"""A stored paired-eval run: execute one (arms resolved, answers collected, statistics, gate, DB + JSONL),
load one back with its statistics and the items failing only in the candidate, list runs, compare two runs.
These are the functions the CLI and the dashboard call."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel
from sqlalchemy.engine import Engine

from quantroute.db import eval as db
from quantroute.db.engine import session as open_session
from quantroute.db.engine import stored_id
from quantroute.evals.gate import GateConfig, Verdict, evaluate
from quantroute.evals.runner import ItemResult, Progress, RunSettings, collect, parse_endpoint, resolve_arm
from quantroute.evals.stats import Pair, Report, build_report
from quantroute.evals.suite import CATEGORIES, VALIDITY_GRADERS, Suite
from quantroute.tiers import Tier
from quantroute.tracing import Tracing

DEFAULT_RUNS_DIR = Path("data/evals/runs")


class ItemDiff(BaseModel):
    """An item whose outcome differs between the arms, with both answers (what an analyst reads first)."""
    item_id: str
    category: str
    baseline_answer: str
    candidate_answer: str
    baseline_detail: str
    candidate_detail: str


class RunView(BaseModel):
    run: dict[str, Any]
    report: Report
    verdict: Verdict
    failing_only_in_candidate: list[ItemDiff]
    failing_only_in_baseline: list[ItemDiff]


def code_version() -> str:
    """The git commit when running from a checkout, else the installed package version."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return f"quantroute {metadata.version('quantroute')}"
    except metadata.PackageNotFoundError:
        return "unknown"


def _arm_pairs(rows: list[db.EvalResult]) -> Iterator[tuple[str, db.EvalResult, db.EvalResult]]:
    """(item id, baseline row, candidate row) for every item both arms answered."""
    by_item: dict[str, dict[str, db.EvalResult]] = {}
    for r in rows:
        by_item.setdefault(r.item_id, {})[r.arm] = r
    for item_id, arms in by_item.items():
        b, c = arms.get("baseline"), arms.get("candidate")
        if b is not None and c is not None:
            yield item_id, b, c


def pairs_from_rows(rows: list[db.EvalResult]) -> list[Pair]:
    pairs = []
    for item_id, b, c in _arm_pairs(rows):
        pairs.append(Pair(item_id=item_id, category=b.category, base_pass=b.passed, cand_pass=c.passed,
                          base_retry=b.needs_retry, cand_retry=c.needs_retry,
                          checks_validity=b.grader in VALIDITY_GRADERS, base_valid=b.valid, cand_valid=c.valid))
    return pairs


def _rows(run_id: int, suite: Suite, results: list[ItemResult]) -> list[db.EvalResult]:
    grader_of = {i.id: i.grader.type for i in suite.items}
    return [db.EvalResult(run_id=run_id, item_id=r.item_id, category=r.category, arm=r.arm,
                          grader=grader_of[r.item_id], deployment=r.answer.model, answer=r.answer.text,
                          finish_reason=r.answer.finish_reason, passed=r.grade.passed, valid=r.grade.valid,
                          needs_retry=r.grade.needs_retry, detail=r.grade.detail, error=r.answer.error,
                          attempts=r.answer.attempts, latency_ms=r.answer.latency_ms,
                          prompt_tokens=r.answer.prompt_tokens, completion_tokens=r.answer.completion_tokens)
            for r in results]


def _verdict(engine: Engine, report: Report, cfg: GateConfig, *, suite_hash: str, baseline: str,
             candidate_tier: Tier | None) -> Verdict:
    with open_session(engine) as s:
        passing = db.passing_runs_by_tier(session=s, suite_hash=suite_hash, baseline_deployment=baseline)
    return evaluate(report, cfg, candidate_tier=candidate_tier,
                    passing_runs={Tier(t): rid for t, rid in passing.items() if t in Tier._value2member_map_})


def _write_jsonl(path: Path, run: db.EvalRun, rows: list[db.EvalResult], report: Report, verdict: Verdict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"type": "run", **run.model_dump(mode="json", exclude={"report", "verdict"})}) + "\n")
        for r in rows:
            f.write(json.dumps({"type": "result", **r.model_dump(mode="json", exclude={"id"})},
                               ensure_ascii=False) + "\n")
        f.write(json.dumps({"type": "summary", "report": report.model_dump(mode="json"),
                            "verdict": verdict.model_dump(mode="json")}) + "\n")
    tmp.replace(path)


async def execute_run(*, suite: Suite, baseline: str, candidate: str, engine: Engine,
                      settings: RunSettings | None = None, gate: GateConfig | None = None, policy: Any | None = None,
                      runs_dir: Path = DEFAULT_RUNS_DIR, seed: int = 0, progress: Progress | None = None,
                      transport: httpx.AsyncBaseTransport | None = None, source: str = "url",
                      started_by: str = "", tracing: Tracing | None = None) -> RunView:
    """Run the suite against both endpoint specs (`URL[#deployment]`) and store everything. `source`: where the
    specs came from (`evals.targets`: "registered" only when the system resolved them; see resolve_targets).
    With `tracing`, the run is one trace: a span over it, one per answer (`collect`)."""
    if tracing is None:
        return await _execute_run(suite=suite, baseline=baseline, candidate=candidate, engine=engine,
                                  settings=settings, gate=gate, policy=policy, runs_dir=runs_dir, seed=seed,
                                  progress=progress, transport=transport, source=source, started_by=started_by)
    with tracing.span("quantroute.eval.run", {"quantroute.suite": suite.name, "quantroute.baseline": baseline,
                                              "quantroute.candidate": candidate, "quantroute.items": len(suite.items)}
                      ) as span:
        view = await _execute_run(suite=suite, baseline=baseline, candidate=candidate, engine=engine,
                                  settings=settings, gate=gate, policy=policy, runs_dir=runs_dir, seed=seed,
                                  progress=progress, transport=transport, source=source, started_by=started_by,
                                  tracing=tracing)
        Tracing.annotate(span, {"quantroute.run_id": view.run["id"], "quantroute.gate_passed": view.verdict.passed})
        return view


async def _execute_run(*, suite: Suite, baseline: str, candidate: str, engine: Engine, settings: RunSettings | None,
                       gate: GateConfig | None, policy: Any | None, runs_dir: Path, seed: int,
                       progress: Progress | None, transport: httpx.AsyncBaseTransport | None, source: str,
                       started_by: str, tracing: Tracing | None = None) -> RunView:
    settings, gate = settings or RunSettings(), gate or GateConfig()
    endpoints = (parse_endpoint(baseline), parse_endpoint(candidate))
    async with httpx.AsyncClient(transport=transport, timeout=settings.timeout_s) as client:
        arms = (await resolve_arm(client, "baseline", endpoints[0], policy),
                await resolve_arm(client, "candidate", endpoints[1], policy))
        with open_session(engine) as s:
            run = db.create_run(session=s, run=db.EvalRun(
                suite_name=suite.name, suite_path=suite.path, suite_hash=suite.hash, n_items=len(suite.items),
                baseline_deployment=arms[0].deployment, candidate_deployment=arms[1].deployment,
                candidate_tier=arms[1].tier.value if arms[1].tier else None,
                baseline=arms[0].model_dump(mode="json"), candidate=arms[1].model_dump(mode="json"),
                params={"settings": settings.model_dump(), "gate": gate.model_dump(), "seed": seed},
                code_version=code_version(), source=source, started_by=started_by))
        assert run.id is not None
        try:
            results = await collect(suite, arms, settings, progress=progress, client=client, tracing=tracing)
            rows = _rows(run.id, suite, results)
            report = build_report(pairs_from_rows(rows), category_order=list(CATEGORIES), seed=seed)
            verdict = _verdict(engine, report, gate, suite_hash=suite.hash, baseline=arms[0].deployment,
                               candidate_tier=arms[1].tier)
            path = Path(runs_dir) / f"run-{run.id:05d}-{suite.name}-{arms[1].deployment}.jsonl"
            with open_session(engine) as s:
                db.add_results(session=s, results=rows)
                run = db.finish_run(session=s, run_id=stored_id(run), status="done", gate_passed=verdict.passed,
                                    report=report.model_dump(mode="json"), verdict=verdict.model_dump(mode="json"),
                                    results_path=str(path))
            _write_jsonl(path, run, rows, report, verdict)
        except BaseException as e:
            with open_session(engine) as s:
                db.finish_run(session=s, run_id=stored_id(run), status="failed", error=f"{type(e).__name__}: {e}"[:500])
            raise
    return load_run(engine, stored_id(run))


def start_run(**kwargs: Any) -> RunView:
    """Synchronous entry for callers without an event loop (the CLI, the dashboard): same arguments as
    `execute_run`; `progress(done, total)` is called as answers come in."""
    return asyncio.run(execute_run(**kwargs))


def _diffs(rows: list[db.EvalResult], *, only_candidate: bool) -> list[ItemDiff]:
    out = []
    for item_id, b, c in _arm_pairs(rows):
        if (b.passed and not c.passed) if only_candidate else (c.passed and not b.passed):
            out.append(ItemDiff(item_id=item_id, category=b.category, baseline_answer=b.answer,
                                candidate_answer=c.answer, baseline_detail=b.detail or b.error,
                                candidate_detail=c.detail or c.error))
    return out


def load_run(engine: Engine, run_id: int, *, gate: GateConfig | None = None) -> RunView:
    """A stored run with statistics recomputed from its results (same seed, so the same CIs) and the gate
    re-evaluated with the stored configuration (or `gate`, to ask "would it pass at 3 points?")."""
    with open_session(engine) as s:
        run = db.get_run(session=s, run_id=run_id)
        if run is None:
            raise LookupError(f"no eval run {run_id}")
        rows = db.results_of(session=s, run_id=run_id)
    seed = int(run.params.get("seed", 0))
    report = build_report(pairs_from_rows(rows), category_order=list(CATEGORIES), seed=seed)
    if (gate is None and run.verdict is not None and run.report is not None
            and report.model_dump(mode="json") == run.report):
        verdict = Verdict.model_validate(run.verdict)
    else:
        cfg = gate or GateConfig.model_validate(run.params.get("gate", {}))
        tier = Tier(run.candidate_tier) if run.candidate_tier in Tier._value2member_map_ else None
        verdict = _verdict(engine, report, cfg, suite_hash=run.suite_hash, baseline=run.baseline_deployment,
                           candidate_tier=tier)
    return RunView(run=run.model_dump(mode="json"), report=report, verdict=verdict,
                   failing_only_in_candidate=_diffs(rows, only_candidate=True),
                   failing_only_in_baseline=_diffs(rows, only_candidate=False))


def list_runs(engine: Engine, *, limit: int = 100) -> list[db.EvalRun]:
    with open_session(engine) as s:
        return db.list_runs(session=s, limit=limit)


class ItemChange(BaseModel):
    item_id: str
    category: str
    arm: str
    before: bool  # passed in run A
    after: bool  # passed in run B


class RunComparison(BaseModel):
    a: RunView
    b: RunView
    same_suite: bool
    arm_changes: list[str]  # deployments or artifact fields that differ
    item_changes: list[ItemChange]


def compare_runs(engine: Engine, run_a: int, run_b: int) -> RunComparison:
    """What changed between two runs: arms and artifacts, per-category rates, and items that flipped."""
    a, b = load_run(engine, run_a), load_run(engine, run_b)
    changes = []
    for arm in ("baseline", "candidate"):
        x, y = a.run[arm], b.run[arm]
        if x.get("deployment") != y.get("deployment"):
            changes.append(f"{arm} deployment: {x.get('deployment')} -> {y.get('deployment')}")
        for k in sorted(set(x.get("artifact", {})) | set(y.get("artifact", {}))):
            va, vb = x.get("artifact", {}).get(k), y.get("artifact", {}).get(k)
            if va != vb:
                changes.append(f"{arm} {k}: {va} -> {vb}")
    with open_session(engine) as s:
        rows_a = {(r.item_id, r.arm): r for r in db.results_of(session=s, run_id=run_a)}
        rows_b = {(r.item_id, r.arm): r for r in db.results_of(session=s, run_id=run_b)}
    flips = [ItemChange(item_id=k[0], category=r.category, arm=k[1], before=rows_a[k].passed, after=r.passed)
             for k, r in rows_b.items() if k in rows_a and rows_a[k].passed != r.passed]
    return RunComparison(a=a, b=b, same_suite=a.run["suite_hash"] == b.run["suite_hash"], arm_changes=changes,
                         item_changes=sorted(flips, key=lambda f: (f.arm, f.category, f.item_id)))


def latest_done_run(engine: Engine, *, baseline: str, candidate: str,
                    suite_hash: str | None = None) -> db.EvalRun | None:
    """The newest finished run comparing `candidate` with `baseline` (on that suite, when given): where the
    fleet experiment reads a tier's per-category pass-rate deltas."""
    with open_session(engine) as s:
        for run in db.list_runs(session=s, limit=1000, candidate_deployment=candidate):
            if (run.baseline_deployment == baseline and run.status == "done" and run.report is not None
                    and (suite_hash is None or run.suite_hash == suite_hash)):
                return run
    return None
