"""The acceptance checklist of a candidate (seed 003, section 10), evaluated for one rollout.

Each item is either known to the system (ticked, or open with the reason, from facts the service gathers)
or left to a named person, who ticks it with their name. Where the system could know but cannot right now
(no router to ask, no load-test table yet), the item falls back to a person and says so. Approval is refused
while a required item (before deployment and during rollout) is open. Pure: the facts come in as values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

Section = Literal["before", "during", "after"]


@dataclass(frozen=True)
class ItemSpec:
    key: str
    section: Section
    text: str
    system: bool  # the system can know it (given the facts)

    @property
    def required(self) -> bool:
        return self.section != "after"  # "after rollout" items cannot block the approval that starts it


ITEMS: tuple[ItemSpec, ...] = (
    ItemSpec("environment_recorded", "before", "GPU, driver, CUDA, PyTorch, serving framework and container "
             "digest recorded", False),
    ItemSpec("artifact_metadata", "before", "Checksum, format, method and calibration set recorded in the "
             "policy's deployment metadata", True),
    ItemSpec("config_and_license", "before", "Model config, quantization config and license verified", False),
    ItemSpec("memory_budget", "before", "Weight, KV-cache, workspace and concurrency memory budgets calculated",
             False),
    ItemSpec("baseline_established", "before", "BF16/FP16 baseline quality and performance established", False),
    ItemSpec("kernel_support", "before", "Hardware runs the quantized kernel (not just loads it)", False),
    ItemSpec("calibration_data", "before", "Calibration data de-identified and covering real traffic", False),
    ItemSpec("staircase_load_test", "before", "Staircase load test run at the target concurrency", True),
    ItemSpec("eval_coverage", "before", "Quality eval covers math, code, tool calling/JSON, multilingual and "
             "long context", True),
    ItemSpec("isolated_node", "during", "Candidate runs on its own node(s), apart from the baseline", True),
    ItemSpec("eval_gate", "during", "Eval gate passed on the pinned suite version before any traffic", True),
    ItemSpec("guards_configured", "during", "Guards configured: error rate, p95 latency and TTFT limits, "
             "gradual steps", True),
    ItemSpec("baseline_healthy", "during", "Baseline still healthy, so rollback can be instant", True),
    ItemSpec("results_archived", "after", "Results, configuration, checksum and test data archived", False),
    ItemSpec("peak_slo", "after", "Peak traffic meets SLOs without sustained OOM or restarts", False),
    ItemSpec("business_quality", "after", "Business-level quality (e.g. structured-output error rate) on target",
             False),
    ItemSpec("rollback_retained", "after", "Previous artifact and rollback image kept for the retention period",
             False),
)
BY_KEY = {i.key: i for i in ITEMS}


class Fact(BaseModel):
    """What the system found for one item: True/False when it knows, None when it cannot tell."""
    ok: bool | None
    detail: str


class ItemView(BaseModel):
    key: str
    section: Section
    text: str
    required: bool
    done: bool
    by: str  # "system", a person's name, or "" while open
    detail: str


class Checklist(BaseModel):
    items: list[ItemView]

    @property
    def open_required(self) -> list[str]:
        return [i.key for i in self.items if i.required and not i.done]

    def lines(self) -> list[str]:
        out = []
        for i in self.items:
            mark = "x" if i.done else " "
            who = f" ({i.by})" if i.done else (" [required]" if i.required else "")
            out.append(f"[{mark}] {i.section:<6} {i.key:<20} {i.text}{who}" + (f" - {i.detail}" if i.detail else ""))
        return out


def person_may_tick(key: str, facts: dict[str, Fact]) -> str | None:
    """None when a person may tick `key`; else why not (unknown item, or the system knows the answer)."""
    spec = BY_KEY.get(key)
    if spec is None:
        return f"unknown checklist item {key!r}; valid: {', '.join(BY_KEY)}"
    fact = facts.get(key)
    if spec.system and fact is not None and fact.ok is not None:
        state = "ticked" if fact.ok else "open"
        return f"{key} is checked by the system ({state}: {fact.detail}); a person cannot override it"
    return None


def evaluate(facts: dict[str, Fact], ticks: dict[str, str]) -> Checklist:
    """`facts`: system findings per system item; `ticks`: item -> the person who ticked it."""
    items = []
    for spec in ITEMS:
        fact = facts.get(spec.key) if spec.system else None
        if fact is not None and fact.ok is not None:
            done, by, detail = fact.ok, "system" if fact.ok else "", fact.detail
        else:
            person = ticks.get(spec.key)
            done, by = person is not None, person or ""
            detail = fact.detail + ("; a named person may tick it" if not done else "") if fact else ""
        items.append(ItemView(key=spec.key, section=spec.section, text=spec.text, required=spec.required,
                              done=done, by=by, detail=detail))
    return Checklist(items=items)
