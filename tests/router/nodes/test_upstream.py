"""The body read timeout: a node that sends its headers and then stalls. Streams end with an error event the
openai SDK raises on; non-streamed requests get a 502 in OpenAI's error JSON."""

from __future__ import annotations

import httpx
import openai
import pytest

from quantroute.router.testing import serve_app
from tests.router.conftest import FP16, INT4, INT8, MODEL, TOLERANT, admin, router_at, write_policy

STALL = "llama3-8b-stall-int4"
CHUNK = (b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"' + STALL.encode()
         + b'","choices":[{"index":0,"delta":{"role":"assistant","content":"first"}}]}\n\n')


async def stalling_node(scope, receive, send) -> None:
    """Healthy to probes; on a completion it sends headers (and for a stream one event), then nothing until
    the router hangs up."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    if scope["path"] in ("/health", "/metrics"):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b""})
        return
    if b'"stream": true' in body or b'"stream":true' in body:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
    else:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"400")]})
        await send({"type": "http.response.body", "body": b'{"id": "cmpl-stall", "choices": [', "more_body": True})
    while (await receive())["type"] != "http.disconnect":
        pass


@pytest.mark.parametrize("client", ["fast", "httpx"])
def test_stalled_upstream_ends_stream_with_error_event_and_non_stream_with_502(make_settings, policies, client):
    tiers = [{"name": "fp16", "deployments": {MODEL: [FP16]}}, {"name": "int8", "deployments": {MODEL: [INT8]}},
             {"name": "int4", "deployments": {MODEL: [INT4, STALL]}}]
    write_policy(policies, 1, tiers=tiers)
    kw = {"transport": httpx.AsyncHTTPTransport()} if client == "httpx" else {}
    with serve_app(stalling_node) as node_url, \
            router_at(make_settings(upstream_read_timeout_s=0.3), **kw) as (url, app):
        r = admin(url).post("/admin/nodes", json={"url": node_url, "model": MODEL, "deployment": STALL,
                                                  "tier": "int4", "format": "int4", "node_id": "stall-1"})
        assert r.status_code == 201, r.text
        sdk = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)

        stream = sdk.chat.completions.create(model=STALL, messages=TOLERANT, max_tokens=8, stream=True)
        got = []
        with pytest.raises(openai.APIError) as exc:
            for c in stream:
                got.append(c.choices[0].delta.content)
        assert got == ["first"]  # what the node sent reached the client before the error
        assert "sent nothing for 0.3s" in exc.value.message and exc.value.code == "upstream_timeout"

        r = httpx.post(url + "/v1/chat/completions", timeout=30,
                       json={"model": STALL, "messages": TOLERANT, "max_tokens": 8})
        assert r.status_code == 502
        err = r.json()["error"]
        assert err["code"] == "upstream_timeout" and "sent nothing for 0.3s" in err["message"]
        assert set(err) == {"message", "type", "param", "code"}

        metrics = httpx.get(url + "/metrics").text
        assert 'quantroute_upstream_errors_total{kind="timeout",tier="int4"} 2.0' in metrics
        # the broken stream counts as the 502 it ended as, like the non-streamed one (not as its 200 headers)
        assert f'quantroute_requests_total{{arm="",deployment="{STALL}",status="502",tier="int4"}} 2.0' in metrics
        assert f'deployment="{STALL}",status="200"' not in metrics
