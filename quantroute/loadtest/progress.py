"""A live rich display of the staircase: the current step, its phase and running counts."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Console
from rich.live import Live
from rich.text import Text

from quantroute.loadtest.stats import StepStats
from quantroute.loadtest.traffic import RequestResult


class LiveProgress:
    """Implements `quantroute.loadtest.runner.Progress`; use as a context manager around the run."""

    def __init__(self, console: Console | None = None, total_steps: int = 0):
        self.console = console or Console(stderr=True)
        self.total = total_steps
        self.live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
        self.step = ""
        self.t0 = time.perf_counter()
        self.seconds = 0.0

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.__exit__(*exc)

    def step_started(self, index: int, load: str, warmup_s: float, seconds: float) -> None:
        self.step = f"step {index + 1}/{self.total} ({load})"
        self.t0, self.seconds = time.perf_counter(), warmup_s + seconds

    def tick(self, results: Sequence[RequestResult], phase: str) -> None:
        done = len(results)
        errors = sum(1 for r in results if not r.ok)
        tokens = sum(r.output_tokens for r in results)
        elapsed = time.perf_counter() - self.t0
        self.live.update(Text(f"{self.step} {phase} {elapsed:4.0f}/{self.seconds:.0f} s  requests {done}  "
                              f"errors {errors}  output tokens {tokens} ({tokens / max(elapsed, 1e-9):.0f}/s)"))

    def step_done(self, stats: StepStats) -> None:
        verdict = f"[red]{stats.breach}[/red]" if stats.breach else "[green]ok[/green]"
        self.console.print(f"{self.step}: {stats.requests} requests, {stats.errors} errors, "
                           f"{stats.output_tok_s:.0f} tok/s, e2e p95 {stats.e2e_p95_ms or 0:.0f} ms, "
                           f"TTFT p95 {stats.ttft_p95_ms or 0:.0f} ms -> {verdict}")
