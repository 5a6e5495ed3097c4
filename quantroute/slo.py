"""Named latency SLOs (pure): what the policy tuner maximises capacity under, what the fleet experiment reports
and what a policy's `spill` section can be set to."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class NamedSlo(BaseModel):
    """A p95 limit on TPOT or TTFT (ms); neither: throughput-bound (the batch limit decides)."""

    model_config = ConfigDict(frozen=True)

    name: str
    label: str
    tpot_p95_ms: float | None = None
    ttft_p95_ms: float | None = None


SLOS: dict[str, NamedSlo] = {s.name: s for s in (
    NamedSlo(name="tpot30", label="TPOT p95 <= 30 ms", tpot_p95_ms=30),
    NamedSlo(name="tpot50", label="TPOT p95 <= 50 ms", tpot_p95_ms=50),
    NamedSlo(name="tpot100", label="TPOT p95 <= 100 ms", tpot_p95_ms=100),
    NamedSlo(name="ttft500", label="TTFT p95 <= 0.5 s", ttft_p95_ms=500),
    NamedSlo(name="ttft1000", label="TTFT p95 <= 1 s", ttft_p95_ms=1000),
    NamedSlo(name="throughput", label="throughput-bound"),
)}


def slo_named(name: str) -> NamedSlo:
    """The SLO called `name`, or a ValueError listing the valid names."""
    try:
        return SLOS[name]
    except KeyError:
        valid = ", ".join(f"{n} ({s.label})" for n, s in SLOS.items())
        raise ValueError(f"unknown SLO {name!r}; valid: {valid}") from None
