"""The staircase: run the traffic at each load step (closed-loop concurrency, or open-loop Poisson arrivals), measure
after a warm-up, and stop at the first step that breaks an SLO, raises the error rate or adds no throughput
(seed 003, 7.6).

Each step is a fresh `quantroute.loadtest.traffic.replay`: warm-up (not measured), the measured window, then a drain in
which the step's in-flight units finish (bounded; what is left is cut), so one step's queue never leaks into the
next step's figures.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import httpx
from pydantic import BaseModel, Field, model_validator

from quantroute.clock import utcnow
from quantroute.loadtest.stats import Slo, StepStats, breach, summarize
from quantroute.loadtest.traffic import RequestResult, TrafficLine, replay


class LoadTestConfig(BaseModel):
    """Everything a staircase run needs besides the traffic; stored with the run."""

    url: str = Field(description="Base URL of the router or node, without /v1")
    model: str
    source: str = Field(default="", description="Traffic or prompts file, for the record")
    staircase: list[int] = Field(default=[1, 2, 4, 8, 16, 32], min_length=1)
    rate: float | None = Field(default=None, gt=0, description="Open loop: arrivals/s at staircase value 1 "
                               "(step k runs at rate x staircase[k]); None = closed loop, staircase = concurrency")
    step_seconds: float = Field(default=30.0, gt=0)
    warmup_seconds: float = Field(default=5.0, ge=0)
    drain_seconds: float = Field(default=30.0, ge=0, description="Longest wait for a step's in-flight requests")
    slo: Slo = Field(default_factory=Slo)
    force_stream: bool = Field(default=True, description="Stream every request so TTFT and ITL are measured")
    session_header: str = "x-session-id"
    deployment: str | None = Field(default=None, description="Label for the DB row; default: the one deployment "
                                   "every response named, if there was exactly one")
    seed: int = 0

    @model_validator(mode="after")
    def _increasing(self) -> LoadTestConfig:
        if any(v < 1 for v in self.staircase):
            raise ValueError(f"staircase values must be >= 1, got {self.staircase}")
        if any(b <= a for a, b in zip(self.staircase, self.staircase[1:])):
            raise ValueError(f"staircase must increase strictly, got {self.staircase}")
        return self


class LoadTestResult(BaseModel):
    """A finished staircase: every step measured, and where and why it stopped."""

    config: LoadTestConfig
    started_at: datetime
    finished_at: datetime
    steps: list[StepStats]
    stop_reason: str | None = Field(description="The breach that stopped the staircase; None = all steps passed")
    stopped_at: int | None = Field(description="Index of the step that breached")

    @property
    def passed_steps(self) -> list[StepStats]:
        return [s for s in self.steps if s.breach is None]

    @property
    def best(self) -> StepStats | None:
        """The highest step that met every limit (the sustainable load)."""
        return self.passed_steps[-1] if self.passed_steps else None

    @property
    def deployment(self) -> str | None:
        if self.config.deployment:
            return self.config.deployment
        seen = {d for s in self.steps for d in s.deployments}
        return seen.pop() if len(seen) == 1 else None


class Progress(Protocol):
    """What the runner tells a display (see `quantroute.loadtest.progress`)."""

    def step_started(self, index: int, load: str, warmup_s: float, seconds: float) -> None: ...
    def tick(self, results: Sequence[RequestResult], phase: str) -> None: ...
    def step_done(self, stats: StepStats) -> None: ...


async def run_step(config: LoadTestConfig, traffic: Sequence[TrafficLine], index: int, *,
                   client: httpx.AsyncClient, progress: Progress | None = None,
                   results: list[RequestResult] | None = None) -> StepStats:
    """One step; every request result is appended to `results` when given (the fleet experiment reads them)."""
    value = config.staircase[index]
    conc, rate = (None, config.rate * value) if config.rate else (value, None)
    results = [] if results is None else results
    stop = asyncio.Event()
    task = asyncio.create_task(replay(config.url, traffic, stop_event=stop, on_result=results.append,
                                      concurrency=conc, rate=rate, seed=config.seed + index, client=client,
                                      run_id=f"{uuid.uuid4().hex[:6]}s{index}", force_stream=config.force_stream,
                                      session_header=config.session_header))
    load = f"concurrency {conc}" if conc is not None else f"rate {rate:g}/s"
    if progress:
        progress.step_started(index, load, config.warmup_seconds, config.step_seconds)

    async def phase(name: str, seconds: float) -> None:
        deadline = time.perf_counter() + seconds
        while (left := deadline - time.perf_counter()) > 0 and not task.done():
            await asyncio.sleep(min(0.5, left))
            if progress:
                progress.tick(results, name)

    await phase("warm-up", config.warmup_seconds)
    start = time.perf_counter()
    await phase("measure", config.step_seconds)
    end = time.perf_counter()
    stop.set()
    try:
        await asyncio.wait_for(asyncio.shield(task), config.drain_seconds)
    except TimeoutError:
        task.cancel()  # cut the stragglers; their tokens inside the window still count
        await asyncio.gather(task, return_exceptions=True)
    if task.done() and not task.cancelled() and (error := task.exception()) is not None:
        raise error
    return summarize(results, start=start, end=end, index=index, concurrency=conc, rate=rate)


async def run_staircase(config: LoadTestConfig, traffic: Sequence[TrafficLine], *,
                        progress: Progress | None = None) -> LoadTestResult:
    started = utcnow()
    steps: list[StepStats] = []
    stop_reason = stopped_at = None
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=1024)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0), limits=limits) as client:
        for i in range(len(config.staircase)):
            stats = await run_step(config, traffic, i, client=client, progress=progress)
            stats.breach = breach(stats, steps[-1] if steps else None, config.slo)
            steps.append(stats)
            if progress:
                progress.step_done(stats)
            if stats.breach is not None:
                stop_reason, stopped_at = stats.breach, i
                break
    return LoadTestResult(config=config, started_at=started, finished_at=utcnow(), steps=steps,
                          stop_reason=stop_reason, stopped_at=stopped_at)
