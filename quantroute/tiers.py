"""Precision tiers, ordered by fidelity. The order is the one fact every other module relies on:
routing may escalate to a higher-fidelity tier, never descend to a lower one."""

from __future__ import annotations

from enum import Enum


class Tier(str, Enum):
    fp16 = "fp16"
    fp8 = "fp8"
    int8 = "int8"
    int4 = "int4"

    @property
    def rank(self) -> int:
        """0 is the highest fidelity (fp16); larger is cheaper and less faithful."""
        return TIER_ORDER.index(self)


TIER_ORDER: tuple[Tier, ...] = (Tier.fp16, Tier.fp8, Tier.int8, Tier.int4)

# Weight bytes per parameter, before scale/metadata overhead.
BYTES_PER_PARAM: dict[Tier, float] = {Tier.fp16: 2.0, Tier.fp8: 1.0, Tier.int8: 1.0, Tier.int4: 0.5}


def parse_tier(value: str) -> Tier:
    """Accept the vocabulary's names plus common aliases (bf16, w4a16...)."""
    v = value.strip().lower()
    aliases = {"bf16": "fp16", "float16": "fp16", "bfloat16": "fp16", "half": "fp16",
               "w8a8": "int8", "w8a16": "int8", "w4a16": "int4", "w4a8": "int4",
               "awq": "int4", "gptq": "int4"}
    v = aliases.get(v, v)
    try:
        return Tier(v)
    except ValueError:
        raise ValueError(f"unknown tier {value!r}; valid tiers: {', '.join(t.value for t in TIER_ORDER)}") from None


def at_least(tier: Tier, minimum: Tier) -> bool:
    """True when `tier` is at least as faithful as `minimum`."""
    return tier.rank <= minimum.rank


def tiers_at_or_above(tier: Tier, *, ceiling: Tier = Tier.fp16) -> list[Tier]:
    """Tiers to try for an unpinned request, cheapest first: `tier`, then each more faithful one up to
    `ceiling`. Never a tier below `tier`."""
    return [t for t in reversed(TIER_ORDER) if t.rank <= tier.rank and t.rank >= ceiling.rank]


def cheapest_served_tier(minimum: Tier, served: set[Tier]) -> Tier | None:
    """The cheapest tier the model is deployed at that is at least as faithful as `minimum`."""
    for t in reversed(TIER_ORDER):
        if t in served and t.rank <= minimum.rank:
            return t
    return None
