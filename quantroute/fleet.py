"""Fleet files: the nodes of a (simulated or real) vLLM fleet, one deployment per node.

The simulator serves every node of a fleet file; the router reads the same file to know its nodes. The pydantic
models below are the only description of the YAML shape.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from quantroute import yamlsafe
from quantroute.capacity import FORMATS
from quantroute.catalog import DATA_DIR, load_hardware, load_models
from quantroute.node import NodeIdentity
from quantroute.tiers import Tier


class FleetError(ValueError):
    """A fleet file that cannot be used; `issues` lists every problem as (field path, message)."""

    def __init__(self, source: str, issues: list[tuple[str, str]]):
        self.source = source
        self.issues = issues
        super().__init__(f"{source}: " + "; ".join(f"{p}: {m}" for p, m in issues))


class Faults(BaseModel):
    """Fault knobs of a simulated node; changeable at runtime through `POST /sim/faults`."""

    model_config = ConfigDict(extra="forbid")

    error_rate: float = Field(default=0.0, ge=0.0, le=1.0, description="Share of requests answered with a 500")
    extra_latency_ms: float = Field(default=0.0, ge=0.0, description="Wall-clock delay before each response "
                                    "starts; not scaled by --time-scale, so a test can make a node visibly slow")
    latency_factor: float = Field(default=1.0, gt=0.0, description="Multiplies prefill and decode step times")
    die_after: int | None = Field(default=None, ge=0, description="Stop listening after this many requests")


class DeploymentSpec(BaseModel):
    """The artifact a node serves."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="Logical model, e.g. llama3-8b")
    id: str = Field(min_length=1, description="Deployment id, e.g. llama3-8b-awq-w4a16")
    tier: Tier
    format: str = Field(description=f"Weight format: {', '.join(FORMATS)}")
    method: str = "none"
    checksum: str = ""
    calibration_set: str | None = None
    eval_suite: str | None = None

    @model_validator(mode="after")
    def _format_matches_tier(self) -> DeploymentSpec:
        fmt = FORMATS.get(self.format.lower())
        if fmt is None:
            raise ValueError(f"format {self.format!r} is not one of {', '.join(FORMATS)}")
        if fmt.tier != self.tier:
            raise ValueError(f"format {self.format!r} belongs to tier {fmt.tier.value}, not {self.tier.value}")
        return self


class NodeSpec(BaseModel):
    """One vLLM server serving one deployment."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    host: str = "127.0.0.1"
    port: int = Field(ge=0, le=65535, description="0 picks a free port when the simulator starts")
    deployment: DeploymentSpec
    hardware: str = Field(description="Key into data/hardware.yaml, e.g. a100-80g")
    vram_gb: float | None = Field(default=None, gt=0, description="Defaults to the hardware class's VRAM")
    max_num_seqs: int = Field(default=256, ge=1)
    max_model_len: int = Field(default=8192, ge=16)
    model_shape: str | None = Field(default=None, description="Overrides the fleet's model_shape for this node")
    faults: Faults = Field(default_factory=Faults)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def identity(self) -> NodeIdentity:
        d = self.deployment
        return NodeIdentity(url=self.url, model=d.model, deployment=d.id, tier=d.tier, format=d.format,
                            method=d.method, checksum=d.checksum, hardware=self.hardware, vram_gb=self.vram_gb,
                            node_id=self.id)


class Fleet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_shape: str = Field(description="Key into data/models.yaml: the shape the capacity model uses")
    nodes: list[NodeSpec] = Field(min_length=1)

    def node(self, node_id: str) -> NodeSpec:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"no node {node_id!r}; nodes: {', '.join(n.id for n in self.nodes)}")

    def shape_for(self, node: NodeSpec) -> str:
        return node.model_shape or self.model_shape


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _cross_check(fleet: Fleet, data_dir: Path) -> list[tuple[str, str]]:
    """What a field validator cannot see: keys into the data tables, uniqueness, tier of each deployment id."""
    hardware, models = load_hardware(data_dir), load_models(data_dir)
    issues: list[tuple[str, str]] = []
    if fleet.model_shape not in models:
        issues.append(("model_shape", f"unknown model shape {fleet.model_shape!r}; valid: {', '.join(models)}"))
    seen_ids: set[str] = set()
    seen_ports: set[tuple[str, int]] = set()
    tier_of: dict[str, tuple[Tier, int]] = {}
    for i, n in enumerate(fleet.nodes):
        if n.hardware not in hardware:
            issues.append((f"nodes[{i}].hardware", f"unknown hardware {n.hardware!r}; valid: {', '.join(hardware)}"))
        if n.model_shape and n.model_shape not in models:
            issues.append((f"nodes[{i}].model_shape",
                           f"unknown model shape {n.model_shape!r}; valid: {', '.join(models)}"))
        if n.id in seen_ids:
            issues.append((f"nodes[{i}].id", f"duplicate node id {n.id!r}; node ids must be unique"))
        seen_ids.add(n.id)
        if n.port and (n.host, n.port) in seen_ports:
            issues.append((f"nodes[{i}].port", f"port {n.port} is already used by another node; use another or 0"))
        seen_ports.add((n.host, n.port))
        dep = n.deployment
        first = tier_of.setdefault(dep.id, (dep.tier, i))
        if first[0] != dep.tier:
            issues.append((f"nodes[{i}].deployment.id", f"deployment {dep.id!r} is tier {first[0].value} on "
                           f"nodes[{first[1]}]; a deployment id names one artifact, "
                           f"give the {dep.tier.value} one its own id"))
    return issues


def parse_fleet(text: str, *, source: str = "<string>", data_dir: Path = DATA_DIR) -> Fleet:
    raw = yamlsafe.safe_load(text)
    try:
        fleet = Fleet.model_validate(raw)
    except ValidationError as e:
        raise FleetError(source, [(_loc(err["loc"]) or "(top level)", err["msg"]) for err in e.errors()]) from None
    issues = _cross_check(fleet, data_dir)
    if issues:
        raise FleetError(source, issues)
    hardware = load_hardware(data_dir)
    for n in fleet.nodes:
        if n.vram_gb is None:
            n.vram_gb = hardware[n.hardware].vram_gb
    return fleet


def load_fleet(path: str | Path, *, data_dir: Path = DATA_DIR) -> Fleet:
    path = Path(path)
    return parse_fleet(path.read_text(), source=str(path), data_dir=data_dir)
