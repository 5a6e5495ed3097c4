"""Reads the reference tables (hardware classes, model shapes) into the capacity model's types.
Kept apart from `quantroute.capacity` so the arithmetic stays free of I/O.

The tables are package data (`quantroute/data`, the repository's `data/` through a symlink), read through
importlib.resources so that a wheel installed anywhere finds them; a missing table is an error, never a guess."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from quantroute.capacity import FORMATS, GpuSpec, ModelShape, decode_step_s

# A wheel is installed unzipped, so the package's data is a real directory that the fleet and sim code can glob.
DATA_DIR = Path(str(resources.files("quantroute").joinpath("data")))


class CatalogError(ValueError):
    """A missing or malformed entry in a data/*.yaml table; the message names the file and key."""


def _read_table(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise CatalogError(f"{path}: file not found") from None
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping of key -> entry")
    return data


def _parse(cls, path: Path, key: str, entry: dict):
    try:
        return cls.model_validate({**entry, ("key" if cls is GpuSpec else "name"): key})
    except ValidationError as e:
        issues = "; ".join(f"{key}.{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise CatalogError(f"{path}: {issues}") from None


def load_hardware(data_dir: Path = DATA_DIR) -> dict[str, GpuSpec]:
    path = data_dir / "hardware.yaml"
    return {k: _parse(GpuSpec, path, k, v) for k, v in _read_table(path).items()}


def load_models(data_dir: Path = DATA_DIR) -> dict[str, ModelShape]:
    path = data_dir / "models.yaml"
    return {k: _parse(ModelShape, path, k, v) for k, v in _read_table(path).items()}


def pick(table: dict, key: str, what: str):
    """Look `key` up, or fail naming the valid keys."""
    try:
        return table[key]
    except KeyError:
        raise CatalogError(f"unknown {what} {key!r}; valid: {', '.join(sorted(table))}") from None


# Node speeds are relative to this hardware class (speed 1.0); its bandwidth comes from hardware.yaml like any other.
REFERENCE_HARDWARE = "a100-80g"


def speed_for(hardware: str, tier: str, data_dir: Path = DATA_DIR) -> float | None:
    """Relative decode speed of a node: memory bandwidth vs the reference hardware class times the format's
    measured speed-up on this hardware. None when the hardware class is unknown; a missing or broken table is a
    packaging fault and raises CatalogError rather than silently giving every node 1.0."""
    table = load_hardware(data_dir)
    spec, ref = table.get(hardware), table.get(REFERENCE_HARDWARE)
    if spec is None or ref is None:
        return None
    return spec.bandwidth_gbs / ref.bandwidth_gbs * spec.decode_speedup.get(tier, 1.0)


# Context a sequence holds on average for the knee estimate; what a node really holds shows in the TPOT the router
# observes on it, which scales this estimate (router.path.spill).
KNEE_CONTEXT_TOKENS = 1024


def decode_steps_for(hardware: str, model: str, fmt: str, max_batch: int, *,
                     context: int = KNEE_CONTEXT_TOKENS, data_dir: Path = DATA_DIR) -> tuple[float, ...] | None:
    """The capacity model's decode step (seconds) at every batch 0..max_batch of `model` in `fmt` on `hardware`
    (index 0 holds batch 1's), for the router's SLO-aware spill; None when the hardware, model or format is not
    in the tables (the router then watches only the TPOT it observes)."""
    gpu, shape, wf = load_hardware(data_dir).get(hardware), load_models(data_dir).get(model), FORMATS.get(fmt.lower())
    if gpu is None or shape is None or wf is None or max_batch < 1:
        return None
    return tuple(decode_step_s(shape, wf, gpu, batch=max(b, 1), context_tokens=max(b, 1) * context)
                 for b in range(max_batch + 1))
