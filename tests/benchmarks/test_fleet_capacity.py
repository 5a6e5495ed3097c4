"""The fleet experiment on a short run: seed 000's fleet behind the real router (separate processes), a two-step
staircase per arm; invariants (0 sensitive on INT4 by the classifier, 0 switches) and the capacity bookkeeping."""

import asyncio
from pathlib import Path

import httpx
import pytest

from quantroute.fleet import load_fleet
from quantroute.loadtest.stats import Slo
from quantroute.loadtest.traffic import load_traffic, with_model
from quantroute.policy.loader import load_policy
from support import fleet_arms as arms
from support.fleet_capacity import Ladder, run_capacity
from support.fleet_mixes import tolerant_mix, tolerant_share

REPO = Path(__file__).resolve().parents[2]
FLEET = load_fleet(REPO / "data/fleet-seed000.yaml")
BASE = load_policy(REPO / "policies/policy-0001.yaml")
MIXED = with_model(load_traffic(REPO / "data/traffic/mixed.jsonl"), "llama-13b")
SHORT = Ladder(start=8, factor=2.0, max_steps=2, first_warmup_s=0.5, warmup_s=0.5, window_s=1.0, windows=2,
               drain_s=10.0)


def test_tiered_staircase_keeps_sessions_on_one_tier_and_sensitive_requests_off_int4_unless_pinned():
    [b] = run_capacity(FLEET, arms.adapt(BASE, FLEET), [("b", "tiered", MIXED)], ladder=SHORT,
                       slo=Slo(ttft_p95_ms=60_000), time_scale=0.5)
    assert [s.concurrency for s in b.steps] == [8, 16]  # a generous SLO holds at this load: both steps ran
    assert b.capacity_index is not None and b.capacity_tok_s == max(s.output_tok_s for s in b.steps)
    for s in b.steps:
        assert len(s.windows) == 2 and s.breach is None and s.errors == 0
        assert min(w.output_tok_s for w in s.windows) <= s.output_tok_s <= max(w.output_tok_s for w in s.windows)
        assert s.output_tok_s == pytest.approx(sum(s.tok_s_by_tier.values()), rel=1e-9)  # medians of sums
        assert 0 < s.sim_share <= 1.05  # the nodes simulated (about) the window's wall time, less what they forgave
    assert set(b.capacity.tier_share) == {"fp16", "int4"} and b.capacity.tok_s_by_tier["int4"] > 0
    inv = b.invariants
    assert inv.sessions > 0 and inv.mid_session_switches == 0
    assert inv.sensitive > 0 and inv.sensitive_on_int4_unpinned == 0
    assert inv.sensitive_on_int4 == inv.sensitive_on_int4_pinned


def test_baseline_runs_on_fp16_only_and_a_tight_slo_stops_the_staircase_at_its_first_step():
    # A TTFT SLO of 1 ms cannot be met (prefill alone takes longer), so the first step breaches: no capacity.
    [a] = run_capacity(FLEET, arms.fp16_only(BASE, FLEET), [("a", "fp16 only", MIXED)], ladder=SHORT,
                       slo=Slo(ttft_p95_ms=1.0), time_scale=0.5)
    assert len(a.steps) == 1 and a.capacity_index is None and a.capacity_tok_s == 0.0
    assert a.steps[0].breach.startswith("SLO: TTFT p95") and "concurrency 8" in a.stop_reason
    assert a.steps[0].tier_share == {"fp16": 1.0} and a.steps[0].tok_s_by_tier.get("int4", 0.0) == 0.0
    assert a.invariants.sensitive_on_int4 == 0 and a.needed_fp16_share == 1.0 and a.fleet_warning


def test_ladder_values_grow_geometrically():
    assert Ladder(start=160, factor=1.3, max_steps=6).values() == [160, 208, 272, 352, 456, 596]
    assert Ladder(start=1, factor=1.1, max_steps=3).values() == [1, 4, 8]  # rounded to 4s, strictly increasing


def test_tolerant_mix_share_and_fleet_warning():
    pool = with_model([ln for f in ("mixed", "chat-only", "sensitive-heavy")
                       for ln in load_traffic(REPO / f"data/traffic/{f}.jsonl")], "llama-13b")
    tiered = arms.adapt(BASE, FLEET)
    low, high = tolerant_mix(pool, 0.0, requests=120), tolerant_mix(pool, 1.0, requests=120)
    assert tolerant_share(low) == 0.0 and tolerant_share(high) == 1.0
    assert 120 <= len(low) < 130
    assert arms.top_tier_share(tiered, low)[1] is True  # > 70 % need fp16: the warning fires
    share, fires = arms.top_tier_share(tiered, high)
    assert share < 0.7 and not fires
    tuned = arms.tuned(BASE, FLEET)
    assert arms.needed_tiers(tuned, MIXED)["int4"] > arms.needed_tiers(tiered, MIXED)["int4"]


def test_blind_arm_reports_the_nodes_real_tiers_and_their_prefix_cache():
    # The router sees one tier of eight nodes; the report must still say which requests ran on INT4 nodes
    [d] = run_capacity(FLEET, arms.blind(BASE, FLEET), [("d", "blind", MIXED)], ladder=SHORT,
                       slo=Slo(ttft_p95_ms=60_000), time_scale=0.5, router_view=arms.blind_view, node_affinity=True)
    assert {t for by in d.served.values() for t in by} == {"fp16", "int4"}
    assert set(d.steps[-1].tok_s_by_tier) == {"fp16", "int4"}
    assert d.invariants.sensitive_on_int4_unpinned > 0  # no policy: precise work lands on INT4 too
    assert sum(n for by in d.served.values() for n in by.values()) == sum(
        n for by in d.class_tiers.values() for n in by.values())
    assert 0 < d.prefix_hits < d.prefix_queries  # shared system prompts hit the nodes' prefix caches


def test_a_run_waits_for_the_nodes_to_finish_what_an_earlier_run_left_running():
    """Requests whose clients are still connected keep generating after a staircase's drain; until they finish,
    settle() reports them, and it returns 0 once the nodes are idle."""
    from quantroute.loadtest.stack import fleet_stack
    from support.fleet_capacity import climb
    from support.fleet_scrape import nodes_busy, settle

    async def go(stack) -> tuple[int, int, int]:
        body = {"model": "llama-13b", "max_tokens": 400, "temperature": 0.9, "ignore_eos": True,
                "messages": [{"role": "user", "content": "Tell me a long story."}]}
        async with httpx.AsyncClient(timeout=120) as client, httpx.AsyncClient(timeout=30) as scraper:
            left = [asyncio.create_task(client.post(f"{stack.router_url}/v1/chat/completions", json=body))
                    for _ in range(6)]
            for _ in range(600):  # 30 s for the requests to reach the nodes
                if await nodes_busy(scraper, stack.node_urls):
                    break
                await asyncio.sleep(0.05)
            at_once = await settle(scraper, stack.node_urls, 0.0)  # an earlier run's requests, still running
            with pytest.raises(RuntimeError, match="still on the nodes"):  # a run refuses to measure them
                await climb(stack, name="b", label="tiered", policy=policy, traffic=MIXED,
                            ladder=SHORT.model_copy(update={"settle_s": 0.0}), slo=Slo(ttft_p95_ms=60_000),
                            time_scale=0.5)
            after = await settle(scraper, stack.node_urls, 60.0)
            answered = [(await t).status_code for t in left].count(200)
            return at_once, after, answered

    policy = arms.adapt(BASE, FLEET)
    with fleet_stack(FLEET, policy, time_scale=0.5) as stack:
        at_once, after, answered = asyncio.run(go(stack))
    assert at_once > 0 and after == 0 and answered == 6
