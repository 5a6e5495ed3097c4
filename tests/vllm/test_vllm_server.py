"""Facts about a real vLLM 0.32 (CPU) that the router and the simulator rely on, checked against the real
server with the real openai SDK. See tests/vllm/README.md for the shapes written out."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(600)]

NO_EOS = {"ignore_eos": True}  # random weights: make the token counts exact


@pytest.fixture(scope="module")
def client(vllm_server):
    with openai.OpenAI(base_url=f"{vllm_server.url}/v1", api_key="unused", max_retries=0, timeout=120) as c:
        yield c


def metrics(url: str) -> dict[str, list]:
    """family name -> samples, parsed with prometheus_client's own parser."""
    text = httpx.get(f"{url}/metrics", timeout=60).text
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_models_lists_every_served_name_deployment_first(client, vllm_server):
    models = client.models.list().data
    assert [m.id for m in models] == [vllm_server.deployment, vllm_server.model]
    raw = httpx.get(f"{vllm_server.url}/v1/models").json()
    assert raw["object"] == "list"
    assert {k: raw["data"][0][k] for k in ("object", "owned_by", "max_model_len")} == {
        "object": "model", "owned_by": "vllm", "max_model_len": 512}


def test_chat_names_the_first_served_model_whatever_alias_was_asked(client, vllm_server):
    resp = client.chat.completions.create(model=vllm_server.model, max_tokens=8, extra_body=NO_EOS,
                                          messages=[{"role": "user", "content": "Say hello."}])
    assert resp.model == vllm_server.deployment
    assert resp.object == "chat.completion" and resp.id.startswith("chatcmpl-")
    choice = resp.choices[0]
    assert (choice.finish_reason, choice.message.role) == ("length", "assistant")
    assert resp.usage.completion_tokens == 8
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + 8


def test_chat_stream_chunks(client, vllm_server):
    chunks = list(client.chat.completions.create(
        model=vllm_server.model, max_tokens=6, stream=True, stream_options={"include_usage": True},
        extra_body=NO_EOS, messages=[{"role": "user", "content": "Count to three."}]))
    assert {c.model for c in chunks} == {vllm_server.deployment}
    assert len({c.id for c in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"
    # First chunk: the role with empty content; then about one chunk per token (a byte-level token that
    # ends inside a UTF-8 character is held back and sent with the next one); the last token's chunk
    # carries finish_reason; with include_usage a final chunk has no choices and the usage.
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    token_chunks = [c for c in chunks[1:] if c.choices]
    assert 1 <= len(token_chunks) <= 6
    assert [c.choices[0].finish_reason for c in token_chunks] == [None] * (len(token_chunks) - 1) + ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6


def test_chat_stream_raw_sse_framing(vllm_server):
    body = {"model": vllm_server.model, "max_tokens": 3, "stream": True, "ignore_eos": True,
            "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", f"{vllm_server.url}/v1/chat/completions", json=body, timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        text = r.read().decode()
    events = text.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    # The role chunk, then one chunk per (detokenized) token.
    assert all(e.startswith("data: {") for e in events[:-2]) and 2 <= len(events[:-2]) <= 4


def test_completions_plain_and_streamed(client, vllm_server):
    resp = client.completions.create(model=vllm_server.model, prompt="the router", max_tokens=5, extra_body=NO_EOS)
    assert (resp.model, resp.object, resp.choices[0].finish_reason) == (vllm_server.deployment, "text_completion",
                                                                        "length")
    assert resp.usage.completion_tokens == 5
    chunks = list(client.completions.create(model=vllm_server.deployment, prompt="the router", max_tokens=4,
                                            stream=True, stream_options={"include_usage": True},
                                            extra_body=NO_EOS))
    assert {c.object for c in chunks} == {"text_completion"} and {c.model for c in chunks} == {
        vllm_server.deployment}
    text_chunks = [c for c in chunks if c.choices]
    assert 1 <= len(text_chunks) <= 4
    assert [c.choices[0].finish_reason for c in text_chunks][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 4


def test_errors_use_openai_error_json(client, vllm_server):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    assert e.value.body["param"] == "model" and "does not exist" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=vllm_server.model, prompt="x", max_tokens=600)
    assert e.value.body["param"] == "max_tokens" and "max_model_len=512" in e.value.body["message"]


def test_metrics_names_and_labels(client, vllm_server):
    client.completions.create(model=vllm_server.model, prompt="count", max_tokens=3, extra_body=NO_EOS)
    fams = metrics(vllm_server.url)
    labels = {"engine": "0", "model_name": vllm_server.deployment}
    for gauge in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"):
        [sample] = fams[gauge]
        assert sample.labels == labels, gauge
    # The older name is gone in 0.32: scrapers must read kv_cache_usage_perc and treat gpu_cache_* as optional.
    assert "vllm:gpu_cache_usage_perc" not in fams
    reasons = {s.labels["reason"] for s in fams["vllm:num_requests_waiting_by_reason"]}
    assert reasons == {"capacity", "deferred"}
    success = {s.labels["finished_reason"]: s.value for s in fams["vllm:request_success"]
               if s.name == "vllm:request_success_total"}
    assert success["length"] >= 1 and {"stop", "length", "abort"} <= set(success)
    assert any(s.value >= 3 for s in fams["vllm:generation_tokens"] if s.name == "vllm:generation_tokens_total")
    for hist in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                 "vllm:inter_token_latency_seconds", "vllm:request_queue_time_seconds"):
        assert any(s.name == f"{hist}_count" and s.value >= 1 for s in fams[hist]), hist


def test_prefix_cache_counters_are_the_ones_the_simulator_exports(vllm_server):
    """vLLM's automatic prefix caching, counted in tokens: every prompt token is a query, a token found in the
    cache a hit. The simulator exports the same two counters (tests/sim/test_prefix.py); here the names, and
    that a repeated prompt longer than one KV block (128 tokens on the CPU build) hits."""
    from quantroute.sim.metrics import PREFIX_CACHE_COUNTERS

    fams = metrics(vllm_server.url)
    for name in PREFIX_CACHE_COUNTERS:
        assert fams[name], name
        assert {s.name for s in fams[name]} == {f"{name}_total"}, name
        assert all(s.labels == {"engine": "0", "model_name": vllm_server.deployment} for s in fams[name])

    def total(fams, name: str) -> float:
        return sum(s.value for s in fams[name] if s.name == f"{name}_total")

    body = {"model": vllm_server.model, "prompt": "the router keeps a session on its node " * 30, "max_tokens": 2}
    httpx.post(f"{vllm_server.url}/v1/completions", json=body, timeout=120).raise_for_status()
    mid = metrics(vllm_server.url)
    r = httpx.post(f"{vllm_server.url}/v1/completions", json=body, timeout=120)
    r.raise_for_status()
    after = metrics(vllm_server.url)
    prompt_tokens = r.json()["usage"]["prompt_tokens"]
    assert prompt_tokens > 128
    queries, hits = PREFIX_CACHE_COUNTERS
    assert total(after, queries) - total(mid, queries) == prompt_tokens
    assert total(after, hits) - total(mid, hits) >= 128  # at least the first full block came from the cache


def histogram(url: str, name: str) -> tuple[float, float]:
    """(sum of seconds, number of requests) of one of vLLM's per-request histograms."""
    samples = metrics(url)[name]

    def pick(suffix):
        return next(s.value for s in samples if s.name.endswith(suffix))

    return pick("_sum"), pick("_count")


def test_requests_queue_past_max_num_seqs(vllm_server):
    """With --max-num-seqs 2, a burst of 16 requests queues: the router's load signal is real. A burst counts as
    queued when the `num_requests_waiting` gauge read > 0 mid-burst, or when vLLM's queue-time histogram (recorded
    per finished request, which a scrape cannot miss) says its requests waited at least a quarter of the time they
    ran (16 equal requests arriving at once through 2 slots wait 3.5x; a ratio holds on a fast host as on a slow
    one). A client starved by the 2-core host spreads a burst's arrivals, so bursts repeat to a deadline."""
    url = vllm_server.url
    seen: list[tuple[float, float]] = []
    bursts: list[tuple[float, float, float]] = []  # (seconds queued, seconds running, requests) per burst
    deadline = time.monotonic() + 120
    body = {"model": vllm_server.model, "prompt": "the router", "max_tokens": 400, "ignore_eos": True}

    def post():
        httpx.post(f"{url}/v1/completions", json=body, timeout=120).raise_for_status()

    def queued() -> bool:
        return any(w > 0 for w, _ in seen) or any(q >= run / 4 > 0 for q, run, _ in bursts)

    while time.monotonic() < deadline and not queued():
        q0, n0 = histogram(url, "vllm:request_queue_time_seconds")
        i0, _ = histogram(url, "vllm:request_inference_time_seconds")
        burst = [threading.Thread(target=post) for _ in range(16)]
        for t in burst:
            t.start()
        while any(t.is_alive() for t in burst):
            fams = metrics(url)
            seen.append((fams["vllm:num_requests_waiting"][0].value, fams["vllm:num_requests_running"][0].value))
            time.sleep(0.05)  # scrapes share vLLM's API process with the burst: back to back, they delay it
        for t in burst:
            t.join()
        q1, n1 = histogram(url, "vllm:request_queue_time_seconds")
        i1, _ = histogram(url, "vllm:request_inference_time_seconds")
        bursts.append((q1 - q0, i1 - i0, n1 - n0))
    assert all(n == 16 for _, _, n in bursts), bursts
    # 16 requests of 400 tokens through 2 slots: most wait for several others to finish
    assert queued(), (bursts, seen[-5:])
    assert max(r for _, r in seen) <= 2  # never more running than --max-num-seqs
    assert metrics(url)["vllm:num_requests_waiting"][0].value == 0  # drained
    print(f"waiting gauge seen > 0 in {sum(w > 0 for w, _ in seen)} of {len(seen)} scrapes; per burst "
          "(queued s, running s): " + ", ".join(f"({q:.2f}, {r:.2f})" for q, r, _ in bursts))


def test_node_inspect_on_the_tiny_model_says_fp16_tier(vllm_server):
    out = subprocess.run([sys.executable, "-m", "quantroute.cli.main", "node", "inspect", "--json",
                          str(vllm_server.model_dir)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert (r["tier"], r["format"], r["method"], r["torch_dtype"]) == ("fp16", "bf16", "none", "bfloat16")
    assert r["dtype_histogram"] == {"BF16": 21}
