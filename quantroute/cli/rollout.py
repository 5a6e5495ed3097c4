"""`quantroute rollout ...`: start, approve, step, pause, resume, promote, roll back and watch a canary.
Thin: every command calls one `RolloutService` function and prints the rollout's status."""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
import time
from pathlib import Path

import click

POLICIES = click.option("--policies", "policies_dir", default=lambda: os.environ.get("QUANTROUTE_POLICIES", "policies"),
                        show_default="policies", type=click.Path(file_okay=False), help="policy versions directory")
DB = click.option("--db", "db_url", default=None, help="database URL (default $DATABASE_URL or data/quantroute.db)")
ROUTER = click.option("--router", "routers", multiple=True, envvar="QUANTROUTE_ROUTER_URLS",
                      help="router base URL for node health and releasing pins (repeat per replica)")
TOKEN = click.option("--admin-token", envvar="QUANTROUTE_ROUTER_ADMIN_TOKEN", default=None,
                     help="the routers' admin token")


def _common(fn):
    for opt in (POLICIES, DB, ROUTER, TOKEN):
        fn = opt(fn)
    return fn


def _service(policies_dir: str, db_url: str | None, routers: tuple[str, ...], admin_token: str | None):
    from quantroute.admin_client import RouterAdmin
    from quantroute.cli.database import open_engine
    from quantroute.policy.store import PolicyStore
    from quantroute.rollout.service import RolloutService

    engine = open_engine(db_url)
    router = None
    if routers:
        if not admin_token:
            raise click.UsageError("--router needs --admin-token (or QUANTROUTE_ROUTER_ADMIN_TOKEN)")
        router = RouterAdmin(list(routers), admin_token)
    return RolloutService(PolicyStore(Path(policies_dir), engine), router=router)


def _run(fn):
    """Build the service from the common options, call `fn(svc, **rest)`; refusals print one line, exit 1.
    A command that takes `by` gets the authenticated user (cli.identity), never a name from the command line."""
    acts = "by" in inspect.signature(fn).parameters

    @functools.wraps(fn)
    def wrapper(policies_dir, db_url, routers, admin_token, **kw):
        from quantroute.auth import PermissionDenied
        from quantroute.cli.identity import acting_user
        from quantroute.policy.loader import PolicyValidationError
        from quantroute.policy.store import PolicyStoreError
        from quantroute.rollout.service import RolloutRefused

        try:
            svc = _service(policies_dir, db_url, routers, admin_token)
            if acts:
                kw["by"] = acting_user(svc.engine)
            out = fn(svc, **kw)
        except RolloutRefused as e:
            click.echo(f"refused: {e.reason}", err=True)
            sys.exit(1)
        except PermissionDenied as e:
            click.echo(f"not allowed: {e}", err=True)
            sys.exit(1)
        except (PolicyStoreError, PolicyValidationError) as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
        if out is not None:
            from quantroute.controller.loop import leader_status

            print_status(out, controller=leader_status(svc.engine).text)
    return _common(wrapper)


def print_status(st, *, events: int = 8, controller: str | None = None) -> None:
    steps = " -> ".join(f"[{s:g}%]" if i == st.step_index else f"{s:g}%" for i, s in enumerate(st.steps))
    click.echo(f"rollout {st.id}  {st.model}: {st.baseline} -> {st.candidate}")
    click.echo(f"  phase    {st.phase}   candidate share {st.percent:g}% of new sessions   steps {steps}")
    click.echo(f"  started  {st.started_at:%Y-%m-%d %H:%M:%S} by {st.started_by}"
               + (f"   approved by {st.approved_by}" if st.approved_by else "")
               + (f"   policy version {st.policy_version}" if st.policy_version else "")
               + (f"   target concurrency {st.target_concurrency}" if st.target_concurrency else ""))
    click.echo(f"  message  {st.message}")
    if controller:
        click.echo(f"  {controller}")
    if st.aborted_reason:
        click.echo(f"  aborted  {st.aborted_reason}")
    click.echo(f"  gate     {st.gate}")
    if st.guards is not None:
        j = st.guards.judgement
        if j is None:
            click.echo(f"  guards   {st.guards.status}: {st.guards.summary}")
        else:
            click.echo(f"  guards   {st.guards.status}: judge {j.verdict}, score {j.score:g}, at "
                       f"{100 * j.confidence:g} % confidence" + (f"; {j.needs}" if j.needs else ""))
            for m in j.metrics:
                click.echo(f"    {m.metric:<10} {m.verdict:<12} {m.detail}"
                           + (f"  {'critical' if m.critical else 'non-critical'}"))
            if st.guards.breaches and st.guards.breaches[0].guard != "judge":
                click.echo(f"    {st.guards.summary}")
    click.echo("  checklist:")
    from quantroute.rollout.checklist import Checklist

    for line in Checklist(items=st.checklist).lines():
        click.echo("    " + line)
    if events:
        click.echo("  events:")
        for e in st.events[-events:]:
            v = (f"  v{e['version_before']}->v{e['version_after']}" if e["version_after"] != e["version_before"]
                 else "")
            flag = "REFUSED " if e["refused"] else ""
            click.echo(f"    {e['at'][11:19]} {e['actor']:<13} {e['action']:<18} {flag}{e['message']}{v}")


@click.group()
def rollout() -> None:
    """Eval-gated canary of a candidate deployment: reviewer approval, guards, one-action rollback."""


@rollout.command()
@click.argument("model")
@click.option("--candidate", required=True, help="the candidate's deployment id (named by the policy's canary)")
@click.option("--target-concurrency", type=click.IntRange(min=1), default=None,
              help="concurrency the candidate's staircase load test must pass at (checklist); default: any step")
@_run
def start(svc, model, candidate, target_concurrency, by):
    """Start a rollout; it waits at the eval gate until a passing run of the candidate vs the baseline exists."""
    return svc.start(model, candidate=candidate, by=by, target_concurrency=target_concurrency)


@rollout.command()
@click.argument("model")
@_run
def gate(svc, model):
    """Re-check the eval gate of a gated rollout."""
    return svc.check_gate(model)


@rollout.command()
@click.argument("model")
@_run
def approve(svc, model, by):
    """Approve as a reviewer (not the one who started it); the candidate gets the first step."""
    return svc.approve(model, by=by)


@rollout.command()
@click.argument("model")
@click.argument("items", nargs=-1, required=True)
@click.option("--note", default="")
@_run
def tick(svc, model, items, note, by):
    """Tick checklist items the system cannot know, in your name."""
    return svc.tick(model, list(items), by=by, note=note)


def _simple(name: str, doc: str):
    @click.argument("model")
    @_run
    def cmd(svc, model, by):
        return getattr(svc, name)(model, by=by)
    cmd.__doc__ = doc
    rollout.command(name=name)(cmd)


_simple("step", "Move to the next percent (only when the guards pass; inconclusive holds the step).")
_simple("pause", "Pause a progressing canary (traffic stays where it is).")
_simple("resume", "Resume a paused canary.")
_simple("promote", "At the last step with passing guards: the candidate becomes the baseline of its tier.")


@rollout.command()
@click.argument("model")
@click.option("--reason", default="", help="why (recorded)")
@_run
def rollback(svc, model, reason, by):
    """Send all traffic back to the baseline now: any phase, no approval."""
    return svc.rollback(model, by=by, reason=reason)


@rollout.command()
@click.argument("model")
@click.option("--json", "as_json", is_flag=True)
@_run
def status(svc, model, as_json):
    """Phase, step, gate, guards, checklist and the latest events."""
    st = svc.status(model)
    if as_json:
        click.echo(json.dumps(st.model_dump(mode="json"), indent=2))
        return None
    return st


@rollout.command()
@click.argument("model")
@click.option("--watch", is_flag=True, help="show the verdict again every --interval seconds (until promoted or "
                                            "rolled back)")
@click.option("--interval", default=5.0, show_default=True, help="seconds between views with --watch")
@_run
def guards(svc, model, watch, interval):
    """Show the guards' verdict on the request log and whether a controller is acting on it. A view: the
    controller (`quantroute controller`) is what rolls back on a breach and advances after the dwell."""
    from quantroute.controller.loop import leader_status

    while True:
        v = svc.guard_verdict(model)
        st = svc.status(model)
        stamp = time.strftime("%H:%M:%S")
        click.echo(f"{stamp} {st.phase} at {st.percent:g}%: " + (f"{v.status}: {v.summary}" if v else "no guards "
                                                                 "to evaluate (the canary is not taking traffic)"))
        click.echo(f"{stamp} {leader_status(svc.engine).text}")
        if not watch or st.phase in ("promoted", "rolled-back"):
            if st.aborted_reason:
                click.echo(f"{stamp} aborted: {st.aborted_reason}")
            return None
        time.sleep(interval)
