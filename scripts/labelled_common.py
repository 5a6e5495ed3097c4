"""Helpers shared by the hand-written labelled requests (see build_labelled_requests.py): request
builders and the row list the sections append to, in order."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

MODEL = "llama3-8b"
OUT = Path(__file__).resolve().parent.parent / "data" / "requests" / "labelled.jsonl"

ROWS: list[dict] = []
_SEQ: Counter[str] = Counter()


def chat(*turns: str, sys: str | None = None, parts: bool = False, **params) -> dict:
    """Turns alternate user / assistant, starting with user. `parts` sends the last user turn as
    list-of-parts content, as the newer SDKs and multimodal front-ends do."""
    messages: list[dict] = [{"role": "system", "content": sys}] if sys else []
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    if parts:
        messages[-1]["content"] = [{"type": "text", "text": messages[-1]["content"]}]
    return {"model": MODEL, "messages": messages, **params}


def comp(prompt: str | list[str], **params) -> dict:
    return {"model": MODEL, "prompt": prompt, **params}


def add(kind: str, tier: str, why: str, body: dict, **headers: str) -> None:
    _SEQ[kind] += 1
    row = {"id": f"{kind}-{_SEQ[kind]:03d}", "body": body}
    if headers:
        row["headers"] = {k.replace("_", "-"): v for k, v in headers.items()}
    row.update(expected_tier=tier, why=why)
    ROWS.append(row)


def schema(name: str, properties: dict, required: list[str]) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


def tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


# One-letter JSON-schema types keep the hand-written tool schemas short.
S, N, I, A = ({"type": "string"}, {"type": "number"}, {"type": "integer"},  # noqa: E741 - I is the integer type
              lambda item: {"type": "array", "items": item})
