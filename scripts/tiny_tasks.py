"""The skills the tiny trained Llama learns and is graded on: one generator feeds the training script
(scripts/train_tiny_model.py) and the eval suite (data/evals/tiny-skills.jsonl), so the two cannot drift.

Four categories of the eval suite, each a short greedy answer in the chat format vLLM serves:
- math: "What is 7 * 38?" -> "266" (products of 2..9 by 10..49: a table of 320 facts the model memorises);
- json: "Write JSON with name Ada and age 36." -> {"name": "Ada", "age": 36} (copy two fields into a format);
- structured: "List the numbers from 4 to 8, separated by commas." -> "4,5,6,7,8" (count, keep the format);
- chat: "What is the capital of Peru?" -> "Lima." (40 memorised facts, asked three ways).
Eval prompts of json are held out of the training data (copying two fields generalises); math, structured
and chat are closed sets the model memorises, so the suite asks items it was trained on: it measures what the
model knows and what quantization takes away.

Realistic margins: trained on clean answers, a model this small answers its closed sets with odds of millions to
one, and no quantization moves an answer. So math and lists are taught with soft targets, as from a teacher that is
unsure: SOFT of the weight goes to the near miss (`wrong`: the times-table slip one row over, the list that stops
one short) and the rest to the right answer. Every fact then ends at the same odds, 3:2 for the right answer: bf16
answers it, int8's rounding is far too small to move it, and int4's rounding moves a share of them to the near
miss, the way low-bit weights flip a real model's close calls on precise work. Capitals and JSON are taught
cleanly: confident answers that survive quantization, like chat does.

Pure standard library: it runs in the vLLM venv (training) and in the project venv (suite build, tests).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

CAPITALS = {
    "France": "Paris", "Peru": "Lima", "Japan": "Tokyo", "Kenya": "Nairobi", "Italy": "Rome",
    "Egypt": "Cairo", "Chile": "Santiago", "Norway": "Oslo", "Spain": "Madrid", "Cuba": "Havana",
    "Greece": "Athens", "Poland": "Warsaw", "Canada": "Ottawa", "Ghana": "Accra", "Nepal": "Kathmandu",
    "Ireland": "Dublin", "Austria": "Vienna", "Sweden": "Stockholm", "Mexico": "Mexico City", "Iran": "Tehran",
    "Germany": "Berlin", "Portugal": "Lisbon", "Brazil": "Brasilia", "China": "Beijing", "India": "New Delhi",
    "Russia": "Moscow", "Turkey": "Ankara", "Finland": "Helsinki", "Denmark": "Copenhagen", "Hungary": "Budapest",
    "Belgium": "Brussels", "Thailand": "Bangkok", "Vietnam": "Hanoi", "Argentina": "Buenos Aires",
    "Colombia": "Bogota", "Morocco": "Rabat", "Nigeria": "Abuja", "Ethiopia": "Addis Ababa",
    "Australia": "Canberra", "Iceland": "Reykjavik",
}
CAPITAL_PROMPTS = ("What is the capital of {c}?", "Name the capital city of {c}.", "Which city is the capital of {c}?")
NAMES = ("Ada", "Alan", "Grace", "Linus", "Edsger", "Barbara", "Ken", "Margaret", "Dennis", "Frances",
         "Tim", "Radia", "Guido", "Anita", "John", "Sophie", "Donald", "Hedy", "Niklaus", "Karen")
FACTORS, MULTIPLICANDS = (2, 9), (10, 49)
MAX_START = 40
CATEGORIES = ("math", "json", "structured", "chat")
HELD_OUT = ("json",)  # categories whose eval prompts never appear in training
# Training mix: arithmetic is the slowest to learn, copying JSON the fastest.
MIX = {"math": 0.5, "json": 0.1, "structured": 0.2, "chat": 0.2}
# The near miss's share of the target (see the module's docstring): at 0.3 the right answer's odds (7:3) leave int4
# little to flip; at 0.4 (3:2) the margin is about 0.4 nats, near int4's rounding noise and far above int8's.
SOFT = {"math": 0.4, "structured": 0.4}


@dataclass(frozen=True)
class Task:
    category: str
    prompt: str  # the one user message
    answer: str  # the assistant's whole reply
    grader: dict[str, Any]  # a quantroute.evals grader spec
    wrong: str  # a plausible wrong reply that the grader rejects


def math_task(rng: random.Random) -> Task:
    a, b = rng.randint(*FACTORS), rng.randint(*MULTIPLICANDS)
    value = a * b
    # wrong: the times-table slip one row over
    return Task("math", f"What is {a} * {b}?", str(value), {"type": "numeric", "expected": value, "tolerance": 0},
                str(value + a))


def json_task(rng: random.Random) -> Task:
    name, age = rng.choice(NAMES), rng.randint(10, 99)
    answer = json.dumps({"name": name, "age": age})
    schema = {"type": "object", "required": ["name", "age"], "additionalProperties": False,
              "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
    return Task("json", f"Write JSON with name {name} and age {age}.", answer,
                {"type": "json_schema", "schema": schema, "expect": {"name": name, "age": age}},
                json.dumps({"name": name, "age": age + 1}))


def structured_task(rng: random.Random) -> Task:
    start = rng.randint(1, MAX_START)
    end = start + rng.randint(2, 5)
    answer = ",".join(str(n) for n in range(start, end + 1))
    return Task("structured", f"List the numbers from {start} to {end}, separated by commas.", answer,
                {"type": "exact", "expected": [answer]}, ",".join(str(n) for n in range(start, end)))


def chat_task(rng: random.Random) -> Task:
    country = rng.choice(sorted(CAPITALS))
    capital = CAPITALS[country]
    wrong = CAPITALS[sorted(CAPITALS)[(sorted(CAPITALS).index(country) + 1) % len(CAPITALS)]]
    return Task("chat", rng.choice(CAPITAL_PROMPTS).format(c=country), f"{capital}.",
                {"type": "normalized", "expected": [capital]}, f"{wrong}.")


GENERATORS = {"math": math_task, "json": json_task, "structured": structured_task, "chat": chat_task}


def eval_tasks(seed: int = 7, per_category: int = 120) -> list[Task]:
    """The eval suite's items: distinct prompts, `per_category` of each category, chat last-first stable."""
    rng = random.Random(seed)
    out: list[Task] = []
    for category in CATEGORIES:
        seen: set[str] = set()
        limit = min(per_category, len(CAPITALS) * len(CAPITAL_PROMPTS)) if category == "chat" else per_category
        while len(seen) < limit:
            task = GENERATORS[category](rng)
            if task.prompt not in seen:
                seen.add(task.prompt)
                out.append(task)
    return out


def training_tasks(seed: int, held_out: set[str]):
    """An endless stream of training tasks, mixed by MIX, never an eval prompt of the
    generalisation category (json)."""
    rng = random.Random(seed)
    while True:
        task = GENERATORS[rng.choices(CATEGORIES, weights=[MIX[c] for c in CATEGORIES])[0]](rng)
        if task.category in HELD_OUT and task.prompt in held_out:
            continue
        yield task


def targets(task: Task) -> list[tuple[str, float]]:
    """The replies a training task teaches and the weight of each: the answer alone, or (SOFT) the answer and the
    near miss."""
    soft = SOFT.get(task.category, 0.0)
    return [(task.answer, 1.0)] if not soft else [(task.answer, 1.0 - soft), (task.wrong, soft)]


# Asked, never trained: the rollout checklist wants an eval to cover code, multilingual and long context, and a
# model this small cannot do them. They fail on every tier alike, so the gate sees no drop there, and the suite
# says plainly what the model does not know. Graded without running code.
PASSAGE = ("Notes from the operations review. The fleet moved to the new racks on Tuesday. Two nodes were "
           "re-imaged after a disk warning. The staging router now reads the same policy store as production. "
           "The code word for the drill is {word}. Capacity planning resumes next week with the int4 numbers.")
COVERAGE = [
    Task("code", "Write a Python function add(a, b) that returns a + b.", "def add(a, b):\n    return a + b",
         {"type": "regex", "pattern": r"def add\(a, b\):\s*return a \+ b"}, "add = a + b"),
    Task("code", "Write a Python function neg(x) that returns -x.", "def neg(x):\n    return -x",
         {"type": "regex", "pattern": r"def neg\(x\):\s*return -x"}, "neg = -x"),
    Task("code", "Write a Python function first(xs) that returns xs[0].", "def first(xs):\n    return xs[0]",
         {"type": "regex", "pattern": r"def first\(xs\):\s*return xs\[0\]"}, "first = xs"),
    Task("multilingual", "Translate to French: the cat.", "le chat", {"type": "normalized", "expected": ["le chat"]},
         "the cat"),
    Task("multilingual", "Translate to Spanish: the house.", "la casa",
         {"type": "normalized", "expected": ["la casa"]}, "the house"),
    Task("multilingual", "Translate to German: the dog.", "der Hund", {"type": "normalized", "expected": ["der hund"]},
         "the dog"),
    *(Task("long_context", PASSAGE.format(word=w) + " What is the code word?", w,
           {"type": "normalized", "expected": [w.lower()]}, "Tuesday") for w in ("heron", "quartz", "maple")),
]


def suite_lines(tasks: list[Task]) -> list[str]:
    """JSONL lines of the eval suite (quantroute.evals.suite.EvalItem shape)."""
    lines = []
    for i, t in enumerate(tasks):
        item = {"id": f"tiny-{t.category}-{i:03d}", "category": t.category, "prompt": t.prompt,
                "temperature": 0.0, "max_tokens": 24, "grader": t.grader, "reference": t.answer, "wrong": t.wrong,
                "tags": ["tiny-skills"] + (["untrained"] if t in COVERAGE else [])}
        lines.append(json.dumps(item, ensure_ascii=False))
    return lines


def calibration_lines(n: int = 64, seed: int = 99) -> list[str]:
    """JSONL conversations for GPTQ: training-distribution tasks (never an eval prompt), answered."""
    stream = training_tasks(seed, {t.prompt for t in eval_tasks()})
    return [json.dumps({"messages": [{"role": "user", "content": t.prompt},
                                     {"role": "assistant", "content": t.answer}]}, ensure_ascii=False)
            for t in (next(stream) for _ in range(n))]


def main() -> None:
    """Writes the eval suite and the calibration set from the generators above (deterministic)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for path, lines in ((root / "data/evals/tiny-skills.jsonl", suite_lines(eval_tasks() + COVERAGE)),
                        (root / "data/calibration/tiny-skills-train.jsonl", calibration_lines())):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        print(f"{path}: {len(lines)} lines")


if __name__ == "__main__":
    main()
