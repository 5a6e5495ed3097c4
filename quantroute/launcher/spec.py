"""Real-fleet files (`quantroute fleet up --engine vllm --fleet FILE`): which artifact each vLLM server serves.

Unlike the simulator's fleet file (quantroute.fleet), a real node declares no tier or format: the registrar
reads them from the artifact when the node is registered. The pydantic models are the only description of the
YAML shape; errors name every bad field with its path.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class RealFleetError(ValueError):
    """A real-fleet file that cannot be used; the message lists every problem with its field path."""


class RealNode(BaseModel):
    """One vLLM server serving one deployment's model directory."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    deployment: str = Field(min_length=1, description="Deployment id: vLLM's first served name")
    model_dir: str = Field(min_length=1, description="Artifact directory, relative to the fleet file's base dir")
    port: int = Field(default=0, ge=0, le=65535, description="0 picks a free port at start")
    max_num_seqs: int = Field(default=4, ge=1)
    omp_threads_bind: str | None = Field(
        default=None, min_length=1,
        description="VLLM_CPU_OMP_THREADS_BIND: the worker's cores ('0', '0-3', 'nobind'); unset: one core a node, "
                    "the host's cores taken in turn (see worker_cores)")


class RealFleet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="Logical model every node also answers to")
    hardware: str = Field(default="cpu", description="Hardware class sent with each registration")
    base_dir: str = Field(default=".", description="Where model_dir paths start, relative to the working dir")
    max_model_len: int = Field(default=512, ge=16)
    kv_cache_gb: int = Field(default=1, ge=1, description="VLLM_CPU_KVCACHE_SPACE per server")
    enforce_eager: bool = Field(default=True, description="Skip torch.compile's warm-up: on a busy 2-core machine "
                                "it takes minutes per server, and a model this small gains little from it")
    nodes: list[RealNode] = Field(min_length=1)

    def model_dir(self, node: RealNode) -> Path:
        return Path(self.base_dir) / node.model_dir


def worker_cores(nodes: list[RealNode], cores: list[int]) -> list[str]:
    """Each node's VLLM_CPU_OMP_THREADS_BIND: its own setting, or else the next of `cores` in turn.

    vLLM's CPU worker pins itself (libgomp's affinity, set as torch loads) to the cores it is given, from its
    imports on. One core a worker leaves the API servers the rest, so /health answers while a model runs; the
    cores are taken in turn because one core for every node would put all of a fleet's workers, their start-up
    and every tier's generation, on that core while the others idle."""
    if not cores:
        raise ValueError("cores: no CPU to bind a worker to")
    out, turn = [], 0
    for n in nodes:
        if n.omp_threads_bind:
            out.append(n.omp_threads_bind)
        else:
            out.append(str(cores[turn % len(cores)]))
            turn += 1
    return out


def _loc(loc: tuple) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")


def parse_real_fleet(text: str, *, source: str = "<string>") -> RealFleet:
    try:
        fleet = RealFleet.model_validate(yaml.safe_load(text))
    except ValidationError as e:
        raise RealFleetError(f"{source}: " + "; ".join(f"{_loc(x['loc']) or '(top level)'}: {x['msg']}"
                                                       for x in e.errors())) from None
    issues: list[str] = []
    seen: dict[str, set] = {"id": set(), "deployment": set(), "port": set()}
    for i, n in enumerate(fleet.nodes):
        for kind in seen:
            value = getattr(n, kind)
            if value in seen[kind]:
                issues.append(f"nodes[{i}].{kind}: {value!r} is used by an earlier node; each node needs its own")
            if value != 0:  # port 0: a free port each
                seen[kind].add(value)
    if issues:
        raise RealFleetError(f"{source}: " + "; ".join(issues))
    return fleet


def load_real_fleet(path: str | Path) -> RealFleet:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise RealFleetError(f"{path}: cannot read: {e.strerror}") from None
    return parse_real_fleet(text, source=str(path))
