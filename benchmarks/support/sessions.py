"""Session traffic that comes back, for wrk: the `returning` and `chat` modes of the router benchmarks.

wrk sends one session id per request from a file of ids, in order (`trace_script`); Python decides the order:

- `returning`: a seed run at c=32 starts sessions (first turns); after the router's touch interval every one of
  them is due for a refresh, and the measured runs replay those sessions, each once, in the same order.
- `chat`: sessions of 2-8 turns (uniform), gaps between turns uniform in 2-120 s, arriving as a Poisson process
  at the rate the router serves (`chat_turns`); a fifth of the turns are first turns. The trace starts in the
  steady state: the sessions in flight at its start are seeded first (one first turn each), then the run waits
  the touch interval, so their next turns are all due for a refresh (more refreshes than the steady state has,
  never fewer). `scale` shrinks every gap, with the router's touch interval shrunk by the same factor, so a
  short run sees the same share of refreshes with fewer sessions in flight.

wrk runs in a closed loop, so a trace is played as fast as the router answers; it is generated at a rate close to
what the router serves (`rate`), so real gaps are close to the drawn ones (longer where the router is slower)."""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from quantroute.router.settings import RouterSettings

TURNS = (2, 8)  # turns a chat session has, uniform
GAP_S = (2.0, 120.0)  # seconds between a session's turns, uniform, before `scale`
# the router's default pin_touch_interval_s, which `scale` shrinks with the gaps
TOUCH_INTERVAL_S: float = RouterSettings.model_fields["pin_touch_interval_s"].default
TRACE_MODES = ("returning", "chat")  # session modes of router_overhead.py that come back, from a trace made here

LUA_TRACE = """
local ids = {}
for line in io.lines("%s") do ids[#ids + 1] = line end
local i = 0
request = function()
  i = i + 1
  wrk.headers["x-session-id"] = ids[(i - 1) %% #ids + 1]
  return wrk.format()
end
"""


def trace_script(tmp: Path, head: str, done: str, ids: list[str], name: str) -> Path:
    """A wrk script sending `ids` in order (from the start again if the run outlasts them)."""
    ids_path = tmp / f"{name}.ids"
    ids_path.write_text("\n".join(ids) + "\n")
    path = tmp / f"{name}.lua"
    path.write_text(head + LUA_TRACE % ids_path + done)
    return path


def chat_turns(rate: float, *, scale: float = 1.0, seed: int = 0, tag: str = "chat") \
        -> Iterator[tuple[float, str, bool, int]]:
    """(time s, session id, first turn, turns left after it) of chat traffic at about `rate` turns a second, in
    time order, forever. Time starts at -history: the caller seeds the sessions that began before 0 (see
    `ChatTrace`)."""
    rng = random.Random(seed)
    mean_turns = sum(TURNS) / 2
    arrivals = rate / mean_turns  # sessions a second
    upcoming: list[tuple[float, int, int]] = []  # (time of the next turn, session, turns left after it)
    ids = itertools.count()
    t_next = -history_s(scale)
    while True:
        if upcoming and upcoming[0][0] <= t_next:
            t, sid, left = heapq.heappop(upcoming)
            yield t, f"{tag}-{sid}", False, left
        else:
            t, sid, left = t_next, next(ids), rng.randint(*TURNS) - 1
            t_next += rng.expovariate(arrivals)
            yield t, f"{tag}-{sid}", True, left
        if left:
            heapq.heappush(upcoming, (t + rng.uniform(*GAP_S) * scale, sid, left - 1))


def history_s(scale: float) -> float:
    """How far back the longest session in flight at time 0 may have started."""
    return (TURNS[1] - 1) * GAP_S[1] * scale


class ChatTrace:
    """Chat turns for consecutive wrk runs: `seed()` once (the sessions in flight at time 0), then per run
    `take(n)` ids and `consumed(k)` the ones wrk reported sent; the rest go to the next run."""

    def __init__(self, rate: float, *, scale: float = 1.0, seed: int = 0, tag: str = "chat") -> None:
        self.turns = chat_turns(rate, scale=scale, seed=seed, tag=tag)
        self.buffer: deque[tuple[str, bool]] = deque()
        self.first = self.returning = 0  # turns handed out, by kind

    def seed(self) -> list[str]:
        """One id per session that had a turn before time 0 and has turns left: they are in flight when the trace
        starts, and the router must know them (first turns, sent before the measured runs)."""
        live: dict[str, None] = {}
        for t, sid, first, left in self.turns:
            if t >= 0:
                self.buffer.append((sid, first))
                break
            if left:
                live[sid] = None
            else:
                live.pop(sid, None)
        return list(live)

    def take(self, n: int) -> list[str]:
        while len(self.buffer) < n:
            _, sid, first, _ = next(self.turns)
            self.buffer.append((sid, first))
        return [sid for sid, _ in itertools.islice(self.buffer, n)]

    def consumed(self, k: int) -> None:
        for _ in range(min(k, len(self.buffer))):
            _, first = self.buffer.popleft()
            if first:
                self.first += 1
            else:
                self.returning += 1


class ReturningTrace:
    """The sessions a seed run started, replayed in order, each once (from the start again only if a run
    outlasts them, which the measured share of refreshed turns would show)."""

    def __init__(self, tag: str, n: int) -> None:
        self.ids = [f"{tag}-{i}" for i in range(n)]
        self.offset = 0

    def seeded(self, sent: int) -> None:
        """The seed run answered `sent` requests: sessions past them were never started, so they are not replayed."""
        self.ids = self.ids[:max(1, min(sent, len(self.ids)))]

    def take(self, n: int) -> list[str]:
        return [self.ids[(self.offset + i) % len(self.ids)] for i in range(n)]

    def consumed(self, k: int) -> None:
        self.offset += k
