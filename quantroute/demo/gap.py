"""What `make demo-real` shows of the quantization gap, from real answers: the paired evals bf16 vs int8 and bf16
vs int4 on the tiny model's suite (stored like every run, so the Evals page has them), then live traffic with every
greedy request shadowed to the other tier, and the shadow pairs' agreement by rule with a few disagreements side by
side. Talks to the router over HTTP and reads the database; the caller prints."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from quantroute.db.engine import table_of
from quantroute.db.shadow_pair import ShadowPair
from quantroute.evals.gate import GateConfig
from quantroute.evals.runner import RunSettings
from quantroute.evals.runs import RunView, execute_run
from quantroute.evals.suite import EvalItem, load_suite
from quantroute.shadow.analysis import Rate, by_rule, compared

# Greedy traffic the default rules tell apart: math (greedy-structured: bf16, shadowed to int4) and low-priority
# chat (low-priority: int4, shadowed to bf16).
TRAFFIC: tuple[tuple[str, dict[str, str]], ...] = (("math", {}), ("chat", {"x-priority": "2"}))


def shadow_config(tiers: list[str]) -> dict[str, Any] | None:
    """The policy's `shadow` section for the demo: every greedy request served by one tier is answered by the other
    too (int8/int4 -> bf16, bf16 -> int4); None without both ends."""
    if "fp16" not in tiers or "int4" not in tiers:
        return None
    return {"rate": 1.0, "max_concurrent": 64, "max_target_load": 1000, "timeout_s": 120,
            "pairs": [{"served": [t], "shadow": "int4" if t == "fp16" else "fp16"} for t in tiers]}


def gap_evals(router_url: str, baseline: str, candidates: list[str], suite_path: Path, engine: Engine,
              runs_dir: Path) -> list[RunView]:
    """Paired evals of each candidate deployment against `baseline`, through the router (named deployments are
    served directly, never shadowed), stored in `engine` with the gate's verdict."""
    suite = load_suite(suite_path)

    async def run_all() -> list[RunView]:
        return [await execute_run(suite=suite, baseline=f"{router_url}#{baseline}", candidate=f"{router_url}#{dep}",
                                  engine=engine, settings=RunSettings(concurrency=8, timeout_s=180),
                                  gate=GateConfig(), runs_dir=runs_dir, started_by="demo-real")
                for dep in candidates]

    return asyncio.run(run_all())


def eval_lines(view: RunView) -> list[str]:
    """One line per slice (pass rates, delta, interval, McNemar p) and the gate's verdict."""
    run, rep = view.run, view.report
    out = [f"{run['baseline']['deployment']} vs {run['candidate']['deployment']} (eval run {run['id']}): "
           f"gate {view.verdict.summary().splitlines()[0]}"]
    for c in [rep.overall, *rep.categories]:
        out.append(f"  {c.name:<13} n={c.n:<4} {c.base_rate:6.1%} -> {c.cand_rate:6.1%}  {c.delta * 100:+5.1f} points "
                   f"[{c.ci_low * 100:+.1f}, {c.ci_high * 100:+.1f}]  lost {c.only_cand_fail}, gained "
                   f"{c.only_base_fail}  McNemar p={c.p_value:.3g}")
    return out


def send_traffic(router_url: str, model: str, items: list[EvalItem], headers: dict[str, str]) -> int:
    """One greedy request per item, one after the other; returns how many."""
    with httpx.Client(base_url=router_url, timeout=180) as c:
        for it in items:
            r = c.post("/v1/chat/completions", headers={"x-session-id": uuid.uuid4().hex, **headers},
                       json={"model": model, "max_tokens": 24, "temperature": 0,
                             "messages": it.chat_messages()})
            r.raise_for_status()
    return len(items)


def shadowed_traffic(router_url: str, model: str, suite_path: Path, engine: Engine, per_category: int = 40,
                     timeout_s: float = 300) -> list[dict[str, Any]]:
    """The first `per_category` items of TRAFFIC's categories in turn, each category once the previous one's
    shadows are stored (their shadows busy the cheapest tier, and a busy cheapest tier escalates); the pairs
    stored meanwhile."""
    items = load_suite(suite_path).items
    after = last_pair_id(engine)
    sent = 0
    for category, headers in TRAFFIC:
        sent += send_traffic(router_url, model, [i for i in items if i.category == category][:per_category], headers)
        wait_for_pairs(engine, after, sent, timeout_s=timeout_s)
    return wait_for_pairs(engine, after, sent, timeout_s=0)


def wait_for_pairs(engine: Engine, after_id: int, n: int, timeout_s: float = 300,
                   sleep: Callable[[float], None] = time.sleep) -> list[dict[str, Any]]:
    """The shadow pairs stored after id `after_id`, once there are `n` (or whatever is there at the deadline)."""
    t = table_of(ShadowPair)
    deadline = time.monotonic() + timeout_s
    while True:
        with engine.connect() as c:
            rows = [dict(r) for r in c.execute(select(t).where(t.c.id > after_id).order_by(t.c.id)).mappings()]
        if len(rows) >= n or time.monotonic() > deadline:
            return rows
        sleep(0.5)


def last_pair_id(engine: Engine) -> int:
    t = table_of(ShadowPair)
    with engine.connect() as c:
        return c.execute(select(func.max(t.c.id))).scalar() or 0


def agreement_lines(rows: list[dict[str, Any]], examples: int = 5) -> list[str]:
    """Agreement by rule with 95 % intervals, then up to `examples` disagreements: prompt, served and shadow
    answers side by side."""
    rates: list[Rate] = by_rule(compared(rows))
    out = [f"  {r.key['rule']:<18} {r.key['served_tier']:>4} vs {r.key['shadow_tier']:<4} {r.agree:>3}/{r.pairs:<3} "
           f"agree = {r.rate:6.1%} [{r.ci_low:.1%}, {r.ci_high:.1%}]" for r in rates]
    shown = [r for r in rows if r.get("compared") and r.get("agree") is False and r.get("bodies")][:examples]
    if shown:
        out.append("  disagreements (prompt | served | shadow):")
    for r in shown:
        body = r["bodies"]
        messages = ((body.get("request") or {}).get("body") or {}).get("messages") or [{}]
        prompt = messages[-1].get("content", "?")
        out.append(f"    {prompt!r:32} | {r['served_tier']} {body.get('served')!r:10} | {r['shadow_tier']} "
                   f"{body.get('shadow')!r}")
    return out
