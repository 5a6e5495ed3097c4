"""A node that answers /health and /metrics at once but holds every completion until released: the shadow target
that hangs. It counts what arrived, what is held and what the router abandoned (the connection closed)."""

from __future__ import annotations

import asyncio
import threading

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route


class HangingNode:
    def __init__(self, deployment: str) -> None:
        self.deployment = deployment
        self.released = threading.Event()
        self.arrived = 0
        self.held = 0
        self.abandoned = 0
        self.app = Starlette(routes=[Route("/health", self.health), Route("/metrics", self.metrics),
                                     Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def metrics(self, request: Request) -> Response:
        return PlainTextResponse("vllm:num_requests_waiting 0\nvllm:num_requests_running 0\n")

    async def chat(self, request: Request) -> Response:
        self.arrived += 1
        self.held += 1
        try:
            while not self.released.is_set():
                if await request.is_disconnected():
                    self.abandoned += 1
                    return Response(status_code=499)
                await asyncio.sleep(0.02)
        finally:
            self.held -= 1
        return JSONResponse({"id": "x", "object": "chat.completion", "model": self.deployment,
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "a late, different answer"}}],
                             "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}})
