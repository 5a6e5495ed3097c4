"""The OpenAI API of a simulated node, through the real openai SDK and raw SSE lines."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from openai import OpenAI


def client(sim, node: str) -> OpenAI:
    return OpenAI(base_url=sim.urls[node] + "/v1", api_key="unused", max_retries=0)


def test_chat_answers_to_both_names_and_always_names_the_deployment(sim):
    for name in ("llama3-8b", "llama3-8b-awq-w4a16"):
        r = client(sim, "int4").chat.completions.create(
            model=name, messages=[{"role": "user", "content": "Tell me about tiers."}], max_tokens=12)
        assert r.model == "llama3-8b-awq-w4a16"
        assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
        assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 12
        assert r.usage.total_tokens == r.usage.prompt_tokens + 12


def test_text_completion_and_deterministic_filler(sim):
    c = client(sim, "fp16")
    a = c.completions.create(model="llama3-8b", prompt="Once upon a time", max_tokens=20, seed=7)
    b = c.completions.create(model="llama3-8b-fp16", prompt="Once upon a time", max_tokens=20, seed=7)
    assert a.object == "text_completion" and a.model == "llama3-8b-fp16"
    assert a.choices[0].text == b.choices[0].text and a.choices[0].text
    other = c.completions.create(model="llama3-8b", prompt="Once upon a time", max_tokens=20, seed=8)
    assert other.choices[0].text != a.choices[0].text


def test_stop_and_ignore_eos(sim):
    c = client(sim, "fp16")
    full = c.completions.create(model="llama3-8b", prompt="p", max_tokens=40, seed=1).choices[0].text
    word = full.split()[3]
    cut = c.completions.create(model="llama3-8b", prompt="p", max_tokens=40, seed=1, stop=[word]).choices[0]
    assert cut.finish_reason == "stop" and word not in cut.text and full.startswith(cut.text)
    long = c.completions.create(model="llama3-8b", prompt="p", max_tokens=300, seed=1,
                                extra_body={"ignore_eos": True})
    assert long.usage.completion_tokens == 300 and long.choices[0].finish_reason == "length"
    natural = c.completions.create(model="llama3-8b", prompt="p", max_tokens=300, seed=1)
    assert natural.choices[0].finish_reason == "stop" and natural.usage.completion_tokens < 300


def test_openai_sdk_stream_role_first_finish_on_last_content_then_usage(sim):
    stream = client(sim, "int4").chat.completions.create(
        model="llama3-8b", messages=[{"role": "user", "content": "Stream please"}], max_tokens=6, stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    content = chunks[1:-1]
    assert len(content) == 6 and all(c.model == "llama3-8b-awq-w4a16" for c in chunks)
    assert [c.choices[0].finish_reason for c in content] == [None] * 5 + ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")


def test_raw_sse_lines_have_vllms_exact_shape(sim):
    body = {"model": "llama3-8b", "messages": [{"role": "user", "content": "raw"}], "max_tokens": 3,
            "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", sim.urls["fp16"] + "/v1/chat/completions", json=body) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = list(r.iter_lines())
    assert lines[1::2] == [""] * (len(lines) // 2)  # every event ends with a blank line
    events = lines[0::2]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    head = {"id", "object", "created", "model", "choices"}
    assert all(set(c) == head for c in chunks[:-1]) and set(chunks[-1]) == head | {"usage"}
    assert chunks[0]["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                     "logprobs": None, "finish_reason": None}]
    assert set(chunks[1]["choices"][0]) == {"index", "delta", "logprobs", "finish_reason"}
    assert chunks[3]["choices"][0]["finish_reason"] == "length" and chunks[3]["choices"][0]["stop_reason"] is None
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}


def test_raw_completion_stream_without_usage(sim):
    body = {"model": "llama3-8b", "prompt": "raw", "max_tokens": 2, "stream": True}
    with httpx.stream("POST", sim.urls["fp16"] + "/v1/completions", json=body) as r:
        events = [line for line in r.iter_lines() if line]
    assert len(events) == 3 and events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, "length"]
    assert chunks[0]["object"] == "text_completion" and "usage" not in chunks[-1]


def test_models_health_version(sim):
    models = httpx.get(sim.urls["int4"] + "/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["llama3-8b-awq-w4a16", "llama3-8b"]
    assert models["data"][0]["max_model_len"] == 2048 and models["data"][0]["owned_by"] == "vllm"
    assert client(sim, "int4").models.list().data[0].id == "llama3-8b-awq-w4a16"
    assert httpx.get(sim.urls["int4"] + "/health").status_code == 200
    assert "quantroute-sim" in httpx.get(sim.urls["int4"] + "/version").json()["version"]


def test_errors_as_vllm_gives_them(sim):
    c = client(sim, "fp16")
    with pytest.raises(openai.NotFoundError) as e:
        c.chat.completions.create(model="llama3-70b", messages=[{"role": "user", "content": "x"}])
    assert e.value.body["type"] == "NotFoundError" and "`llama3-70b` does not exist" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="llama3-8b", messages=[{"role": "user", "content": "x"}], max_tokens=4096)
    assert "maximum context length is 2048 tokens" in e.value.body["message"] and e.value.body["code"] == 400
    r = httpx.post(sim.urls["fp16"] + "/v1/chat/completions", json={"model": "llama3-8b", "messages": []})
    assert r.status_code == 400 and r.json() == {"error": {
        "message": "messages: a chat completion needs a non-empty list of messages", "type": "BadRequestError",
        "param": "messages", "code": 400}}
    r = httpx.post(sim.urls["fp16"] + "/v1/completions", content=b"{not json")
    assert r.status_code == 400 and r.json()["error"]["type"] == "BadRequestError"
    r = httpx.post(sim.urls["fp16"] + "/v1/completions", json={"model": "llama3-8b", "prompt": "x", "n": 2})
    assert r.status_code == 400 and r.json()["error"]["param"] == "n"


def test_metrics_have_no_created_series_like_vllm():
    from quantroute.sim.metrics import NodeMetrics

    text = NodeMetrics(model_name="m").render().decode()
    assert "vllm:e2e_request_latency_seconds_bucket" in text and "_created" not in text
