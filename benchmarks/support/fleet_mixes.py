"""Traffic mixes with a chosen share of tolerant requests, for the fleet experiment's sweep (pure, seeded).

The pool is the units (single requests and sessions) of the given files. Sessions whose turns change class
(tolerant chat that turns into a sensitive task) are left out, so the share is exact and "sensitive on INT4"
in the sweep measures the classifier alone; the headline comparison replays mixed.jsonl as it is, pivots included.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from quantroute.loadtest.traffic import TrafficLine, Unit, units


def unit_class(unit: Unit) -> str | None:
    """'tolerant' when every turn is tolerant, 'other' when none is, None for a session that pivots."""
    tolerant = [ln.class_ == "tolerant" for ln in unit.lines]
    return "tolerant" if all(tolerant) else ("other" if not any(tolerant) else None)


def tolerant_mix(lines: Iterable[TrafficLine], share: float, *, requests: int = 300,
                 seed: int = 0) -> list[TrafficLine]:
    """About `requests` lines of which a fraction `share` (0..1) is tolerant, units drawn with replacement and
    shuffled. Session ids are made unique per draw."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be within 0..1, got {share}")
    pools: dict[str, list[Unit]] = {"tolerant": [], "other": []}
    for u in units(lines):
        cls = unit_class(u)
        if cls is not None:
            pools[cls].append(u)
    rng = random.Random(seed)
    target = {"tolerant": round(requests * share), "other": requests - round(requests * share)}
    drawn: list[Unit] = []
    for cls, want in target.items():
        if want and not pools[cls]:
            raise ValueError(f"no {cls} units in the pool to reach a tolerant share of {share:.0%}")
        got = 0
        while got < want:
            u = rng.choice(pools[cls])
            drawn.append(u)
            got += len(u.lines)
    rng.shuffle(drawn)
    return list(_flatten(drawn))


def _flatten(drawn: Sequence[Unit]) -> Iterable[TrafficLine]:
    """Units in order, each session's turns consecutive (replay keeps them in order and apart anyway)."""
    for i, u in enumerate(drawn):
        for ln in u.lines:
            yield ln if u.session is None else ln.model_copy(update={"session": f"{u.session}-d{i}"})


def tolerant_share(lines: Sequence[TrafficLine]) -> float:
    return sum(ln.class_ == "tolerant" for ln in lines) / len(lines) if lines else 0.0


def multi_turn(lines: Iterable[TrafficLine]) -> list[TrafficLine]:
    """Only the sessions (every turn) of the given lines: the mix where a session's KV prefix can be reused."""
    return [ln for u in units(lines) if u.session is not None for ln in u.lines]
