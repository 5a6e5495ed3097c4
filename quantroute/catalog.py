"""Reads the reference tables in data/ (hardware classes, model shapes) into the capacity model's types.
Kept apart from `quantroute.capacity` so the arithmetic stays free of I/O."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from quantroute.capacity import GpuSpec, ModelShape

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


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
    measured speed-up on this hardware. None when the hardware class (or the table) is unknown."""
    try:
        table = load_hardware(data_dir)
    except (CatalogError, OSError):
        return None
    spec, ref = table.get(hardware), table.get(REFERENCE_HARDWARE)
    if spec is None or ref is None:
        return None
    return spec.bandwidth_gbs / ref.bandwidth_gbs * spec.decode_speedup.get(tier, 1.0)
