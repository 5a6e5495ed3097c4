"""Traffic mixes (`data/traffic/*.jsonl`, described in data/traffic/README.md): the line shape, a loader with
line-numbered errors, and `replay`, which sends a mix to an OpenAI-compatible URL (the router or one node).

Used by the staircase load tester (`quantroute.loadtest`), the fleet experiment and the demo's background traffic:

    stop = asyncio.Event()
    await replay("http://127.0.0.1:8080", load_traffic("data/traffic/mixed.jsonl"), concurrency=8,
                 stop_event=stop, on_result=results.append)

Replay sends *units*: a single request, or a whole session whose turn k+1 is sent only after turn k finished.
Session ids in a file are local to it, so every replay of a unit gets its own suffix (`s-0003.<run>.<n>`),
sent as `x-session-id`. Closed loop (`concurrency=N`): N workers, each sends one unit after the other. Open loop
(`rate=R`): units start at Poisson arrivals, R per second on average, however many are still running.
`replay` returns when `stop_event` is set and every unit it started has finished (a unit stops between turns
when the event is set); cancel the task to cut in-flight requests.

A file replayed over and over sends the same prompts again, which a prefix cache (vLLM's, the simulator's) serves
from cache across units: traffic no real service sees. `distinct_prompts=True` opens every replay of a unit with
a system message naming that replay (`Conversation <id>.`), so no two replays share a KV prefix while the turns of
one session still do, as in real conversations.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

RequestClass = Literal["tolerant", "neutral", "sensitive"]
CHAT_PATH, COMPLETIONS_PATH = "/v1/chat/completions", "/v1/completions"


class TrafficError(ValueError):
    """A traffic file that cannot be used; `issues` lists (line number, message) for every bad line."""

    def __init__(self, source: str, issues: list[tuple[int, str]]):
        self.source, self.issues = source, issues
        shown = "; ".join(f"line {n}: {m}" for n, m in issues[:10])
        more = f" (and {len(issues) - 10} more)" if len(issues) > 10 else ""
        super().__init__(f"{source}: {shown}{more}")


class TrafficLine(BaseModel):
    """One request template of a traffic mix (the JSON Lines shape of data/traffic/README.md)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    session: str | None = Field(description="Session id local to the file, or null for a single request")
    turn: int = Field(default=1, ge=1)
    class_: RequestClass | None = Field(alias="class", description="A person's judgement; null when unlabelled")
    body: dict[str, Any]
    headers: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _body_shape(self) -> TrafficLine:
        if not isinstance(self.body.get("model"), str) or not self.body["model"]:
            raise ValueError("body.model must be a non-empty string")
        if ("messages" in self.body) == ("prompt" in self.body):
            raise ValueError("body needs exactly one of 'messages' (chat) or 'prompt' (completions)")
        if not isinstance(self.body.get("max_tokens"), int) or self.body["max_tokens"] < 1:
            raise ValueError("body.max_tokens must be an integer >= 1")
        return self

    @property
    def path(self) -> str:
        return CHAT_PATH if "messages" in self.body else COMPLETIONS_PATH


def parse_traffic(text: str, *, source: str = "<string>") -> list[TrafficLine]:
    """Every line validated; all bad lines reported at once with their numbers. Turns of a session must come in
    order 1, 2, ... (a replayer relies on it)."""
    lines: list[TrafficLine] = []
    issues: list[tuple[int, str]] = []
    next_turn: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = TrafficLine.model_validate(json.loads(raw))
        except json.JSONDecodeError as e:
            issues.append((n, f"not JSON: {e.msg} at column {e.colno}"))
            continue
        except ValidationError as e:
            issues += [(n, f"{'.'.join(map(str, err['loc'])) or '(line)'}: {err['msg']}") for err in e.errors()]
            continue
        if line.session is not None:
            want = next_turn.get(line.session, 1)
            if line.turn != want:
                issues.append((n, f"turn: session {line.session!r} expects turn {want} here, got {line.turn}"))
            next_turn[line.session] = line.turn + 1
        elif line.turn != 1:
            issues.append((n, f"turn: a single request (session null) has turn 1, got {line.turn}"))
        lines.append(line)
    if issues:
        raise TrafficError(source, issues)
    if not lines:
        raise TrafficError(source, [(0, "no requests in the file")])
    return lines


def load_traffic(path: str | Path) -> list[TrafficLine]:
    path = Path(path)
    return parse_traffic(path.read_text(encoding="utf-8"), source=str(path))


def prompts_as_traffic(path: str | Path, *, model: str, max_tokens: int = 128) -> list[TrafficLine]:
    """A plain prompts file (one prompt per line) as unlabelled single chat requests."""
    path = Path(path)
    prompts = [p.strip() for p in path.read_text(encoding="utf-8").splitlines() if p.strip()]
    if not prompts:
        raise TrafficError(str(path), [(0, "no prompts in the file (one prompt per line)")])
    return [TrafficLine(session=None, turn=1, class_=None, headers={},
                        body={"model": model, "messages": [{"role": "user", "content": p}], "max_tokens": max_tokens})
            for p in prompts]


def with_model(lines: Iterable[TrafficLine], model: str) -> list[TrafficLine]:
    """The same mix addressed to another logical model (the files say llama3-8b)."""
    return [ln.model_copy(update={"body": {**ln.body, "model": model}}) for ln in lines]


@dataclass(frozen=True)
class Unit:
    """What one replay sends in order: a single request, or every turn of one session."""

    session: str | None
    lines: tuple[TrafficLine, ...]


def units(lines: Iterable[TrafficLine]) -> list[Unit]:
    """Group a file's lines into units, ordered by their first line."""
    out: list[Unit] = []
    sessions: dict[str, list[TrafficLine]] = {}
    for ln in lines:
        if ln.session is None:
            out.append(Unit(None, (ln,)))
        elif ln.session not in sessions:
            sessions[ln.session] = [ln]
            out.append(Unit(ln.session, ()))  # placeholder keeps the position of the first turn
        else:
            sessions[ln.session].append(ln)
    return [u if u.session is None else Unit(u.session, tuple(sessions[u.session])) for u in out]


@dataclass
class RequestResult:
    """One request as the client saw it. Times are `time.perf_counter()` seconds."""

    started: float
    ended: float = 0.0
    status: int = 0  # HTTP status; 0 when the connection failed
    error: str | None = None
    first_token_at: float | None = None
    token_times: list[float] = field(default_factory=list)  # arrival time of each streamed content chunk
    output_tokens: int = 0  # from usage when the server sent it, else streamed chunks
    tier: str | None = None
    node: str | None = None
    deployment: str | None = None
    request_class: str | None = None
    session: str | None = None  # the per-run session id that was sent
    turn: int = 1
    stream: bool = True
    line: TrafficLine | None = None  # what was sent (the fleet experiment reads its category)

    @property
    def ok(self) -> bool:
        return self.error is None and 200 <= self.status < 300

    @property
    def ttft(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.started

    @property
    def latency(self) -> float:
        return self.ended - self.started


def request_body(line: TrafficLine, *, force_stream: bool) -> dict[str, Any]:
    body = dict(line.body)
    if force_stream:
        body["stream"] = True
    if body.get("stream"):
        # usage in the last chunk gives the exact output token count (vLLM and the simulator both honour it)
        body["stream_options"] = {"include_usage": True}
    return body


async def send(client: httpx.AsyncClient, base_url: str, line: TrafficLine, *, session_id: str | None,
               session_header: str = "x-session-id", force_stream: bool = True,
               tag: str | None = None) -> RequestResult:
    """Send one request and time it: TTFT at the first content chunk, each chunk's arrival, usage at the end.
    `tag`: a system message the request opens with (see `distinct_prompts` in the module docstring)."""
    body = request_body(line, force_stream=force_stream)
    if tag is not None:
        body = tagged(body, tag)
    headers = dict(line.headers)
    if session_id is not None:
        headers[session_header] = session_id
    res = RequestResult(started=time.perf_counter(), request_class=line.class_, session=session_id,
                        turn=line.turn, stream=bool(body.get("stream")), line=line)
    try:
        async with client.stream("POST", base_url.rstrip("/") + line.path, json=body, headers=headers) as resp:
            res.status = resp.status_code
            h = resp.headers
            res.tier, res.node = h.get("x-quantroute-tier"), h.get("x-quantroute-node")
            res.deployment = h.get("x-quantroute-deployment")
            if resp.status_code >= 400:
                res.error = _error_message(await resp.aread(), resp.status_code)
            elif res.stream:
                await _read_stream(resp, res)
            else:
                data = json.loads(await resp.aread())
                res.first_token_at = time.perf_counter()
                res.output_tokens = int((data.get("usage") or {}).get("completion_tokens") or 0)
                res.deployment = res.deployment or data.get("model")
    except (httpx.HTTPError, json.JSONDecodeError, ValueError) as e:
        res.error = f"{type(e).__name__}: {e}"[:300]
    res.ended = time.perf_counter()
    return res


async def _read_stream(resp: httpx.Response, res: RequestResult) -> None:
    usage = None
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("error"):
            raise ValueError(f"error in stream: {chunk['error'].get('message', chunk['error'])}")
        res.deployment = res.deployment or chunk.get("model")
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            piece = (choice.get("delta") or {}).get("content") if "delta" in choice else choice.get("text")
            if piece:
                now = time.perf_counter()
                res.first_token_at = res.first_token_at or now
                res.token_times.append(now)
    res.output_tokens = int(usage["completion_tokens"]) if usage else len(res.token_times)


def _error_message(raw: bytes, status: int) -> str:
    try:
        return str(json.loads(raw)["error"]["message"])[:300]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status}: {raw[:200]!r}"


def _unit_stream(all_units: list[Unit], run_id: str) -> Iterator[tuple[Unit, str | None, str]]:
    """The file's units over and over; each replay of a session gets a fresh id, each replay of a unit a name."""
    for cycle in itertools.count():
        for i, u in enumerate(all_units):
            name = f"{run_id}.{cycle}.{i}"
            yield u, (None if u.session is None else f"{u.session}.{run_id}.{cycle}"), name


def tagged(body: dict[str, Any], tag: str) -> dict[str, Any]:
    """`body` opening with a system message `tag` (chat) or with `tag` on a line of its own (completions)."""
    if isinstance(body.get("messages"), list):
        return {**body, "messages": [{"role": "system", "content": tag}, *body["messages"]]}
    if isinstance(body.get("prompt"), str):
        return {**body, "prompt": f"{tag}\n{body['prompt']}"}
    return body


async def _send_unit(client, base_url, unit: Unit, session_id: str | None, stop_event: asyncio.Event,
                     on_result: Callable[[RequestResult], Any], **kw) -> None:
    for i, line in enumerate(unit.lines):
        if i and stop_event.is_set():
            return  # stop between turns; a session is never cut mid-request
        on_result(await send(client, base_url, line, session_id=session_id, **kw))


def _unit_kw(kw: dict, name: str, distinct: bool) -> dict:
    return {**kw, "tag": f"Conversation {name}."} if distinct else kw


async def replay(base_url: str, traffic: Iterable[TrafficLine], *, stop_event: asyncio.Event,
                 on_result: Callable[[RequestResult], Any], concurrency: int | None = None,
                 rate: float | None = None, seed: int = 0, run_id: str | None = None,
                 client: httpx.AsyncClient | None = None, force_stream: bool = True,
                 session_header: str = "x-session-id", timeout_s: float = 600.0,
                 distinct_prompts: bool = False) -> None:
    """Replay `traffic` against `base_url` (no /v1) until `stop_event` is set; see the module docstring.
    Exactly one of `concurrency` (closed loop) or `rate` (open loop, units per second) must be given."""
    if (concurrency is None) == (rate is None):
        raise ValueError("give exactly one of concurrency (closed loop) or rate (open loop)")
    if concurrency is not None and concurrency < 1 or rate is not None and rate <= 0:
        raise ValueError(f"concurrency must be >= 1 and rate > 0, got concurrency={concurrency} rate={rate}")
    feed = _unit_stream(units(traffic), run_id or uuid.uuid4().hex[:8])
    own = client is None
    if client is None:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=1024)
        client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=10.0), limits=limits)
    kw = dict(force_stream=force_stream, session_header=session_header)
    try:
        if concurrency is not None:
            async def worker() -> None:
                while not stop_event.is_set():
                    unit, sid, name = next(feed)
                    await _send_unit(client, base_url, unit, sid, stop_event, on_result,
                                     **_unit_kw(kw, name, distinct_prompts))
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        elif rate is not None:  # (exactly one of the two is set: checked above)
            await _open_loop(client, base_url, feed, rate, random.Random(seed), stop_event, on_result, kw,
                             distinct_prompts)
    finally:
        if own:
            await client.aclose()


async def _open_loop(client, base_url, feed, rate: float, rng: random.Random, stop_event: asyncio.Event,
                     on_result, kw: dict, distinct: bool) -> None:
    running: set[asyncio.Task] = set()
    try:
        while not stop_event.is_set():
            unit, sid, name = next(feed)
            t = asyncio.ensure_future(_send_unit(client, base_url, unit, sid, stop_event, on_result,
                                                 **_unit_kw(kw, name, distinct)))
            running.add(t)
            t.add_done_callback(running.discard)
            try:
                await asyncio.wait_for(stop_event.wait(), rng.expovariate(rate))
            except TimeoutError:
                pass
        if running:
            await asyncio.gather(*running)
    finally:
        for t in running:  # cancelled from outside: cut what is still in flight
            t.cancel()
