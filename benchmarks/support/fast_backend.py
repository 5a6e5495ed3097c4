"""A minimal, fast OpenAI-compatible backend for the router overhead benchmark: fixed answers, no model.

Serve with: python benchmarks/support/fast_backend.py PORT [DEPLOYMENT_ID [THINK_MS]]  (uvicorn + httptools + uvloop).
THINK_MS: how long every completion waits before its first byte, standing in for a model's time to first token
(0: answer at once, the default)."""

from __future__ import annotations

import asyncio
import sys

import orjson

METRICS = (b"# HELP vllm:num_requests_waiting waiting\n# TYPE vllm:num_requests_waiting gauge\n"
           b'vllm:num_requests_waiting{model_name="m"} 0.0\n'
           b"# HELP vllm:num_requests_running running\n# TYPE vllm:num_requests_running gauge\n"
           b'vllm:num_requests_running{model_name="m"} 0.0\n'
           b"# HELP vllm:kv_cache_usage_perc kv\n# TYPE vllm:kv_cache_usage_perc gauge\n"
           b'vllm:kv_cache_usage_perc{model_name="m"} 0.0\n')
STREAM_CHUNKS = 8


def make_app(deployment: str = "bench-int4", think_s: float = 0.0):
    answer = orjson.dumps({
        "id": "cmpl-bench", "object": "chat.completion", "created": 0, "model": deployment,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})
    chunk = b"data: " + orjson.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": deployment,
                                      "choices": [{"index": 0, "delta": {"content": "tok"}}]}) + b"\n\n"
    json_h = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]

    async def app(scope, receive, send):
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                while True:
                    m = await receive()
                    await send({"type": m["type"] + ".complete"})
                    if m["type"] == "lifespan.shutdown":
                        return
            return
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        path = scope["path"]
        if path == "/metrics":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": METRICS})
            return
        if path == "/health":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if think_s:
            await asyncio.sleep(think_s)
        if b'"stream":true' in body.replace(b" ", b""):
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            for _ in range(STREAM_CHUNKS):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
            return
        await send({"type": "http.response.start", "status": 200, "headers": json_h})
        await send({"type": "http.response.body", "body": answer})

    return app


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(make_app(sys.argv[2] if len(sys.argv) > 2 else "bench-int4",
                         float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.0), host="127.0.0.1",
                port=int(sys.argv[1]), http="httptools", loop="uvloop", log_level="warning", access_log=False)
