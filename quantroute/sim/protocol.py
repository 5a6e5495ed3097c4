"""The OpenAI-compatible wire shapes exactly as vLLM produces them: request parameters the simulator honours,
response bodies, SSE chunks and error JSON."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class ApiError(Exception):
    """An error for the API client, rendered as OpenAI error JSON with vLLM's type names."""

    TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError", 503: "ServiceUnavailableError"}

    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.TYPES.get(self.status, "APIError"),
                          "param": self.param, "code": self.status}}


class StreamOptions(BaseModel):
    include_usage: bool = False


class GenerationParams(BaseModel):
    """The fields of a (chat) completion request the simulator acts on; the rest is accepted and ignored,
    as vLLM ignores sampling knobs that do not change the output's shape."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[dict[str, Any]] | None = None
    prompt: str | list[str] | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    n: int = 1
    seed: int | None = None
    ignore_eos: bool = False
    stream: bool = False
    stream_options: StreamOptions | None = None

    @field_validator("n")
    @classmethod
    def _one_choice(cls, v: int) -> int:
        if v != 1:
            raise ValueError("only n=1 is supported by the simulated node")
        return v

    @property
    def stop_list(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    @property
    def requested_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and self.stream_options and self.stream_options.include_usage)


def parse_params(body: Any, *, chat: bool) -> GenerationParams:
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    try:
        params = GenerationParams.model_validate(body)
    except ValidationError as e:
        err = e.errors()[0]
        param = ".".join(str(p) for p in err["loc"]) or None
        raise ApiError(400, f"{param}: {err['msg']}", param) from None
    if chat and not params.messages:
        raise ApiError(400, "messages: a chat completion needs a non-empty list of messages", "messages")
    if not chat and params.prompt is None:
        raise ApiError(400, "prompt: a completion needs a prompt", "prompt")
    return params


class Completion:
    """Builds the bodies and SSE chunks of one response, chat or text completion."""

    def __init__(self, *, chat: bool, model: str):
        self.chat = chat
        self.model = model
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.object = "chat.completion" if chat else "text_completion"

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    @staticmethod
    def usage(prompt_tokens: int, completion_tokens: int) -> dict:
        return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                "completion_tokens": completion_tokens}

    def full(self, text: str, finish_reason: str, usage: dict) -> dict:
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text, "tool_calls": []},
                      "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                      "stop_reason": None, "prompt_logprobs": None}
        return {**self._head(self.object), "choices": [choice], "usage": usage, "prompt_logprobs": None}

    @property
    def _chunk_object(self) -> str:
        return "chat.completion.chunk" if self.chat else "text_completion"

    def role_chunk(self) -> dict:
        delta = {"role": "assistant", "content": ""}
        return {**self._head(self._chunk_object),
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]}

    def content_chunk(self, text: str, finish_reason: str | None) -> dict:
        if self.chat:
            choice: dict = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish_reason}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        if finish_reason is not None or not self.chat:
            choice["stop_reason"] = None
        return {**self._head(self._chunk_object), "choices": [choice]}

    def usage_chunk(self, usage: dict) -> dict:
        return {**self._head(self._chunk_object), "choices": [], "usage": usage}


def sse(data: dict | Literal["[DONE]"]) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"data: {payload}\n\n".encode()
