"""Runs a paired eval: every suite item is asked of both arms (baseline and candidate deployment) with the same
decode parameters over httpx, concurrently, with timeouts and bounded retries; answers are graded, compared
and gated, and the run is stored (DB and JSONL). Works against any OpenAI-compatible endpoint: the router,
the simulated fleet or vLLM directly; the deployment id is sent as `model`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable
from typing import Any

import httpx
from pydantic import BaseModel, Field

from quantroute.evals.graders import Grade, grade
from quantroute.evals.suite import EvalItem, Suite
from quantroute.tiers import Tier, parse_tier
from quantroute.tracing import Tracing

Progress = Callable[[int, int], None]  # (answers done, answers total)
ARMS = ("baseline", "candidate")


class EvalSetupError(ValueError):
    """An arm cannot be used (bad spec, endpoint down, deployment unknown); nothing was run."""


class Endpoint(BaseModel):
    base_url: str  # ends in /v1
    deployment: str | None = None


def parse_endpoint(spec: str) -> Endpoint:
    """`URL[#deployment]`, e.g. `http://127.0.0.1:8000#llama3-8b-awq-w4a16`; `/v1` is added when missing."""
    url, _, dep = spec.partition("#")
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise EvalSetupError(f"endpoint {spec!r}: expected URL[#deployment] with an http(s) URL")
    if not url.endswith("/v1"):
        url += "/v1"
    return Endpoint(base_url=url, deployment=dep.strip() or None)


class Arm(BaseModel):
    """One side of the comparison, with the artifact metadata stored alongside the run."""
    name: str
    url: str
    deployment: str
    tier: Tier | None = None
    artifact: dict[str, Any] = Field(default_factory=dict)
    artifact_source: str = ""  # policy | endpoint | none


class RunSettings(BaseModel):
    concurrency: int = Field(default=8, ge=1, le=256)  # requests in flight per arm
    timeout_s: float = Field(default=60.0, gt=0)
    retries: int = Field(default=2, ge=0, le=10)  # extra attempts on connect errors, timeouts, 429 and 5xx
    grade_workers: int = Field(default=2, ge=1)  # code answers run in subprocesses; the machine is small


class Answer(BaseModel):
    text: str = ""
    finish_reason: str | None = None
    model: str = ""
    latency_ms: float | None = None
    attempts: int = 0
    error: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class ItemResult(BaseModel):
    item_id: str
    category: str
    arm: str
    answer: Answer
    grade: Grade


def _tier_guess(*values: Any) -> Tier | None:
    for v in values:
        if isinstance(v, str) and v:
            try:
                return parse_tier(v)
            except ValueError:
                continue
    return None


async def resolve_arm(client: httpx.AsyncClient, name: str, endpoint: Endpoint, policy: Any | None) -> Arm:
    """Pick the deployment (the endpoint's only model when none is named) and find its artifact metadata:
    the policy's `deployments` entry first, else what the endpoint's `/v1/models` reports."""
    try:
        r = await client.get(f"{endpoint.base_url}/models")
        r.raise_for_status()
        models = [m for m in r.json().get("data", []) if isinstance(m, dict)]
    except (httpx.HTTPError, ValueError) as e:
        raise EvalSetupError(f"{name}: cannot list models at {endpoint.base_url}/models: {e}") from None
    ids = [str(m.get("id")) for m in models]
    dep = endpoint.deployment
    roots = {str(m.get("root")) for m in models if m.get("root")}
    if dep is None and len(ids) > 1 and len(roots) == 1 and next(iter(roots)) in ids:
        dep = next(iter(roots))  # vLLM/simulator: aliases of one served artifact share its `root`
    if dep is None:
        if len(ids) != 1:
            raise EvalSetupError(f"{name}: {endpoint.base_url} serves {len(ids)} models ({', '.join(ids) or 'none'}); "
                                 "name one as URL#deployment")
        dep = ids[0]
    entry = next((m for m in models if m.get("id") == dep), {})
    meta = getattr(policy, "deployments", {}).get(dep) if policy is not None else None
    if meta is not None and policy is not None:
        artifact, source = meta.model_dump(), "policy"
        tier = policy.deployment_tier(dep) or _tier_guess(artifact.get("format"))
    else:
        artifact = {k: v for k, v in entry.items() if k not in ("object", "permission")}
        source = "endpoint" if entry else "none"
        nested: dict[str, Any] = d if isinstance(d := entry.get("deployment"), dict) else {}
        tier = _tier_guess(entry.get("tier"), nested.get("tier"), entry.get("quantization"), entry.get("format"),
                           *reversed(dep.replace("_", "-").split("-")))
    return Arm(name=name, url=endpoint.base_url, deployment=dep, tier=tier, artifact=artifact, artifact_source=source)


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str) and content:
        return content
    calls = message.get("tool_calls") or []
    if calls:  # a native tool call is graded as {"name": ..., "arguments": {...}}
        fn = calls[0].get("function", {})
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            return json.dumps({"name": fn.get("name"), "arguments": fn.get("arguments")})
        return json.dumps({"name": fn.get("name"), "arguments": args})
    return content if isinstance(content, str) else ""


async def ask(client: httpx.AsyncClient, arm: Arm, item: EvalItem, settings: RunSettings,
              headers: dict[str, str] | None = None) -> Answer:
    """One chat completion; retried (bounded, with jittered backoff) on transport errors, 429 and 5xx."""
    body = {"model": arm.deployment, "messages": item.chat_messages(), **item.decode_params()}
    last_error = ""
    for attempt in range(1, settings.retries + 2):
        start = time.perf_counter()
        try:
            r = await client.post(f"{arm.url}/chat/completions", json=body, timeout=settings.timeout_s,
                                  headers=headers)
        except httpx.HTTPError as e:
            last_error = f"{type(e).__name__}: {e}"
        else:
            latency = (time.perf_counter() - start) * 1000
            if r.status_code == 200:
                data = r.json()
                choice = (data.get("choices") or [{}])[0]
                usage = data.get("usage") or {}
                return Answer(text=_content(choice.get("message") or {}), finish_reason=choice.get("finish_reason"),
                              model=str(data.get("model", "")), latency_ms=latency, attempts=attempt,
                              prompt_tokens=usage.get("prompt_tokens"),
                              completion_tokens=usage.get("completion_tokens"))
            last_error = f"HTTP {r.status_code}: {r.text[:200]}"
            if r.status_code != 429 and r.status_code < 500:
                return Answer(attempts=attempt, error=last_error)
        if attempt <= settings.retries:
            await asyncio.sleep(min(2.0, 0.2 * 2 ** (attempt - 1)) * (0.5 + random.random()))
    return Answer(attempts=settings.retries + 1, error=last_error)


async def collect(suite: Suite, arms: tuple[Arm, Arm], settings: RunSettings, *,
                  transport: httpx.AsyncBaseTransport | None = None, progress: Progress | None = None,
                  client: httpx.AsyncClient | None = None, tracing: Tracing | None = None) -> list[ItemResult]:
    """Ask every item of both arms and grade the answers. Results come back in suite order, baseline first.
    With `tracing`, each answer is a span (a child of the current one) whose `traceparent` goes with its
    request, so the router's and the node's spans join the eval's trace."""
    total, done = 2 * len(suite.items), 0
    limits = {arm.name: asyncio.Semaphore(settings.concurrency) for arm in arms}
    graders = asyncio.Semaphore(settings.grade_workers)

    async def one(http: httpx.AsyncClient, arm: Arm, item: EvalItem) -> ItemResult:
        nonlocal done
        async with limits[arm.name]:
            with (tracing.span("quantroute.eval.ask", {"quantroute.arm": arm.name, "quantroute.item": item.id,
                                                       "quantroute.deployment": arm.deployment}, kind="client")
                  if tracing is not None else contextlib.nullcontext()) as span:
                ans = await ask(http, arm, item, settings,
                                {"traceparent": tp} if tracing and (tp := tracing.current_traceparent()) else None)
                if span is not None:
                    Tracing.annotate(span, {"quantroute.attempts": ans.attempts, "quantroute.latency_ms":
                                            ans.latency_ms}, error=ans.error or None)
        if ans.error:
            g = Grade(passed=False, valid=False, needs_retry=True, detail=f"no answer: {ans.error[:200]}")
        else:
            async with graders:
                g = await asyncio.to_thread(grade, item, ans.text, ans.finish_reason)
        done += 1
        if progress:
            progress(done, total)
        return ItemResult(item_id=item.id, category=item.category, arm=arm.name, answer=ans, grade=g)

    async def run(http: httpx.AsyncClient) -> list[ItemResult]:
        # Both arms of an item are in flight together, so load and time of day hit them alike.
        return list(await asyncio.gather(*(one(http, arm, item) for item in suite.items for arm in arms)))

    if client is not None:
        return await run(client)
    async with httpx.AsyncClient(transport=transport, timeout=settings.timeout_s) as http:
        return await run(http)
