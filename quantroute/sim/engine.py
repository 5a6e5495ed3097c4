"""Continuous batching for one simulated node: sequences wait until a batch slot (max_num_seqs) and KV-cache room
are free, then every engine step emits one token to each running sequence. A step costs the capacity model's decode
time for the current batch plus the prefill of the sequences admitted in it, less the prompt blocks the node's
prefix cache already holds (`prefix.py`: automatic prefix caching, sharing the KV capacity with the batch).

Time runs on a simulated clock that advances by step costs; the loop sleeps so that wall time follows it scaled by
`time_scale`. When the event loop falls behind (noisy machine, coarse timers) the next steps run without sleeping
until it has caught up, so average pace, and therefore ratios between nodes, stay exact.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from quantroute.capacity import BLOCK_SIZE
from quantroute.sim.metrics import NodeMetrics
from quantroute.sim.prefix import PrefixCache
from quantroute.sim.text import Output

# At most this much wall-clock lag is made up by running steps back to back; beyond it the host stalled, and the
# simulation pretends the stall did not happen.
MAX_CATCH_UP_S = 0.25


@dataclass(frozen=True)
class StepModel:
    """The node's costs in simulated seconds, from the capacity model."""

    decode_step_s: Callable[[int, int], float]  # (batch, context tokens in the batch) -> seconds
    prefill_s: Callable[[int], float]  # prompt tokens -> seconds
    kv_capacity_tokens: int


@dataclass(frozen=True)
class Token:
    text: str
    finish_reason: str | None  # set on the last token


@dataclass(eq=False)
class Sequence:
    prompt_tokens: int
    output: Output
    arrived: float = 0.0  # simulated clock
    generated: int = 0
    prefilled: bool = False
    first_token_at: float | None = None
    aborted: bool = False
    tokens: asyncio.Queue = field(default_factory=asyncio.Queue)
    prompt_hashes: tuple[int, ...] = ()  # one per full KV block of the prompt (prefix.block_hashes)
    cached_tokens: int = 0  # prompt tokens found in the prefix cache at admission: prefill skips them
    holds: bool = False  # holds its prompt blocks in the prefix cache (admitted, not ended yet)

    @property
    def total_steps(self) -> int:
        return max(1, len(self.output.tokens))

    @property
    def kv_reserved(self) -> int:
        # The simulator knows each output's length, so it reserves it up front and never has to preempt.
        return self.prompt_tokens + self.total_steps

    @property
    def context(self) -> int:
        return self.prompt_tokens + self.generated

    @property
    def own_blocks(self) -> int:
        """KV blocks that are the sequence's alone: its reservation beyond the full prompt blocks, which live
        in the prefix cache (shared with any other sequence that has the same prefix)."""
        return -(-self.kv_reserved // BLOCK_SIZE) - len(self.prompt_hashes)


class NodeEngine:
    def __init__(self, *, model: StepModel, max_num_seqs: int, time_scale: float, metrics: NodeMetrics,
                 latency_factor: Callable[[], float] = lambda: 1.0):
        self.model = model
        self.max_num_seqs = max_num_seqs
        self.time_scale = time_scale
        self.metrics = metrics
        self.latency_factor = latency_factor
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.cache = PrefixCache()
        self.kv_blocks = model.kv_capacity_tokens // BLOCK_SIZE
        self.steps = 0
        self._wake = asyncio.Event()
        self._t0: float | None = None
        self._sim = 0.0
        metrics.bind_state(running=lambda: len(self.running), waiting=lambda: len(self.waiting),
                           kv_usage=self.kv_usage, clock=self.clock)

    # -- state -------------------------------------------------------------------------------------------
    def kv_usage(self) -> float:
        cap = self.model.kv_capacity_tokens
        return min(1.0, sum(s.context for s in self.running) / cap) if cap else 0.0

    def clock(self) -> float:
        """Simulated seconds now: the engine's clock while it works, the wall clock's reading of it while idle
        (an idle engine's clock stands still until the next arrival moves it)."""
        if self.running or self.waiting:
            return self._sim
        try:
            return max(self._sim, self._wall_as_sim())
        except RuntimeError:  # read outside the engine's loop (no running loop): its last reading
            return self._sim

    def _origin(self) -> float:
        """The loop time at which simulated time 0 sits: fixed by the first look at the clock."""
        if self._t0 is None:
            self._t0 = asyncio.get_running_loop().time()
        return self._t0

    def _wall_as_sim(self) -> float:
        return (asyncio.get_running_loop().time() - self._origin()) / self.time_scale

    # -- requests ----------------------------------------------------------------------------------------
    def submit(self, seq: Sequence) -> Sequence:
        # While busy the engine's clock is "now" (it may lag the wall clock a little while catching up);
        # an idle engine's clock has stood still, so the wall clock says when the request came.
        busy = bool(self.running or self.waiting)
        seq.arrived = self._sim if busy else max(self._sim, self._wall_as_sim())
        self.waiting.append(seq)
        self._wake.set()
        return seq

    def abort(self, seq: Sequence) -> None:
        seq.aborted = True
        if seq in self.waiting:
            self.waiting.remove(seq)
        self._wake.set()

    def used_blocks(self) -> int:
        """KV blocks in use: the running sequences' own blocks plus every block the prefix cache holds."""
        return sum(s.own_blocks for s in self.running) + self.cache.blocks

    def _admit(self) -> list[Sequence]:
        """FIFO admission while a batch slot and KV room for the whole sequence are free, evicting unused cached
        blocks for room (an oversized sequence still runs when alone, as vLLM would have refused to start rather
        than starve it). A sequence's cached prefix is held before anything is evicted for it."""
        admitted = []
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            hit = self.cache.match(seq.prompt_hashes)
            self.cache.hold(seq.prompt_hashes[:hit])
            need = seq.own_blocks + self.cache.missing(seq.prompt_hashes)
            short = self.used_blocks() + need - self.kv_blocks
            if short > 0:
                short -= self.cache.evict(short)
            if short > 0 and self.running:
                self.cache.release(seq.prompt_hashes[:hit])
                break
            self.waiting.popleft()
            self.cache.hold(seq.prompt_hashes[hit:])
            seq.holds = True
            # vLLM always computes at least the prompt's last token (its logits start the output)
            seq.cached_tokens = min(hit * BLOCK_SIZE, max(0, seq.prompt_tokens - 1))
            self.running.append(seq)
            self.metrics.queue_time.observe(max(0.0, self._sim - seq.arrived))
            admitted.append(seq)
        return admitted

    def _end(self, seq: Sequence) -> None:
        """A finished or aborted sequence leaves its prompt blocks in the cache, evictable."""
        if seq.holds:
            seq.holds = False
            self.cache.release(seq.prompt_hashes)

    # -- the loop ----------------------------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            for s in self.running:
                if s.aborted:
                    self._end(s)
            self.running = [s for s in self.running if not s.aborted]
            self._forgive_stall(loop.time())
            admitted = self._admit()
            if not self.running:
                self._wake.clear()
                await self._wake.wait()
                # Idle time passes on the simulated clock up to the arrival, not up to when this loop woke:
                # event-loop latency would otherwise show up in TTFT magnified by 1 / time_scale.
                if self.waiting:
                    self._sim = max(self._sim, self.waiting[0].arrived)
                continue
            step = self.step_cost(admitted)
            self._sim += step
            delay = self._origin() + self._sim * self.time_scale - loop.time()
            await asyncio.sleep(max(0.0, delay))
            self._emit(step)

    def _forgive_stall(self, now: float) -> None:
        """A host stall (GIL, a busy core) longer than MAX_CATCH_UP_S is not simulated time: shift the wall
        origin instead of letting the clock jump, so no simulated latency is inflated by the machine."""
        self._wall_as_sim()
        lag = now - (self._origin() + self._sim * self.time_scale)
        if lag > MAX_CATCH_UP_S and (self.running or self.waiting):
            self._t0 = self._origin() + lag - MAX_CATCH_UP_S

    def step_cost(self, admitted: list[Sequence]) -> float:
        """Decode for the whole batch plus prefill for the newly admitted sequences, times the fault knob."""
        decode = self.model.decode_step_s(len(self.running), sum(s.context for s in self.running))
        prefill = sum(self.model.prefill_s(s.prompt_tokens - s.cached_tokens) for s in admitted)
        for s in admitted:
            s.prefilled = True
            self.metrics.prompt_tokens.inc(s.prompt_tokens)
            self.metrics.prefix_cache_queries.inc(s.prompt_tokens)
            self.metrics.prefix_cache_hits.inc(s.cached_tokens)
        return (decode + prefill) * self.latency_factor()

    def _emit(self, step: float) -> None:
        self.steps += 1
        still = []
        for s in self.running:
            if s.aborted:
                self._end(s)
                continue
            text = s.output.tokens[s.generated] if s.output.tokens else ""
            s.generated += 1
            done = s.generated >= s.total_steps
            if s.first_token_at is None:
                s.first_token_at = self._sim
                self.metrics.ttft.observe(self._sim - s.arrived)
            else:
                self.metrics.itl.observe(step)
            if s.output.tokens:
                self.metrics.generation_tokens.inc()
            s.tokens.put_nowait(Token(text, s.output.finish_reason if done else None))
            if done:
                self.metrics.e2e.observe(self._sim - s.arrived)
                self.metrics.success(s.output.finish_reason)
                self._end(s)
            else:
                still.append(s)
        self.running = still
