"""/metrics in vLLM's names and labels, parsed by prometheus_client; batching visible as running/waiting."""

from __future__ import annotations

import threading

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import wait_until

REQUIRED = {
    "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge", "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prompt_tokens": "counter", "vllm:generation_tokens": "counter", "vllm:request_success": "counter",
    "vllm:time_to_first_token_seconds": "histogram", "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram", "vllm:request_queue_time_seconds": "histogram",
    "vllm:prefix_cache_queries": "counter", "vllm:prefix_cache_hits": "counter",
}


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value."""
    text = httpx.get(url + "/metrics").text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def value(samples, name: str, **labels) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items())


def test_every_vllm_metric_is_there_with_engine_and_model_name_labels(sim):
    text = httpx.get(sim.urls["fp16"] + "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, kind in REQUIRED.items():
        assert families[name].type == kind, name
    for fam in families.values():
        for s in fam.samples:
            assert s.labels["model_name"] == "llama3-8b-fp16" and s.labels["engine"] == "0"


def test_counters_follow_requests(sim):
    url = sim.urls["fp16"]
    before = scrape(url)
    r = httpx.post(url + "/v1/completions", json={"model": "llama3-8b", "prompt": "x" * 40, "max_tokens": 5})
    assert r.status_code == 200
    after = scrape(url)
    assert value(after, "vllm:prompt_tokens_total") - value(before, "vllm:prompt_tokens_total") == 10
    assert value(after, "vllm:generation_tokens_total") - value(before, "vllm:generation_tokens_total") == 5
    assert (value(after, "vllm:request_success_total", finished_reason="length")
            - value(before, "vllm:request_success_total", finished_reason="length")) == 1
    for h in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
              "vllm:request_queue_time_seconds"):
        assert value(after, h + "_count") - value(before, h + "_count") == 1
    itl_count = "vllm:inter_token_latency_seconds_count"
    assert value(after, itl_count) - value(before, itl_count) == 4


def test_a_node_at_max_num_seqs_queues_the_rest(sim):
    """`small` has max_num_seqs=2: with 5 long requests in flight, 2 run and 3 wait, as its metrics show."""
    url = sim.urls["small"]
    # slow the node down so the requests are surely still in flight when scraped (a machine may be slow too)
    httpx.post(url + "/sim/faults", json={"latency_factor": 100}).raise_for_status()
    body = {"model": "llama3-8b", "prompt": "hold", "max_tokens": 1500, "stream": True,
            "extra": "ignored", "ignore_eos": True}
    stop = threading.Event()

    def hold() -> None:
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
            for _ in r.iter_lines():
                if stop.is_set():
                    return

    threads = [threading.Thread(target=hold) for _ in range(5)]
    for t in threads:
        t.start()
    try:
        def steady() -> str | None:
            s = scrape(url)
            # steady state: all 5 admitted or queued (a scrape can land while a request is still arriving)
            if value(s, "vllm:num_requests_waiting") == 3 and value(s, "vllm:num_requests_running") == 2:
                return s
            return None

        s = wait_until(steady, what="2 requests running and 3 waiting", timeout=10, interval=0.02)
        assert value(s, "vllm:num_requests_running") == 2
        assert value(s, "vllm:num_requests_waiting") == 3
        assert 0 < value(s, "vllm:kv_cache_usage_perc") < 1
    finally:
        httpx.post(url + "/sim/faults", json={"latency_factor": 1})
        stop.set()
        for t in threads:
            t.join(10)
    # the aborted streams free their batch slots
    wait_until(lambda: not value(scrape(url), "vllm:num_requests_running"), what="no request running", timeout=10,
               interval=0.02)
    s = scrape(url)
    assert value(s, "vllm:num_requests_running") == 0 and value(s, "vllm:num_requests_waiting") == 0
