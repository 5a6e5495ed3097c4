"""`quantroute shadow report`: live agreement between tiers from the stored shadow pairs, with the
rules the evidence says to raise or lower. Thin: the figures come from `shadow.analysis`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _rates_table(title: str, rates, columns: tuple[str, ...]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for name in ("pairs", "agree", "exact", "rate", "95 % CI"):
        t.add_column(name, justify="right")
    for r in rates:
        t.add_row(*[r.key[c] for c in columns], str(r.pairs), str(r.agree), str(r.exact), _pct(r.rate),
                  f"{_pct(r.ci_low)} - {_pct(r.ci_high)}")
    return t


def _suggestion_table(title: str, items) -> Table:
    t = Table(title=title, title_justify="left")
    for c in ("rule", "weight", "proposed", "evidence"):
        t.add_column(c, overflow="fold")
    for s in items:
        proposed = (f"{s.proposed_weight:g} (alone: {s.target_tier})" if s.proposed_weight is not None
                    else f"- ({s.note})")
        t.add_row(s.rule, f"{s.current_weight:g}", proposed, s.evidence)
    return t


@click.group()
def shadow() -> None:
    """Shadow comparison between tiers on live traffic."""


@shadow.command()
@click.option("--since", default="24h", show_default=True, help="window: pairs newer than this age (30m, 24h, 7d)")
@click.option("--model", default=None, help="only this logical model")
@click.option("--bucket", default="1h", show_default=True, help="trend bucket (e.g. 10m, 1h)")
@click.option("--min-pairs", default=30, show_default=True, type=click.IntRange(min=1),
              help="pairs a rule needs before it is suggested for a change")
@click.option("--raise-below", default=0.9, show_default=True, type=click.FloatRange(0, 1),
              help="suggest raising a rule whose cheapest-tier agreement is surely below this (CI high)")
@click.option("--lower-above", default=0.95, show_default=True, type=click.FloatRange(0, 1),
              help="suggest lowering a top-tier rule whose lower-tier agreement is surely above this (CI low)")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--policies", "policies_dir", default=lambda: os.environ.get("QUANTROUTE_POLICIES", "policies"),
              show_default="policies", type=click.Path(file_okay=False), help="policy versions directory")
@click.option("--db", "db_url", default=None, help="database URL (default $DATABASE_URL or data/quantroute.db)")
def report(since: str, model: str | None, bucket: str, min_pairs: int, raise_below: float, lower_above: float,
           as_json: bool, policies_dir: str, db_url: str | None) -> None:
    """Agreement rates per deployment pair, per rule and over time, and rules to raise or lower."""
    from datetime import timedelta

    from quantroute.cli.database import open_engine
    from quantroute.cli.db import parse_age
    from quantroute.clock import utcnow
    from quantroute.db.shadow_pair import pairs_since
    from quantroute.policy.store import PolicyStore
    from quantroute.shadow.analysis import analyse

    window_s = parse_age(since, "--since")
    bucket_s = max(60, int(parse_age(bucket, "--bucket")))
    engine = open_engine(db_url)
    policy = PolicyStore(Path(policies_dir), engine).active()
    pairs = pairs_since(engine, since=utcnow() - timedelta(seconds=window_s), model=model)
    rep = analyse(pairs, policy, bucket_s=bucket_s, min_pairs=min_pairs, raise_below=raise_below,
                  lower_above=lower_above)
    if as_json:
        click.echo(json.dumps(rep.model_dump(mode="json"), indent=2))
        return
    out = Console(width=max(140, Console().width))
    out.print(f"[bold]Live agreement[/bold], last {since}: {rep.pairs} compared shadow pairs"
              f" ({rep.failed} shadows without a comparable answer), policy version {policy.version}")
    if not rep.pairs:
        out.print("no compared shadow pairs in the window: is `shadow.rate` > 0 in the active policy, and is there "
                  "greedy traffic?")
        return
    out.print(_rates_table("By deployment pair (served vs shadow)", rep.by_pair,
                           ("served_tier", "served_deployment", "shadow_tier", "shadow_deployment")))
    out.print(_rates_table("By rule", rep.by_rule, ("rule", "served_tier", "shadow_tier")))
    out.print(_rates_table(f"Trend (per {bucket})", rep.trend, ("bucket", "pair")))
    ladder = [t.value for t in policy.tier_ladder()]
    for title, items in ((f"Candidates to raise: {ladder[-1]} traffic that disagrees with {ladder[0]} (agreement CI "
                          f"high < {raise_below:.0%}, >= {min_pairs} pairs)", rep.raise_),
                         (f"Candidates to lower: {ladder[0]} rules whose lower-tier shadow agrees (CI low > "
                          f"{lower_above:.0%}, >= {min_pairs} pairs)", rep.lower)):
        if items:
            out.print(_suggestion_table(title, items))
        else:
            out.print(f"{title}: none")
