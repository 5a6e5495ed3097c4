"""The answer inside an OpenAI-compatible response body, whole (JSON) or streamed (SSE): its text, its tokens
when the server sent logprobs, and the completion tokens its usage reports. Pure; never raises on bad input
(a body it cannot read is an answer with `ok` False)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True)
class Answer:
    ok: bool  # a readable completion (JSON with choices, or SSE chunks with them)
    text: str = ""
    tokens: tuple[str, ...] | None = None  # the sampled tokens, when the response carries logprobs
    completion_tokens: int | None = None
    finish_reason: str | None = None


def _choice_text(choice: dict[str, Any]) -> str:
    if isinstance(choice.get("message"), dict):
        return str(choice["message"].get("content") or "")
    if isinstance(choice.get("delta"), dict):
        return str(choice["delta"].get("content") or "")
    return str(choice.get("text") or "")


def _choice_tokens(choice: dict[str, Any]) -> list[str] | None:
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        return None
    if isinstance(lp.get("content"), list):  # chat: [{"token": ..., "logprob": ...}, ...]
        return [str(t.get("token", "")) for t in lp["content"] if isinstance(t, dict)]
    if isinstance(lp.get("tokens"), list):  # completions: {"tokens": [...], ...}
        return [str(t) for t in lp["tokens"]]
    return None


def _usage(obj: dict[str, Any]) -> int | None:
    u = obj.get("usage")
    n = u.get("completion_tokens") if isinstance(u, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None


def _objects(body: bytes) -> tuple[list[dict[str, Any]], bool]:
    """The JSON objects of the body: one (JSON) or one per SSE `data:` line; whether it was a stream."""
    stripped = body.lstrip()
    if not stripped.startswith(b"data:") and not stripped.startswith(b":") and not stripped.startswith(b"event:"):
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            return [], False
        return ([obj] if isinstance(obj, dict) else []), False
    out: list[dict[str, Any]] = []
    for line in body.split(b"\n"):
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            continue
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out, True


def read_answer(body: bytes) -> Answer:
    """The first choice's answer. A stream's deltas are joined; an error event or body means no answer."""
    objs, _ = _objects(body)
    if not objs or any("error" in o for o in objs):
        return Answer(ok=False)
    texts: list[str] = []
    tokens: list[str] | None = []
    finish = None
    seen = False
    usage = None
    for o in objs:
        usage = _usage(o) if _usage(o) is not None else usage
        choices = o.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            continue
        seen = True
        c = choices[0]
        texts.append(_choice_text(c))
        toks = _choice_tokens(c)
        if toks is None:
            # a chunk without logprobs (a stream's role chunk has no tokens either)
            tokens = tokens if not _choice_text(c) else None
        elif tokens is not None:
            tokens.extend(toks)
        finish = c.get("finish_reason") or finish
    if not seen:
        return Answer(ok=False)
    return Answer(ok=True, text="".join(texts), tokens=tuple(tokens) if tokens else None,
                  completion_tokens=usage, finish_reason=finish)
