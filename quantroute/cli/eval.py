"""`quantroute eval`: paired evals of a candidate deployment against its baseline, and the eval gate.
Thin: parsing and printing only; the work is in quantroute.evals."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console, JustifyMethod
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from quantroute.evals.gate import GateConfig, parse_category_thresholds
from quantroute.evals.runs import DEFAULT_RUNS_DIR, RunComparison, RunView
from quantroute.evals.suite import SuiteError, load_suite


def _console() -> Console:
    # The table has ten columns; below 120 characters (CI logs, pipes) rich would truncate category names.
    console = Console()
    return console if console.width >= 120 else Console(width=120)


def _engine(db_url: str | None):
    from quantroute.cli.database import open_engine

    return open_engine(db_url)


def _policy(policy_file: str | None, policies_dir: str, engine, console: Console) -> Any | None:
    """The policy whose `deployments` describe the arms' artifacts: --policy FILE, else the active version."""
    try:
        if policy_file:
            from quantroute.policy.loader import load_policy

            return load_policy(policy_file)
        if Path(policies_dir).is_dir():
            from quantroute.policy.store import PolicyStore

            return PolicyStore(policies_dir, engine).active()
    except Exception as e:  # noqa: BLE001 - metadata is a nicety: fall back to what the endpoints report
        if policy_file:
            raise click.ClickException(f"--policy {policy_file}: {e}") from None
        console.print(f"[yellow]policy not used ({e}); artifact metadata comes from the endpoints[/yellow]")
    return None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}"


def _delta(x: float) -> str:
    style = "red" if x < -1e-12 else ("green" if x > 1e-12 else "")
    text = f"{x * 100:+.1f}"
    return f"[{style}]{text}[/{style}]" if style else text


def print_view(view: RunView, console: Console) -> None:
    run = view.run
    b, c = run["baseline"], run["candidate"]
    console.print(f"[bold]eval run {run['id']}[/bold]  suite {run['suite_name']} ({run['n_items']} items, "
                  f"{run['suite_hash'][:19]})  code {run['code_version'][:12]}")
    for arm in (b, c):
        art = arm.get("artifact", {})
        console.print(f"  {arm['name']:<9} {arm['deployment']}  tier={arm.get('tier') or '?'}  "
                      f"format={art.get('format', '?')} method={art.get('method', '?')} "
                      f"calibration={art.get('calibration_set') or '-'} checksum={str(art.get('checksum') or '-')[:19]}"
                      f"  [dim]({arm.get('artifact_source')})[/dim]")
    t = Table(title="baseline vs candidate (pass rate %, delta in points)", show_lines=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("category", "left"), ("n", "right"), ("baseline", "right"), ("candidate", "right"), ("delta", "right"),
        ("95% CI", "right"), ("McNemar p", "right"), ("only cand. fail", "right"), ("only base fail", "right"),
        ("retry % b/c", "right"))
    for col, just in columns:
        t.add_column(col, justify=just)
    failing = {r.scope for r in view.verdict.reasons if r.check in ("category", "overall")}
    for comp in [*view.report.categories, view.report.overall]:
        name = f"[bold red]{comp.name}[/bold red]" if comp.name in failing else comp.name
        if comp.name == "overall":
            t.add_section()
            name = f"[bold]{name}[/bold]"
        t.add_row(name, str(comp.n), _pct(comp.base_rate), _pct(comp.cand_rate), _delta(comp.delta),
                  f"[{comp.ci_low * 100:+.1f}, {comp.ci_high * 100:+.1f}]", f"{comp.p_value:.3g}",
                  str(comp.only_cand_fail), str(comp.only_base_fail),
                  f"{_pct(comp.base_retry_rate)}/{_pct(comp.cand_retry_rate)}")
    console.print(t)
    o = view.report.overall
    if o.validity_n:
        console.print(f"JSON/tool validity ({o.validity_n} items): baseline {_pct(o.base_validity)}%  "
                      f"candidate {_pct(o.cand_validity)}%  ({o.only_cand_invalid} invalid only in candidate)")
    if view.failing_only_in_candidate:
        console.print(f"[bold]failing only in the candidate[/bold] ({len(view.failing_only_in_candidate)}):")
        for d in view.failing_only_in_candidate[:12]:
            console.print(f"  {d.category:<12} {d.item_id:<28} {' '.join(d.candidate_detail.split())[:90]}",
                          markup=False)
    for note in view.verdict.notes:
        console.print(f"[dim]note: {note}[/dim]")
    style = "bold green" if view.verdict.passed else "bold red"
    console.print(f"[{style}]gate: {view.verdict.summary()}[/{style}]")


@click.group("eval")
def eval_group() -> None:
    """Paired evals (baseline vs candidate deployment) and the eval gate."""


def _gate(threshold: float, category_threshold: tuple[str, ...], validity_threshold: float,
          min_items: int) -> GateConfig:
    try:
        cats = parse_category_thresholds(category_threshold)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--category-threshold") from None
    return GateConfig(threshold=threshold, category_thresholds=cats, validity_threshold=validity_threshold,
                      min_items=min_items)


@eval_group.command("run")
@click.option("--suite", "suite_path", required=True, type=click.Path(dir_okay=False), help="JSONL suite file.")
@click.option("--baseline", required=True,
              help="a registered deployment id (e.g. the fp16 one), or URL[#deployment] (operators; recorded)")
@click.option("--candidate", required=True,
              help="a registered deployment id (e.g. an int4 one), or URL[#deployment] (operators; recorded)")
@click.option("--concurrency", default=8, show_default=True, type=click.IntRange(1, 256),
              help="Requests in flight per arm.")
@click.option("--threshold", default=0.02, show_default=True, type=click.FloatRange(0, 1),
              help="Largest allowed overall drop, as a fraction (0.02 = 2 points).")
@click.option("--category-threshold", multiple=True, metavar="CATEGORY=DROP",
              help="Per-category largest drop, e.g. math=0.03 (repeatable; default: --threshold).")
@click.option("--validity-threshold", default=0.0, show_default=True, type=click.FloatRange(0, 1),
              help="Largest allowed drop of JSON/tool-call validity.")
@click.option("--min-items", default=2, show_default=True, type=click.IntRange(1),
              help="Smallest net number of items that can fail a check (one item in a small category is noise).")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds per request.")
@click.option("--retries", default=2, show_default=True, type=click.IntRange(0, 10), help="Extra attempts per request.")
@click.option("--seed", default=0, show_default=True, help="Bootstrap seed.")
@click.option("--policy", "policy_file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="Policy file with the deployments' artifact metadata (default: the active version).")
@click.option("--policies-dir", default="policies", show_default=True)
@click.option("--runs-dir", default=str(DEFAULT_RUNS_DIR), show_default=True)
@click.option("--db", "db_url", default=None, help="Database URL (default: $DATABASE_URL or data/quantroute.db).")
def run_cmd(suite_path: str, baseline: str, candidate: str, concurrency: int, threshold: float,
            category_threshold: tuple[str, ...], validity_threshold: float, min_items: int, timeout: float,
            retries: int, seed: int, policy_file: str | None, policies_dir: str, runs_dir: str,
            db_url: str | None) -> None:
    """Ask every suite item of both arms, grade, compare, gate, as you (QUANTROUTE_TOKEN or QUANTROUTE_USER).
    A deployment id resolves to a node registered for it; only such runs can open a rollout's eval gate.
    Exits 1 when the gate fails."""
    from quantroute.auth import PermissionDenied
    from quantroute.cli.identity import acting_user
    from quantroute.evals.runner import EvalSetupError, RunSettings
    from quantroute.evals.runs import start_run
    from quantroute.evals.targets import registered_nodes, resolve_targets
    from quantroute.tracing import Tracing, TracingUnavailable

    console = _console()
    try:
        suite = load_suite(suite_path)
        tracing = Tracing.from_env("quantroute-eval")  # the run as one trace, when OTEL_* variables ask for it
    except (SuiteError, TracingUnavailable) as e:
        raise click.ClickException(str(e)) from None
    gate = _gate(threshold, category_threshold, validity_threshold, min_items)
    engine = _engine(db_url)
    try:
        targets = resolve_targets(engine, actor=acting_user(engine), baseline=baseline, candidate=candidate,
                                  registered=registered_nodes(engine))
    except (PermissionDenied, EvalSetupError) as e:
        raise click.ClickException(str(e)) from None
    policy = _policy(policy_file, policies_dir, engine, console)
    settings = RunSettings(concurrency=concurrency, timeout_s=timeout, retries=retries)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(f"{suite.name}: {len(suite.items)} items x 2 arms", total=2 * len(suite.items))
        try:
            view = start_run(suite=suite, baseline=targets.baseline, candidate=targets.candidate, engine=engine,
                             settings=settings, gate=gate, policy=policy, runs_dir=Path(runs_dir), seed=seed,
                             progress=lambda done, total: bar.update(task, completed=done),
                             source=targets.source, started_by=targets.started_by, tracing=tracing)
        except EvalSetupError as e:
            raise click.ClickException(str(e)) from None
        finally:
            if tracing is not None:
                tracing.shutdown()
    print_view(view, console)
    console.print(f"[dim]results: {view.run['results_path']}[/dim]")
    sys.exit(0 if view.verdict.passed else 1)


@eval_group.command("report")
@click.argument("run_id", type=int)
@click.option("--threshold", default=None, type=click.FloatRange(0, 1), help="Re-gate with another threshold.")
@click.option("--category-threshold", multiple=True, metavar="CATEGORY=DROP")
@click.option("--db", "db_url", default=None)
def report_cmd(run_id: int, threshold: float | None, category_threshold: tuple[str, ...], db_url: str | None) -> None:
    """Print a stored run's table and gate verdict. Exits 1 when the gate fails."""
    from quantroute.evals.runs import load_run

    engine = _engine(db_url)
    gate = None
    if threshold is not None or category_threshold:
        gate = _gate(threshold if threshold is not None else 0.02, category_threshold, 0.0, 2)
    try:
        view = load_run(engine, run_id, gate=gate)
    except LookupError as e:
        raise click.ClickException(str(e)) from None
    print_view(view, _console())
    sys.exit(0 if view.verdict.passed else 1)


@eval_group.command("list")
@click.option("--limit", default=20, show_default=True)
@click.option("--db", "db_url", default=None)
def list_cmd(limit: int, db_url: str | None) -> None:
    """Recent runs."""
    from quantroute.evals.runs import list_runs

    t = Table("run", "created", "suite", "baseline", "candidate", "tier", "status", "gate")
    for r in list_runs(_engine(db_url), limit=limit):
        gate = {True: "[green]pass[/green]", False: "[red]fail[/red]", None: "-"}[r.gate_passed]
        t.add_row(str(r.id), r.created_at.strftime("%Y-%m-%d %H:%M"), r.suite_name, r.baseline_deployment,
                  r.candidate_deployment, r.candidate_tier or "?", r.status, gate)
    _console().print(t)


def print_comparison(cmp: RunComparison, console: Console) -> None:
    a, b = cmp.a.run["id"], cmp.b.run["id"]
    if not cmp.same_suite:
        console.print("[yellow]the runs used different suites (hashes differ): "
                      "rates are not strictly comparable[/yellow]")
    for line in cmp.arm_changes or ["arms and artifacts: unchanged"]:
        console.print(f"  {line}")
    t = Table(title=f"run {a} -> run {b} (candidate pass rate %, delta vs own baseline in points)")
    for col in ("category", f"cand {a}", f"cand {b}", f"delta {a}", f"delta {b}", "change"):
        t.add_column(col, justify="left" if col == "category" else "right")
    rows_b = {c.name: c for c in [*cmp.b.report.categories, cmp.b.report.overall]}
    for ca in [*cmp.a.report.categories, cmp.a.report.overall]:
        cb = rows_b.get(ca.name)
        if cb is None:
            continue
        t.add_row(ca.name, _pct(ca.cand_rate), _pct(cb.cand_rate), _delta(ca.delta), _delta(cb.delta),
                  _delta(cb.delta - ca.delta))
    console.print(t)
    console.print(f"gate: run {a} {'PASS' if cmp.a.verdict.passed else 'FAIL'} -> run {b} "
                  f"{'PASS' if cmp.b.verdict.passed else 'FAIL'}")
    for ch in cmp.item_changes[:30]:
        word = "fixed" if ch.after else "broke"
        console.print(f"  {ch.arm:<9} {ch.category:<12} {ch.item_id:<28} {word}", markup=False)


@eval_group.command("compare")
@click.argument("run_a", type=int)
@click.argument("run_b", type=int)
@click.option("--db", "db_url", default=None)
def compare_cmd(run_a: int, run_b: int, db_url: str | None) -> None:
    """What changed between two runs: artifacts, per-category rates, items that flipped."""
    from quantroute.evals.runs import compare_runs

    try:
        cmp = compare_runs(_engine(db_url), run_a, run_b)
    except LookupError as e:
        raise click.ClickException(str(e)) from None
    print_comparison(cmp, _console())


@eval_group.command("check")
@click.argument("suite_path", type=click.Path(dir_okay=False))
def check_cmd(suite_path: str) -> None:
    """Validate a suite and grade its own answers: every `reference` must pass, every `wrong` must fail."""
    from quantroute.evals.graders import grade

    try:
        suite = load_suite(suite_path)
    except SuiteError as e:
        raise click.ClickException(str(e)) from None
    problems = []
    for item in suite.items:
        g = grade(item, item.reference)
        if not g.passed:
            problems.append(f"{item.id}: reference fails its grader ({g.detail})")
        if item.wrong is not None and grade(item, item.wrong).passed:
            problems.append(f"{item.id}: wrong passes its grader")
    counts = {c: sum(1 for i in suite.items if i.category == c) for c in suite.categories()}
    click.echo(f"{suite.path}: {len(suite.items)} items, {suite.hash}")
    click.echo("  " + ", ".join(f"{c}={n}" for c, n in counts.items()))
    for p in problems:
        click.echo(f"  {p}", err=True)
    sys.exit(1 if problems else 0)
