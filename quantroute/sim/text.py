"""What a simulated node says and how many tokens it counts: a crude tokenizer (a word with its leading space is a
token), deterministic filler text, and the rules vLLM applies to an output (max_tokens, stop, ignore_eos)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from quantroute.sim.quality import QualityTable, content_text, unit_hash
from quantroute.tiers import Tier

_TOKEN = re.compile(r"\s*\S+|\s+")
_WORDS = ("the model serves each request at the tier its policy allows while the fleet keeps enough "
          "capacity for sessions that need full precision and the cheaper nodes absorb tolerant traffic "
          "so that latency stays low memory bandwidth decides the speed of every decode step batch "
          "cache tokens quality routing canary rollout evaluation").split()


def split_tokens(text: str) -> list[str]:
    """Pieces whose concatenation is `text` exactly; one per simulated token."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    """Prompt tokens, at about 4 characters per token like BPE tokenizers on English."""
    return max(1, math.ceil(len(text) / 4))


def _chunks(text: str) -> list[str]:
    """`count_tokens(text)` pieces of about 4 characters (one empty piece for empty text)."""
    return [text[i:i + 4] for i in range(0, len(text), 4)] or [""]


def prompt_pieces(body: dict) -> list[str]:
    """The prompt as the node tokenizes it: what the prefix cache hashes, one piece per prompt token. A chat
    message is its role header, its text and three end-of-turn tokens (chat templates add a few per message); the
    prompt ends with the assistant's header, the generation prompt. So turn k+1 of a conversation starts with
    exactly the pieces of turn k's prompt, as a real chat template's output does."""
    if "messages" in body:
        out: list[str] = []
        for m in body["messages"]:
            role = m.get("role") if isinstance(m, dict) else None
            content = content_text(m.get("content")) if isinstance(m, dict) else ""
            out += [f"<|{role}|>", *_chunks(content), "<|end|>", "\n", "\n"]
        return [*out, "<|assistant|>"]
    prompt = body.get("prompt") or ""
    return _chunks(prompt if isinstance(prompt, str) else " ".join(map(str, prompt)))


def prompt_tokens(body: dict) -> int:
    if "messages" in body:
        # Each message adds a few template tokens (role header, end-of-turn), as chat templates do.
        return sum(count_tokens(content_text(m.get("content"))) + 4 for m in body["messages"]) + 1
    prompt = body.get("prompt") or ""
    return count_tokens(prompt if isinstance(prompt, str) else " ".join(map(str, prompt)))


def filler(key: str, n: int) -> list[str]:
    """`n` tokens of deterministic prose chosen by `key`."""
    out: list[str] = []
    for i in range(n):
        word = _WORDS[int(unit_hash(key, i) * len(_WORDS))]
        start = i == 0 or out[-1].endswith(".")
        word = word.capitalize() if start else word
        end = unit_hash(key, i, "end") < 0.08
        out.append((" " if i else "") + word + ("." if end or i == n - 1 else ""))
    return out


@dataclass(frozen=True)
class Output:
    tokens: list[str]
    finish_reason: str  # "stop" or "length", as vLLM reports them

    @property
    def text(self) -> str:
        return "".join(self.tokens)


def plan_output(*, key: str, answer: str | None, max_tokens: int, stop: list[str], ignore_eos: bool) -> Output:
    """The tokens a node emits: the answer (or filler of a length fixed by `key`), continued past end-of-sequence
    only with ignore_eos, cut at max_tokens ("length") or before the first stop string ("stop")."""
    tokens = split_tokens(answer) if answer is not None else filler(key, 16 + int(unit_hash(key, "len") * 144))
    if ignore_eos and len(tokens) < max_tokens:
        tokens += [" " + t.lstrip() for t in filler(key + "#more", max_tokens - len(tokens))]
    finish = "stop"
    if len(tokens) >= max_tokens:
        finish = "length" if (len(tokens) > max_tokens or ignore_eos) else "stop"
        tokens = tokens[:max_tokens]
    text = "".join(tokens)
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    if cuts:
        return Output(split_tokens(text[: min(cuts)]), "stop")
    return Output(tokens, finish)


# How far a deployment's own quirks move a prompt's shared draw (as DEPLOYMENT_JITTER does for eval items): two
# artifacts of one tier mostly drift on the same prompts, and a lower tier drifts on (almost) every prompt a higher
# one drifts on.
GREEDY_JITTER = 0.01


def _reference(key: str, task: str, seed: int) -> str:
    """The FP16 deployment's greedy answer to a prompt outside the eval suites (the same on every FP16 node)."""
    words = filler(f"{seed}|greedy|{key}", 12 + int(unit_hash(seed, key, "len") * 100))
    if task == "json":
        picks = [w.strip(" .").lower() for w in words[:4]]
        return json.dumps({"answer": picks[0], "items": picks[1:], "count": len(picks) - 1})
    if task == "math":
        return "".join(words) + f"\nAnswer: {int(unit_hash(seed, key, 'n') * 1000)}"
    return "".join(words)


def _drifted(ref: str, task: str, key: str, deployment_id: str, seed: int) -> str:
    """A greedy answer that leaves the reference at a point fixed by the prompt and deployment, and differs in its
    result: another text, another final number, another (or a cut) JSON object."""
    if task == "json":
        data = json.loads(ref)
        if unit_hash(seed, key, deployment_id, "cut") < 0.3:
            return ref[: len(ref) // 2]
        data["count"] += 1
        return json.dumps(data)
    body, _, last = ref.rpartition("\nAnswer: ") if task == "math" else (ref, "", "")
    tokens = split_tokens(body)
    # early in the answer, as greedy drift usually is (and within any max_tokens a client sets)
    at = int(unit_hash(seed, key, deployment_id, "at") * min(len(tokens), 24))
    alt = filler(f"{seed}|{deployment_id}|{key}|drift", max(4, len(tokens) - at))
    if at < len(tokens) and alt[0].strip(" .").lower() == tokens[at].strip(" .").lower():
        alt[0] = " instead"
    text = "".join(tokens[:at]) + (" " if at else "") + "".join(alt).lstrip()
    return text + (f"\nAnswer: {int(last) + 1}" if task == "math" else "")


def greedy_answer(key: str, task: str, *, tier: Tier, deployment_id: str, table: QualityTable, seed: int = 0) -> str:
    """A deployment's answer at temperature 0 to a prompt outside the eval suites: the FP16 reference with the
    quality table's p_agree(tier, task), else a drifted answer; the same inputs always give the same text."""
    ref = _reference(key, task, seed)
    p = table.p_agree(tier, task)
    if p >= 1:
        return ref
    draw = unit_hash(seed, "greedy", key) + (unit_hash(seed, "greedy", key, deployment_id) - 0.5) * 2 * GREEDY_JITTER
    if draw >= 1 - p:
        return ref
    return _drifted(ref, task, key, deployment_id, seed)
