"""One simulated vLLM node as a Starlette app: the OpenAI-compatible API, /metrics, and the /sim/* knobs.

The node answers to its deployment id and to its logical model name (like vLLM started with
`--served-model-name <deployment-id> <model>`), and always names the deployment id in responses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from quantroute import capacity
from quantroute.capacity import GpuSpec, ModelShape
from quantroute.fleet import Faults, NodeSpec
from quantroute.sim import quality, text
from quantroute.sim.engine import NodeEngine, Sequence, StepModel
from quantroute.sim.metrics import NodeMetrics
from quantroute.sim.prefix import block_hashes
from quantroute.sim.protocol import ApiError, Completion, GenerationParams, parse_params, sse
from quantroute.tracing import Tracing

SIM_VERSION = "0.1.0+quantroute-sim"


@dataclass
class NodeSettings:
    """Everything a node needs; built by the fleet server from the fleet file and the data tables."""

    node: NodeSpec
    shape: ModelShape
    gpu: GpuSpec
    time_scale: float = 1.0
    suites: dict[str, quality.EvalItem] = field(default_factory=dict)
    quality: quality.QualityTable | None = None
    seed: int = 0
    on_die: Callable[[], None] | None = None  # stops this node's server (die_after)
    tracing: Tracing | None = None  # continue callers' traces, as vLLM started with --otlp-traces-endpoint does


def step_model(s: NodeSettings) -> StepModel:
    fmt = capacity.weight_format(s.node.deployment.format)
    return StepModel(
        decode_step_s=lambda batch, ctx: capacity.decode_step_s(s.shape, fmt, s.gpu, batch=batch, context_tokens=ctx),
        prefill_s=lambda tokens: capacity.prefill_s(s.shape, s.gpu, tokens),
        kv_capacity_tokens=capacity.kv_capacity_tokens(s.shape, fmt, s.gpu, vram_gb=s.node.vram_gb),
    )


class NodeState:
    """The node's mutable state, owned by its app (no module-level state)."""

    def __init__(self, settings: NodeSettings):
        self.settings = settings
        self.faults = settings.node.faults.model_copy()
        dep = settings.node.deployment
        self.metrics = NodeMetrics(model_name=dep.id)
        self.engine = NodeEngine(model=step_model(settings), max_num_seqs=settings.node.max_num_seqs,
                                 time_scale=settings.time_scale, metrics=self.metrics,
                                 latency_factor=lambda: self.faults.latency_factor)
        self.rng = random.Random(f"{settings.seed}:{settings.node.id}")
        self.handled = 0
        self.names = {dep.id, dep.model}
        # the W3C traceparent of each recent request that sent one (GET /sim/info), newest last
        self.traceparents: deque[str] = deque(maxlen=64)

    def check_die(self) -> None:
        die_after = self.faults.die_after
        if die_after is not None and self.handled >= die_after and self.settings.on_die:
            self.settings.on_die()


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status)


def plan(state: NodeState, params: GenerationParams, body: dict) -> tuple[int, text.Output]:
    """Prompt tokens and the output this node will produce, or a 400 as vLLM words it."""
    s = state.settings
    prompt_tokens = text.prompt_tokens(body)
    limit = s.node.max_model_len
    wanted = params.requested_tokens
    if prompt_tokens >= limit or (wanted is not None and prompt_tokens + wanted > limit):
        raise ApiError(400, f"This model's maximum context length is {limit} tokens. However, you requested "
                       f"{prompt_tokens + (wanted or 0)} tokens ({prompt_tokens} in the messages, {wanted or 0} "
                       "in the completion). Please reduce the length of the messages or completion.", "max_tokens")
    key = quality.prompt_key(body)
    item = s.suites.get(key)
    answer = None
    dep = s.node.deployment
    if item is not None and s.quality is not None:
        answer, _ = quality.answer(item, tier=dep.tier, deployment_id=dep.id, table=s.quality, seed=s.seed)
    elif s.quality is not None and body.get("temperature") == 0 and key:
        # greedy: the FP16 answer, or at lower tiers with the table's probability a drifted one (shadow pairs)
        answer = text.greedy_answer(key, quality.task_type(body), tier=dep.tier, deployment_id=dep.id,
                                    table=s.quality, seed=s.seed)
    out = text.plan_output(key=f"{params.seed}|{s.node.deployment.id}|{key}", answer=answer,
                           max_tokens=wanted or (limit - prompt_tokens), stop=params.stop_list,
                           ignore_eos=params.ignore_eos)
    return prompt_tokens, out


async def generate(request: Request, *, chat: bool) -> Response:
    state: NodeState = request.app.state.node
    parent = request.headers.get("traceparent")
    if parent is not None:
        state.traceparents.append(parent)
    if state.settings.tracing is None:
        return await _generate(request, state, chat=chat, span=None)
    span = state.settings.tracing.start("llm_request", traceparent=parent, kind="server", attributes={
        "gen_ai.system": "vllm", "gen_ai.response.model": state.settings.node.deployment.id})
    try:
        response = await _generate(request, state, chat=chat, span=span)
    except BaseException:
        Tracing.end(span, error="request failed")
        raise
    if not isinstance(response, StreamingResponse):  # a stream's span ends with the stream
        Tracing.end(span, {"http.response.status_code": response.status_code},
                    error=None if response.status_code < 500 else f"status {response.status_code}")
    return response


async def _generate(request: Request, state: NodeState, *, chat: bool, span: Any) -> Response:
    try:
        body = json.loads(await request.body() or b"null")
    except json.JSONDecodeError as e:
        return error_response(ApiError(400, f"Invalid JSON body: {e}"))
    try:
        params = parse_params(body, chat=chat)
        if params.model not in state.names:
            raise ApiError(404, f"The model `{params.model}` does not exist.", "model")
        prompt_tokens, out = plan(state, params, body)
    except ApiError as e:
        return error_response(e)
    state.handled += 1
    if state.rng.random() < state.faults.error_rate:
        state.check_die()
        return error_response(ApiError(500, "Simulated fault: the node failed this request (error_rate)."))
    if state.faults.extra_latency_ms:
        await asyncio.sleep(state.faults.extra_latency_ms / 1000)
    seq = state.engine.submit(Sequence(prompt_tokens=prompt_tokens, output=out,
                                       prompt_hashes=block_hashes(text.prompt_pieces(body))))
    shape = Completion(chat=chat, model=state.settings.node.deployment.id)
    if params.stream:
        return StreamingResponse(stream(state, seq, shape, params.include_usage, span),
                                 media_type="text/event-stream")
    finished = False
    try:
        finished = await until_done_or_gone(seq, request)
    finally:
        if not finished:  # the client went away mid-generation (or the server is stopping)
            state.engine.abort(seq)
        state.check_die()
    if not finished:
        return Response(status_code=499)  # nobody reads it (nginx's "client closed request")
    usage = Completion.usage(prompt_tokens, len(out.tokens))
    if span is not None:
        span.set_attributes({"gen_ai.usage.input_tokens": prompt_tokens, "gen_ai.usage.output_tokens": len(out.tokens)})
    return JSONResponse(shape.full(out.text, out.finish_reason, usage))


async def until_done_or_gone(seq: Sequence, request: Request) -> bool:
    """Wait for the sequence's last token (True) or for the client to disconnect (False), whichever comes first.

    A non-streamed answer is written only once it is complete, so nothing else would notice a client that left:
    the sequence would keep its batch slot and KV blocks to the end, where vLLM's server aborts the request as
    soon as its connection closes. (A stream notices through Starlette, which cancels it: see `stream`.)"""

    async def last_token() -> None:
        while (await seq.tokens.get()).finish_reason is None:
            pass

    async def disconnect() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    done, gone = asyncio.ensure_future(last_token()), asyncio.ensure_future(disconnect())
    try:
        await asyncio.wait((done, gone), return_when=asyncio.FIRST_COMPLETED)
        return done.done() and not done.cancelled() and done.exception() is None
    finally:
        for t in (done, gone):
            t.cancel()
        await asyncio.gather(done, gone, return_exceptions=True)


async def stream(state: NodeState, seq: Sequence, shape: Completion, include_usage: bool, span: Any = None):
    """Role chunk with the first token (chat only), one chunk per token with finish_reason on the last, the usage
    chunk when asked, then [DONE]. A client that goes away aborts the sequence, freeing its batch slot."""
    finished = False
    try:
        first = True
        while True:
            tok = await seq.tokens.get()
            if first and shape.chat:
                yield sse(shape.role_chunk())
            first = False
            yield sse(shape.content_chunk(tok.text, tok.finish_reason))
            if tok.finish_reason is not None:
                break
        finished = True
        if include_usage:
            yield sse(shape.usage_chunk(Completion.usage(seq.prompt_tokens, len(seq.output.tokens))))
        yield sse("[DONE]")
    finally:
        if not finished:
            state.engine.abort(seq)
        state.check_die()
        if span is not None:
            Tracing.end(span, {"gen_ai.usage.input_tokens": seq.prompt_tokens,
                               "gen_ai.usage.output_tokens": len(seq.output.tokens)},
                        error=None if finished else "stream cut")


async def models(request: Request) -> Response:
    node = request.app.state.node.settings.node
    dep = node.deployment
    cards = [{"id": name, "object": "model", "created": request.app.state.started, "owned_by": "vllm",
              "root": dep.id, "parent": None, "max_model_len": node.max_model_len} for name in (dep.id, dep.model)]
    return JSONResponse({"object": "list", "data": cards})


async def health(request: Request) -> Response:
    return Response(status_code=200)


async def version(request: Request) -> Response:
    return JSONResponse({"version": SIM_VERSION})


async def metrics(request: Request) -> Response:
    return Response(request.app.state.node.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


async def faults(request: Request) -> Response:
    """GET the fault knobs, or POST some of them (JSON) to change them at once; 400 names a bad field."""
    state: NodeState = request.app.state.node
    if request.method == "POST":
        try:
            update = json.loads(await request.body() or b"{}")
            state.faults = Faults.model_validate({**state.faults.model_dump(), **update})
        except (json.JSONDecodeError, TypeError) as e:
            return error_response(ApiError(400, f"Invalid JSON body: {e}"))
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(map(str, err["loc"])) or None
            return error_response(ApiError(400, f"{loc}: {err['msg']}", loc))
        state.check_die()
    return JSONResponse(state.faults.model_dump())


async def info(request: Request) -> Response:
    """What the node is and what the capacity model says about it (for demos and debugging)."""
    state: NodeState = request.app.state.node
    s = state.settings
    fmt = capacity.weight_format(s.node.deployment.format)
    return JSONResponse({
        "node": s.node.model_dump(mode="json"), "gpu": s.gpu.key, "model_shape": s.shape.name,
        "time_scale": s.time_scale, "kv_capacity_tokens": state.engine.model.kv_capacity_tokens,
        "decode_step_s_batch1": capacity.decode_step_s(s.shape, fmt, s.gpu, batch=1, context_tokens=0),
        "running": len(state.engine.running), "waiting": len(state.engine.waiting), "steps": state.engine.steps,
        "kv_blocks": state.engine.kv_blocks, "kv_blocks_used": state.engine.used_blocks(),
        "prefix_cache_blocks": state.engine.cache.blocks, "prefix_cache_evictable": state.engine.cache.evictable,
        "traceparents": list(state.traceparents),
    })


def create_node_app(settings: NodeSettings) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        task = asyncio.create_task(app.state.node.engine.run(), name=f"engine-{settings.node.id}")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def chat(request: Request) -> Response:
        return await generate(request, chat=True)

    async def completions(request: Request) -> Response:
        return await generate(request, chat=False)

    app = Starlette(lifespan=lifespan, routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/models", models), Route("/health", health), Route("/version", version),
        Route("/metrics", metrics), Route("/sim/faults", faults, methods=["GET", "POST"]), Route("/sim/info", info),
    ])
    app.state.node = NodeState(settings)
    app.state.started = int(time.time())
    return app
