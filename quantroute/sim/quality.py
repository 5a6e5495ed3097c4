"""The simulator's quality model: for a prompt of an eval suite, a node answers the reference or a wrong answer
with a per-tier, per-category error probability, decided by a hash so every run gives the same answers.

Suite files are read as raw JSON lines, assuming only: `id`, `category`, `messages` (chat) or `prompt`,
`reference` and optionally `wrong`. Items are indexed by the text of the last user message (or the prompt).
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from quantroute.catalog import DATA_DIR
from quantroute.quality_cost import content_text
from quantroute.tiers import Tier

DEFAULT_SUITES = str(DATA_DIR / "evals" / "*.jsonl")


class QualityTable(BaseModel):
    """p_err by tier, then by category (`default` for categories not listed); p_agree (greedy answers outside
    the eval suites that are the FP16 answer, token for token) by tier, then by task type."""

    model_config = ConfigDict(extra="forbid")

    tiers: dict[Tier, dict[str, float]]
    agreement: dict[Tier, dict[str, float]] = {}

    def p_err(self, tier: Tier, category: str) -> float:
        row = self.tiers.get(tier) or self.tiers[Tier.int4]
        return row.get(category, row.get("default", 0.0))

    def p_agree(self, tier: Tier, task: str) -> float:
        """1.0 for a tier the table does not list: without a model of its drift, it answers as FP16 does."""
        row = self.agreement.get(tier, {})
        return row.get(task, row.get("default", 1.0))


# Task types of requests outside the eval suites (the agreement table's columns), recognised from the prompt.
_TASKS = (("json", re.compile(r"\bjson\b", re.I)),
          ("math", re.compile(r"\b(?:math|calculate|compute|solve|equation|sum|percent|probability)\b|"
                              r"\d\s*[-+*/^]\s*\d", re.I)),
          ("code", re.compile(r"\b(?:code|python|function|sql|query|regex|script|javascript|bash|def)\b|```", re.I)))


def task_type(body: dict) -> str:
    """json (asked for JSON), math, code or chat: what kind of answer a greedy request expects."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        return "json"
    if "messages" in body:
        text = " ".join(content_text(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict))
    else:
        text = prompt_key(body)
    return next((name for name, rx in _TASKS if rx.search(text)), "chat")


def load_quality(path: Path = DATA_DIR / "quality.yaml") -> QualityTable:
    return QualityTable.model_validate(yaml.safe_load(path.read_text()))


@dataclass(frozen=True)
class EvalItem:
    id: str
    category: str
    reference: str
    wrong: str | None = None
    # Position of the item in its suite category's difficulty order, in (0, 1); see `load_suites`.
    difficulty: float | None = None
    category_size: int = 1


def prompt_key(body: dict) -> str:
    """What an eval item is recognised by: the last user message of a chat request, or the prompt."""
    if "messages" in body:
        users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
        return content_text(users[-1].get("content")).strip() if users else ""
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        prompt = prompt[0] if prompt and isinstance(prompt[0], str) else ""
    return (prompt or "").strip()


def load_suites(pattern: str = DEFAULT_SUITES) -> dict[str, EvalItem]:
    """Index every item of every matching JSONL file by its prompt key; lines without the fields are skipped.

    Each suite category's items get evenly spaced difficulties in a fixed pseudo-random order, so a tier
    with error probability p misses round(p * n) of a category's n items: the deltas a paired eval shows
    are the ones data/quality.yaml states, not the luck of a hash on a small category."""
    index: dict[str, EvalItem] = {}
    for path in sorted(glob.glob(pattern)):
        items: list[tuple[str, EvalItem]] = []
        for line in Path(path).read_text().splitlines():
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(raw, dict) or "reference" not in raw or "id" not in raw:
                continue
            key = prompt_key(raw)
            if key:
                items.append((key, EvalItem(id=str(raw["id"]), category=str(raw.get("category", "default")),
                                            reference=str(raw["reference"]), wrong=raw.get("wrong"))))
        by_category: dict[str, list[tuple[str, EvalItem]]] = {}
        for key, item in items:
            by_category.setdefault(item.category, []).append((key, item))
        for members in by_category.values():
            members.sort(key=lambda ki: unit_hash("difficulty", ki[1].id))
            n = len(members)
            for rank, (key, item) in enumerate(members):
                index[key] = replace(item, difficulty=(rank + 0.5) / n, category_size=n)
    return index


def unit_hash(*parts: object) -> float:
    """A number in [0, 1) fixed by its inputs."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def corrupt(reference: str) -> str:
    """A deterministic wrong variant of a reference: broken JSON, a dropped line of code, a changed digit."""
    text = reference.strip()
    try:
        json.loads(text)
        return text[:-1]
    except ValueError:
        pass
    lines = reference.splitlines()
    if len(lines) > 2:
        del lines[len(lines) // 2]
        return "\n".join(lines)
    digits = list(re.finditer(r"\d", reference))
    if digits:
        i = digits[-1].start()
        return reference[:i] + str((int(reference[i]) + 1) % 10) + reference[i + 1:]
    return "I am not able to answer that."


# How much a deployment's own quirks move an item's difficulty. Small, so that errors stay nested by tier:
# quantization noise mostly tips over items that are already hard for FP16 (as real paired evals show),
# while two artifacts of the same tier (e.g. AWQ v1 and v2) still differ on a few borderline items.
DEPLOYMENT_JITTER = 0.01


def difficulty(item: EvalItem, deployment_id: str, seed: int = 0) -> float:
    """The item's difficulty in [0, 1): shared by every deployment, plus a little per-deployment jitter
    (at most half a rank step within its category, so same-tier artifacts differ only at the boundary)."""
    if item.difficulty is None:
        shared, step = unit_hash(seed, item.id), DEPLOYMENT_JITTER
    else:
        shared, step = item.difficulty, min(DEPLOYMENT_JITTER, 0.5 / item.category_size)
    return shared + (unit_hash(seed, item.id, deployment_id) - 0.5) * 2 * step


def answer(item: EvalItem, *, tier: Tier, deployment_id: str, table: QualityTable, seed: int = 0) -> tuple[str, bool]:
    """(answer text, whether it is the reference) for one deployment; the same inputs give the same answer.
    An item is answered wrongly when its difficulty falls under the tier's error probability for its category,
    so the items a lower tier misses include (almost all of) those a higher tier misses."""
    if difficulty(item, deployment_id, seed) >= table.p_err(tier, item.category):
        return item.reference, True
    return (item.wrong if item.wrong else corrupt(item.reference)), False
