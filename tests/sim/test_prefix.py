"""The simulated node's prefix cache (vLLM's automatic prefix caching): full prompt blocks hashed as a chain, kept
after their sequence ended, reused by a later prompt with the same prefix (its prefill skips them), evicted least
recently used only when KV room is needed, never beyond the node's KV capacity; hits counted as vLLM counts them."""

from __future__ import annotations

import httpx
import pytest

from quantroute.capacity import BLOCK_SIZE
from quantroute.sim import text
from quantroute.sim.engine import NodeEngine, Sequence, StepModel
from quantroute.sim.metrics import PREFIX_CACHE_COUNTERS, NodeMetrics
from quantroute.sim.prefix import PrefixCache, block_hashes

from .test_metrics import scrape, value

PREFILL_S_PER_TOKEN = 1e-4


def pieces(n: int, tag: str = "p") -> list[str]:
    return [f"{tag}{i}" for i in range(n)]


def test_block_hashes_chain_over_full_blocks_only():
    a = block_hashes(pieces(50))
    assert len(a) == 3  # 50 tokens: three full blocks of 16, the partial fourth is never cached
    assert block_hashes(pieces(48)) == a and block_hashes(pieces(64))[:3] == a
    changed = pieces(50)
    changed[0] = "other"
    assert not set(block_hashes(changed)) & set(a)  # a different first token changes every later block


def test_cache_matches_leading_blocks_and_evicts_least_recently_released_deepest_first():
    c = PrefixCache()
    x, y = block_hashes(pieces(64, "x")), block_hashes(pieces(64, "y"))
    c.hold(x)
    assert c.evict(10) == 0  # held blocks are never evicted
    c.release(x)
    c.hold(y)
    c.release(y)
    assert (c.blocks, c.evictable, c.match(x), c.match(y)) == (8, 8, 4, 4)
    assert c.evict(2) == 2  # x was released first; its deepest blocks go first
    assert (c.match(x), c.match(y)) == (2, 4)
    c.hold(x[:2])  # a hit is a use: x's prefix is now the most recently used
    c.release(x[:2])
    c.evict(4)
    assert (c.match(x), c.match(y)) == (2, 0)
    assert c.missing(y) == 4 and c.missing(x) == 2


def engine(kv_tokens: int, max_num_seqs: int = 8) -> NodeEngine:
    model = StepModel(decode_step_s=lambda batch, ctx: 0.01, prefill_s=lambda n: n * PREFILL_S_PER_TOKEN,
                      kv_capacity_tokens=kv_tokens)
    return NodeEngine(model=model, max_num_seqs=max_num_seqs, time_scale=1.0, metrics=NodeMetrics(model_name="m"))


def seq(prompt: list[str], output_tokens: int = 4) -> Sequence:
    return Sequence(prompt_tokens=len(prompt), output=text.Output(["x"] * output_tokens, "length"),
                    prompt_hashes=block_hashes(prompt))


def run_to_end(e: NodeEngine, s: Sequence) -> float:
    """Admit `s` alone, return the step's prefill share, and finish it."""
    e.waiting.append(s)
    admitted = e._admit()
    assert admitted == [s]
    prefill = e.step_cost(admitted) - 0.01
    while e.running:
        e._emit(0.01)
    return prefill


def test_a_repeated_prefix_skips_its_cached_blocks_in_prefill():
    e = engine(kv_tokens=100 * BLOCK_SIZE)
    system = pieces(100, "sys")
    first = run_to_end(e, seq([*system, *pieces(20, "q1")]))
    second = run_to_end(e, s2 := seq([*system, *pieces(20, "q2")]))
    assert first == pytest.approx(120 * PREFILL_S_PER_TOKEN)
    assert s2.cached_tokens == 96  # the six full blocks of the shared 100-token system prompt
    assert second == pytest.approx((120 - 96) * PREFILL_S_PER_TOKEN)
    third = run_to_end(e, s3 := seq([*system, *pieces(20, "q2")]))  # the same prompt again: all 7 full blocks
    assert s3.cached_tokens == 112 and third == pytest.approx(8 * PREFILL_S_PER_TOKEN)
    whole = run_to_end(e, s4 := seq(pieces(32, "w")))
    again = run_to_end(e, s5 := seq(pieces(32, "w")))
    assert s4.cached_tokens == 0 and whole == pytest.approx(32 * PREFILL_S_PER_TOKEN)
    assert s5.cached_tokens == 31  # a fully cached prompt still computes its last token, as vLLM does
    assert again == pytest.approx(1 * PREFILL_S_PER_TOKEN)
    assert value(scrape_registry(e), "vllm:prefix_cache_hits_total") == 96 + 112 + 31
    assert value(scrape_registry(e), "vllm:prefix_cache_queries_total") == 120 * 3 + 32 * 2


def scrape_registry(e: NodeEngine) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(e.metrics.render().decode()) for s in fam.samples}


def test_cache_is_bounded_by_kv_capacity_and_gives_way_to_running_sequences():
    e = engine(kv_tokens=12 * BLOCK_SIZE)
    prompts = [pieces(64, f"u{i}") for i in range(3)]  # 4 full blocks each (+1 block of output)
    for p in prompts:
        run_to_end(e, seq(p))
        assert e.used_blocks() <= e.kv_blocks
    # The third needed one block more than was free: the oldest prompt's deepest block made room
    assert e.cache.blocks == 11 and [e.cache.match(block_hashes(p)) for p in prompts] == [3, 4, 4]
    # Two running sequences of 5 blocks each need room: the least recently used prompts are evicted first
    a, b = seq(pieces(64, "new-a")), seq(pieces(64, "new-b"))
    e.waiting.extend([a, b])
    assert e._admit() == [a, b]
    assert e.used_blocks() <= e.kv_blocks
    assert e.cache.match(block_hashes(prompts[0])) == 0 and e.cache.match(block_hashes(prompts[2])) > 0
    # While they run nothing they hold can be evicted: a third one does not fit and waits
    c = seq(pieces(64, "new-c"))
    e.waiting.append(c)
    assert e._admit() == [] and list(e.waiting) == [c]


def test_chat_turns_extend_the_previous_turns_prompt_token_for_token():
    turn1 = {"messages": [{"role": "system", "content": "You are terse. " * 20},
                          {"role": "user", "content": "first question about the fleet"}]}
    turn2 = {"messages": [*turn1["messages"], {"role": "assistant", "content": "an answer"},
                          {"role": "user", "content": "and a follow-up"}]}
    p1, p2 = text.prompt_pieces(turn1), text.prompt_pieces(turn2)
    assert p2[:len(p1)] == p1
    assert len(p1) == text.prompt_tokens(turn1) and len(p2) == text.prompt_tokens(turn2)
    assert len(text.prompt_pieces({"prompt": "abcdefghi"})) == text.prompt_tokens({"prompt": "abcdefghi"}) == 3


def test_node_exports_prefix_cache_hits_under_vllms_names(sim):
    url = sim.urls["int4"]
    body = {"model": "llama3-8b", "max_tokens": 4, "ignore_eos": True,
            "messages": [{"role": "system", "content": "Shared instructions for every turn. " * 30},
                         {"role": "user", "content": "question one"}]}
    before = scrape(url)
    assert httpx.post(url + "/v1/chat/completions", json=body, timeout=30).status_code == 200
    mid = scrape(url)
    assert httpx.post(url + "/v1/chat/completions", json=body, timeout=30).status_code == 200
    after = scrape(url)
    tokens = text.prompt_tokens(body)
    queries, hits = (f"{name}_total" for name in PREFIX_CACHE_COUNTERS)
    assert value(mid, queries) - value(before, queries) == tokens
    assert value(after, queries) - value(mid, queries) == tokens
    assert value(after, hits) - value(mid, hits) == min(tokens // BLOCK_SIZE * BLOCK_SIZE, tokens - 1) > 0
