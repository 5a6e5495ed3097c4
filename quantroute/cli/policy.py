"""`quantroute policy ...`: validate, explain, version, diff, approve, activate, roll back, import, verify."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

from quantroute.cli.identity import acting_user
from quantroute.policy.loader import PolicyValidationError, load_policy

if TYPE_CHECKING:  # imported lazily below: the CLI starts fast (quantroute/cli/main.py)
    from quantroute.policy.model import Policy
    from quantroute.policy.store import PolicyStore

DIR_OPT = click.option("--policies", "policies_dir", default=lambda: _env("QUANTROUTE_POLICIES", "policies"),
                       show_default="policies", type=click.Path(file_okay=False), help="policy versions directory")
DB_OPT = click.option("--db", "db_url", default=None,
                      help="database URL (default $DATABASE_URL or sqlite:///data/quantroute.db)")


def _env(name: str, default: str) -> str:
    import os

    return os.environ.get(name, default)


def _store(policies_dir: str, db_url: str | None) -> PolicyStore:
    from quantroute.cli.database import open_engine
    from quantroute.policy.store import PolicyStore

    return PolicyStore(Path(policies_dir), open_engine(db_url))


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _guard(fn):
    """Render the store's refusals as one clear line and exit 1 instead of a traceback."""
    import functools

    from quantroute.auth import PermissionDenied
    from quantroute.policy.store import PolicyStoreError

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            return fn(*a, **kw)
        except PolicyValidationError as e:
            click.echo(str(e), err=True)
            sys.exit(1)
        except PolicyStoreError as e:
            _fail(str(e))
        except PermissionDenied as e:
            _fail(f"not allowed: {e}")

    return wrapper


@click.group()
def policy() -> None:
    """Policy versions: validate, explain a decision, write, diff, approve, activate, roll back."""


@policy.command()
@click.argument("file", type=click.Path(dir_okay=False))
def validate(file: str) -> None:
    """Check a policy file; print every problem with its path (exit 1), or a one-line summary."""
    try:
        p = load_policy(file)
    except PolicyValidationError as e:
        click.echo(str(e), err=True)
        sys.exit(1)
    models = ", ".join(sorted(p.models()))
    ladder = ", ".join(t.value for t in p.tier_ladder())
    click.echo(f"ok: {file}: version {p.version}, {len(p.tiers)} tiers ({ladder}), "
               f"{len(p.rules)} rules, {len(p.thresholds)} thresholds, models: {models}, "
               f"{len(p.canaries)} canary spec(s)")


def _parse_headers(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for h in pairs:
        if ":" not in h:
            _fail(f"--header {h!r}: expected NAME:VALUE, e.g. x-priority:9")
        k, v = h.split(":", 1)
        out[k.strip().lower()] = v.strip()
    return out


@policy.command()
@click.option("--request", "request_file", required=True, type=click.Path(dir_okay=False),
              help="JSON file with an OpenAI request body ('-' for stdin)")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False), help="policy file (default: active version)")
@click.option("--header", "headers", multiple=True, help="request header NAME:VALUE (repeatable)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object with score, tier, rules")
@DIR_OPT
@DB_OPT
@_guard
def explain(request_file: str, policy_file: str | None, headers: tuple[str, ...], as_json: bool,
            policies_dir: str, db_url: str | None) -> None:
    """Show how a policy scores one request: score, minimum tier, and the rules that fired."""
    from quantroute.classify import RequestError, classify

    p = load_policy(policy_file) if policy_file else _store(policies_dir, db_url).active()
    raw = sys.stdin.read() if request_file == "-" else Path(request_file).read_text(encoding="utf-8")
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as e:
        _fail(f"{request_file}: not valid JSON: {e}")
    if isinstance(body, dict) and "body" in body and "model" not in body:
        headers = headers + tuple(f"{k}:{v}" for k, v in (body.get("headers") or {}).items())
        body = body["body"]  # a line of data/requests/labelled.jsonl
    try:
        d = classify(p, body, _parse_headers(headers))
    except RequestError as e:
        _fail(f"{request_file}: {e.message}")
    if as_json:
        click.echo(json.dumps({"score": d.score, "tier": d.tier.value, "policy_version": p.version,
                               "output_estimate": d.output_estimate,
                               "rules": [{"name": r.name, "weight": r.weight} for r in d.rules]}))
        return
    console = Console()
    console.print(f"policy version {p.version}: score [bold]{d.score:g}[/] -> minimum tier [bold]{d.tier.value}[/]"
                  f" (estimated output {d.output_estimate} tokens)")
    if d.header_tier:
        console.print(f"x-min-tier header asked for {d.header_tier.value}")
    t = Table("rule", "weight", "description")
    descr = {r.name: r.description for r in p.rules}
    for r in d.rules:
        t.add_row(r.name, f"{r.weight:+g}", descr.get(r.name, ""))
    if d.rules:
        console.print(t)
    else:
        console.print("no rule fired")


@policy.command()
@click.option("--parent", type=int, help="version to start from (default: the active version)")
@click.option("--file", "file", type=click.Path(dir_okay=False),
              help="YAML with the new content (default: a copy of the parent)")
@click.option("--message", "-m", required=True)
@DIR_OPT
@DB_OPT
@_guard
def new(parent: int | None, file: str | None, message: str, policies_dir: str, db_url: str | None) -> None:
    """Write the next policy version as you (an operator; exclusive: a concurrent writer gets a conflict)."""
    store = _store(policies_dir, db_url)
    author = acting_user(store.engine)
    parent = parent if parent is not None else store.active_version()
    body = load_policy(file) if file else store.load(parent)
    v = store.new(parent=parent, author=author, message=message, policy=body)
    click.echo(f"wrote {store.path(v)} (version {v}, parent {parent}); "
               "it needs a reviewer's approval before activation")


def _resolve(ref: str, store: PolicyStore) -> Policy:
    if ref.isdigit():
        return store.load(int(ref))
    return load_policy(ref)


@policy.command()
@click.argument("a")
@click.argument("b")
@DIR_OPT
@DB_OPT
@_guard
def diff(a: str, b: str, policies_dir: str, db_url: str | None) -> None:
    """Semantic diff of two versions (numbers) or files: rules, thresholds, tiers, canaries, settings."""
    from quantroute.policy.diff import diff_policies

    store = _store(policies_dir, db_url)
    changes = diff_policies(_resolve(a, store), _resolve(b, store))
    if not changes:
        click.echo("no semantic differences")
        return
    section = None
    for c in changes:
        if c.section != section:
            section = c.section
            click.echo(f"{section}:")
        click.echo(f"  {c}")


@policy.command()
@click.argument("version", type=int)
@click.option("--comment", default="")
@DIR_OPT
@DB_OPT
@_guard
def approve(version: int, comment: str, policies_dir: str, db_url: str | None) -> None:
    """Approve a version as you (a reviewer who is not its author)."""
    store = _store(policies_dir, db_url)
    by = acting_user(store.engine)
    store.approve(version, by=by, comment=comment)
    click.echo(f"version {version} approved by {by}")


@policy.command()
@click.argument("version", type=int)
@click.option("--emergency", is_flag=True,
              help="activate without approval: operators only, with --reason; flagged in the audit trail")
@click.option("--reason", default="")
@DIR_OPT
@DB_OPT
@_guard
def activate(version: int, emergency: bool, reason: str, policies_dir: str, db_url: str | None) -> None:
    """Make an approved version active, as you; routers reload it."""
    store = _store(policies_dir, db_url)
    prev = store.activate(version, by=acting_user(store.engine), emergency=emergency, reason=reason)
    click.echo(f"active: version {version} (was {prev}){' [emergency]' if emergency else ''}")


@policy.command()
@click.option("--to", "to", type=int, help="a version that was active before (default: the previous one)")
@click.option("--reason", default="")
@DIR_OPT
@DB_OPT
@_guard
def rollback(to: int | None, reason: str, policies_dir: str, db_url: str | None) -> None:
    """Activate the previous known-good version at once, as you (no approval step)."""
    store = _store(policies_dir, db_url)
    before = store.active_version()
    now = store.rollback(by=acting_user(store.engine), reason=reason, to=to)
    click.echo(f"rolled back: version {now} active (was {before})")


@policy.command()
@DIR_OPT
@DB_OPT
@_guard
def history(policies_dir: str, db_url: str | None) -> None:
    """Every version with author, parent, approval and which one is active."""
    t = Table("version", "parent", "author", "created", "approved by", "state", "message")
    for v in _store(policies_dir, db_url).history():
        state = "ACTIVE" if v.active else ("was active" if v.ever_active else "")
        t.add_row(str(v.version), str(v.parent or ""), v.author, v.created_at.strftime("%Y-%m-%d %H:%M"),
                  v.approved_by or "", state, v.message[:60])
    Console().print(t)


@policy.command()
@click.argument("version", type=int, required=False)
@DIR_OPT
@DB_OPT
@_guard
def show(version: int | None, policies_dir: str, db_url: str | None) -> None:
    """Print a version's YAML as stored in the database (default: the active one)."""
    store = _store(policies_dir, db_url)
    click.echo(store.text(version or store.active_version()))


@policy.command("import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@DIR_OPT
@DB_OPT
@_guard
def import_cmd(directory: Path, policies_dir: str, db_url: str | None) -> None:
    """Store the policy-NNNN.yaml files of DIRECTORY that the database does not hold yet (GitOps: versions kept
    in git), as you (an operator, e.g. the CI job's user token). A file whose version is stored with another
    content hash is refused: versions are immutable. Exit 1 when any file was refused. Importing stores versions;
    approving and activating them stay separate steps, each checked."""
    from quantroute.auth import require

    store = _store(policies_dir, db_url)
    by = acting_user(store.engine)
    require(store.engine, by, "policy.new")
    results = store.import_dir(directory, by=by)
    if not results:
        _fail(f"no policy-NNNN.yaml files in {directory}")
    for r in results:
        click.echo(f"{r.path.name}: {r.outcome}" + (f" ({r.detail})" if r.outcome == "refused" else ""))
    if any(r.outcome == "refused" for r in results):
        sys.exit(1)


@policy.command()
@DIR_OPT
@DB_OPT
@_guard
def verify(policies_dir: str, db_url: str | None) -> None:
    """Compare the policy files with the database: report files edited by hand or never imported (exit 1)."""
    store = _store(policies_dir, db_url)
    store.versions()
    problems = store.drift()
    for p in problems:
        click.echo(p)
    if problems:
        sys.exit(1)
    click.echo(f"{policies_dir}: every file matches the database")


@policy.command()
@click.option("--slo", required=True, help="the SLO to maximise capacity at: tpot30, tpot50, tpot100, ttft500, "
              "ttft1000 or throughput")
@click.option("--fleet", "fleet_file", required=True, type=click.Path(dir_okay=False, exists=True),
              help="fleet file (hardware, formats, batch limits of the nodes)")
@click.option("--traffic", "traffic_file", type=click.Path(dir_okay=False, exists=True),
              help="traffic file (JSON Lines, data/traffic/README.md); default: the request log's replays")
@click.option("--log-rows", default=5000, show_default=True, type=click.IntRange(1),
              help="newest logged requests to read when no --traffic is given")
@click.option("--budget", default=0.5, show_default=True, type=click.FloatRange(0),
              help="most expected pass-rate loss over all traffic, points")
@click.option("--category-budget", default=6.0, show_default=True, type=click.FloatRange(0),
              help="most expected pass-rate loss in any one eval category, points")
@click.option("--dry-run", is_flag=True, help="print the proposal; write no draft")
@DIR_OPT
@DB_OPT
@_guard
def tune(slo: str, fleet_file: str, traffic_file: str | None, log_rows: int, budget: float, category_budget: float,
         dry_run: bool, policies_dir: str, db_url: str | None) -> None:
    """Propose thresholds and rule weights with the most capacity at an SLO within a quality budget.

    Reads the active policy, the eval deltas stored per category, the traffic, the fleet and the capacity model;
    prints each candidate's predicted capacity and quality loss, the diff against the active version and its
    what-if replay, and writes the best as a draft version for review (it never activates anything)."""
    from quantroute.evals import tuning
    from quantroute.fleet import load_fleet
    from quantroute.slo import slo_named
    from quantroute.tune import MissingEvals, SloUnmeetable, TuneRequest

    try:
        named = slo_named(slo)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--slo") from None
    store = _store(policies_dir, db_url)
    active = store.active()
    fleet = load_fleet(fleet_file)
    if traffic_file:
        from quantroute.loadtest.traffic import TrafficError, load_traffic

        try:
            lines = load_traffic(traffic_file)
        except TrafficError as e:
            _fail(str(e))
            return
        requests = [TuneRequest(ln.body, ln.headers, ln.session) for ln in lines]
        sensitive = [TuneRequest(ln.body, ln.headers) for ln in lines if ln.class_ == "sensitive" and ln.turn == 1]
        source = f"{len(requests)} requests of {traffic_file}"
    else:
        requests, sensitive = tuning.logged_requests(store.engine, limit=log_rows), []
        source = f"the newest {len(requests)} logged requests"
    if not requests:
        _fail("no traffic to tune for: the request log holds no request bodies (prompt storage `none`, or no "
              "traffic yet); pass --traffic FILE")
    unknown = tuning.models_of(requests) - active.models()
    if unknown:
        _fail(f"the traffic asks for {', '.join(sorted(unknown))}, which the active policy (version "
              f"{active.version}) does not serve; valid models: {', '.join(sorted(active.models()))}")
    try:
        result, draft, guarded = tuning.propose(store.engine, active, fleet, requests, named, budget=budget,
                                                category_budget=category_budget, version=max(store.versions()) + 1,
                                                sensitive=sensitive)
    except (MissingEvals, SloUnmeetable) as e:
        _fail(str(e))
        return
    console = Console()
    console.print(f"tuning version {active.version} for {named.label} over {source}; budget {budget:g} pts overall, "
                  f"{category_budget:g} in any category; {guarded} labelled sensitive requests guarded")
    console.print("capacity model at the SLO: " + ", ".join(f"{t} {c:,.0f} tok/s" for t, c in
                                                           result.tier_capacity.items())
                  + f" ({result.context_tokens} tokens of context a sequence)")
    table = Table("candidate", "predicted tok/s", "requests per tier", "loss all / worst (pts)", "within budget")
    for c in [result.active, *result.candidates]:
        q = c.quality
        table.add_row(c.label, f"{c.capacity_tok_s:,.0f}", ", ".join(f"{t} {s:.0%}" for t, s in c.tier_share.items()),
                      f"{q.overall_pts:.2f} / {q.worst_pts:.2f} ({q.worst_category or '-'})",
                      "yes" if c.within else "no")
    console.print(table)
    if draft is None:
        _fail(f"no candidate keeps the expected loss within {budget:g} points overall and {category_budget:g} in "
              "every category with the labelled sensitive requests kept up; loosen the budget or add evals")
        return
    _print_proposal(console, active, draft, requests)
    if dry_run:
        console.print("dry run: no draft written")
        return
    author = acting_user(store.engine)
    v = store.new(parent=active.version, author=author, message=draft.message, policy=draft)
    click.echo(f"wrote {store.path(v)} (version {v}, a draft, parent {active.version}); it needs a reviewer's "
               "approval before activation; nothing was activated")


def _print_proposal(console: Console, active: Policy, draft: Policy, requests) -> None:
    """The diff against the active version and the what-if replay of the traffic under both."""
    from quantroute.policy.diff import diff_policies
    from quantroute.whatif import reclassify

    console.print(f"proposal: {draft.message}")
    for c in diff_policies(active, draft):
        console.print(f"  {c}")
    report = reclassify(active, draft, ((i, {"body": r.body, "headers": r.headers}) for i, r in enumerate(requests)))
    moves = ", ".join(f"{a} -> {b}: {n}" for (a, b), n in report.transitions().most_common()) or "none"
    causes = ", ".join(f"{r} ({n})" for r, n in report.causes().most_common(5)) or "-"
    console.print(f"what-if replay: {len(report.changed)} of {report.total} requests change their minimum tier "
                  f"({moves}); rules responsible: {causes}")
