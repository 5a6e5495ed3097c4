"""Sensitivity classifier: (policy, request body, headers) -> score, minimum tier and the rules that fired.

Pure and fast: a policy is compiled once into closures (one case-insensitive regex per keyword list), prompt
text is assembled only for the scopes some rule reads, and entropy is computed only when a rule asks for it.
The router calls this on every request, so it must stay in the tens of microseconds."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import ahocorasick
import numpy as np

from quantroute.policy.condition import (
    AllCond,
    AnyCond,
    EntropyCond,
    KeywordsCond,
    LatencyBudgetCond,
    NotCond,
    OutputTokensCond,
    PriorityCond,
    PromptCharsCond,
    ResponseFormatCond,
    StreamCond,
    TemperatureCond,
    ToolsCond,
)
from quantroute.policy.model import Policy, tier_for_score
from quantroute.policy.patterns import keyword_regex
from quantroute.tiers import Tier, parse_tier


class RequestError(ValueError):
    """The request body or a header is malformed; the router answers 400 with `param` named."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True, slots=True)
class FiredRule:
    name: str
    weight: float


@dataclass(frozen=True, slots=True)
class Decision:
    score: float
    tier: Tier  # the minimum tier allowed (the router picks this one unless it escalates)
    rules: tuple[FiredRule, ...]
    output_estimate: int
    header_tier: Tier | None = None  # x-min-tier, when the client sent one

    @property
    def rule_names(self) -> list[str]:
        return [r.name for r in self.rules]

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "tier": self.tier.value, "output_estimate": self.output_estimate,
                "rules": [{"name": r.name, "weight": r.weight} for r in self.rules]}


# ---- request view ----------------------------------------------------------------------------------------

def _content_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                raise RequestError(f"{where}[{i}] must be an object with a 'type'", where)
            if part.get("type") == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise RequestError(f"{where}[{i}].text must be a string", where)
                parts.append(text)
        return "\n".join(parts)
    raise RequestError(f"{where} must be a string or a list of content parts", where)


class RequestView:
    """What the rules read from one request; text per scope and entropy are computed on first use."""

    __slots__ = ("body", "system", "user", "last_user", "messages", "prompt", "_entropy", "_hits", "_index",
                 "temperature", "max_tokens", "priority", "latency_budget_ms", "header_tier")

    def __init__(self, body: Any, headers: Mapping[str, str], policy: Policy, kind: str | None,
                 index: KeywordIndex | None = None):
        if not isinstance(body, dict):
            raise RequestError("the request body must be a JSON object")
        self.body = body
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise RequestError("'model' is required and must be a non-empty string", "model")
        self._split_text(body, kind)
        self._entropy: float | None = None
        self._hits: dict[str, frozenset[str]] = {}
        self._index = index
        self.temperature = _number(body, "temperature", 0.0, 2.0)
        mt = body.get("max_completion_tokens", body.get("max_tokens"))
        if mt is not None and (isinstance(mt, bool) or not isinstance(mt, int) or mt < 1):
            raise RequestError("'max_tokens' must be a positive integer", "max_tokens")
        self.max_tokens = mt
        hp = policy.headers
        self.priority = _header_number(headers, hp.priority_header, 1, 10)
        self.latency_budget_ms = _header_number(headers, hp.latency_budget_header, 0, None)
        raw_tier = headers.get(hp.min_tier_header)
        try:
            self.header_tier = parse_tier(raw_tier) if raw_tier else None
        except ValueError as e:
            raise RequestError(f"header {hp.min_tier_header}: {e}", hp.min_tier_header) from None

    def _split_text(self, body: dict[str, Any], kind: str | None) -> None:
        msgs = body.get("messages")
        if kind == "chat" or (kind is None and msgs is not None):
            if not isinstance(msgs, list) or not msgs:
                raise RequestError("'messages' is required and must be a non-empty list", "messages")
            system, user, every = [], [], []
            last_user = ""
            for i, m in enumerate(msgs):
                if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                    raise RequestError(f"messages[{i}] must be an object with a string 'role'", "messages")
                text = _content_text(m.get("content"), f"messages[{i}].content")
                role = m["role"]
                if role in ("system", "developer"):
                    system.append(text)
                elif role == "user":
                    user.append(text)
                    last_user = text
                every.append(text)
            self.system, self.user, self.last_user = "\n".join(system), "\n".join(user), last_user
            self.messages = self.prompt = "\n".join(every)
            return
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
            prompt = "\n".join(prompt)
        elif (isinstance(prompt, list) and prompt
              and all(isinstance(p, int) and not isinstance(p, bool) for p in prompt)):
            prompt = ""  # token ids: no text to read; only the numeric signals apply
        if not isinstance(prompt, str):
            raise RequestError("'prompt' is required: a string, a list of strings or a list of token ids"
                               if kind == "completion" or msgs is None else
                               "'messages' must be a non-empty list", "prompt" if kind == "completion" else "messages")
        self.system, self.user = "", prompt
        self.last_user = self.messages = self.prompt = prompt

    def text(self, scope: str) -> str:
        text: str = getattr(self, scope)
        return text

    def hits(self, scope: str) -> frozenset[str]:
        """Policy keywords present in this scope's text as whole words (computed once per scope)."""
        h = self._hits.get(scope)
        if h is None:
            h = self._hits[scope] = self._index.scan(scope, getattr(self, scope)) if self._index else frozenset()
        return h

    @property
    def entropy(self) -> float:
        if self._entropy is None:
            self._entropy = sample_entropy(entropy_sample(self.prompt))
        return self._entropy

    def entropy_within(self, lo: float, hi: float) -> bool:
        """lo <= entropy <= hi, without computing it when a short prompt cannot reach `lo`: entropy is at most
        log2 of the number of distinct byte values (numpy's fixed cost was most of a short prompt's decision)."""
        if self._entropy is None and lo > 0:
            data = entropy_sample(self.prompt)
            if len(data) <= BOUND_SAMPLE and math.log2(len(set(data)) or 1) < lo - 1e-9:
                return False
            self._entropy = sample_entropy(data)
        return lo <= self.entropy <= hi


ENTROPY_SAMPLE = 1024
# c * log2(c) for every count a sample can hold: entropy becomes one bincount and one table lookup.
_C_LOG_C = np.array([0.0] + [c * math.log2(c) for c in range(1, ENTROPY_SAMPLE + 1)])


BOUND_SAMPLE = 256  # up to this many bytes, counting distinct values first is cheaper than numpy's fixed cost


def byte_entropy(text: str) -> float:
    """Shannon entropy of the text's UTF-8 bytes, in bits per byte (policy.condition.ENTROPY_UNIT; prose ~4.2,
    code/math/JSON ~4.6-5.2, at most log2(243) = 7.92: UTF-8 never uses 13 of the 256 byte values).
    Long prompts are estimated from their first and last 512 bytes: the figure converges long before
    32 KB and the classifier must stay in microseconds."""
    return sample_entropy(entropy_sample(text))


def entropy_sample(text: str) -> bytes:
    """The bytes `byte_entropy` measures: all of them, or the first and last 512 of a long prompt."""
    half = ENTROPY_SAMPLE // 2
    if len(text) > ENTROPY_SAMPLE:  # slice characters first: encoding 32 KB to keep 1 KB is wasted work
        return text[:half].encode("utf-8")[:half] + text[-half:].encode("utf-8")[-half:]
    data = text.encode("utf-8")
    return data[:half] + data[-half:] if len(data) > ENTROPY_SAMPLE else data


def sample_entropy(data: bytes) -> float:
    n = len(data)
    if not n:
        return 0.0
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256)
    return max(0.0, math.log2(n) - float(_C_LOG_C[counts].sum()) / n)


def _number(body: dict[str, Any], key: str, lo: float, hi: float) -> float | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise RequestError(f"'{key}' must be a number", key)
    if v < lo or v > hi:
        raise RequestError(f"'{key}' must be between {lo} and {hi}, got {v}", key)
    return float(v)


def _header_number(headers: Mapping[str, str], name: str, lo: float, hi: float | None) -> float | None:
    raw = headers.get(name)
    if raw is None or raw == "":
        return None
    try:
        v = float(raw)
    except ValueError:
        raise RequestError(f"header {name} must be a number, got {raw!r}", name) from None
    if v < lo or (hi is not None and v > hi):
        bound = f"between {lo:g} and {hi:g}" if hi is not None else f">= {lo:g}"
        raise RequestError(f"header {name} must be {bound}, got {raw!r}", name)
    return v


# ---- compiling a policy -----------------------------------------------------------------------------------

Pred = Callable[[RequestView, int], bool]  # (view, output estimate) -> matched


def _bounds(rng: Any) -> tuple[float, float]:
    """A Range as two floats, so a predicate is one chained comparison (no model attribute lookups)."""
    return (-math.inf if rng.min is None else rng.min), (math.inf if rng.max is None else rng.max)


def _compile(cond: Any, index: KeywordIndex) -> Pred:
    if isinstance(cond, AllCond):
        return _all([_compile(c, index) for c in cond.all])
    if isinstance(cond, AnyCond):
        return _any([_compile(c, index) for c in cond.any])
    if isinstance(cond, NotCond):
        sub = _compile(cond.not_, index)
        return lambda v, o: not sub(v, o)
    if isinstance(cond, TemperatureCond):
        (lo, hi), default = _bounds(cond.temperature), cond.default
        return lambda v, o: lo <= (default if v.temperature is None else v.temperature) <= hi
    if isinstance(cond, KeywordsCond):
        return _compile_keywords(cond, index)
    if isinstance(cond, OutputTokensCond):
        lo, hi = _bounds(cond.output_tokens)
        return lambda v, o: lo <= o <= hi
    if isinstance(cond, PriorityCond):
        lo, hi = _bounds(cond.priority)
        return lambda v, o: v.priority is not None and lo <= v.priority <= hi
    if isinstance(cond, LatencyBudgetCond):
        lo, hi = _bounds(cond.latency_budget_ms)
        return lambda v, o: v.latency_budget_ms is not None and lo <= v.latency_budget_ms <= hi
    if isinstance(cond, EntropyCond):
        lo, hi = _bounds(cond.entropy)
        return lambda v, o: v.entropy_within(lo, hi)
    if isinstance(cond, ToolsCond):
        want = cond.tools
        return lambda v, o: bool(v.body.get("tools") or v.body.get("functions")) == want
    if isinstance(cond, ResponseFormatCond):
        kinds = set(cond.response_format)
        return lambda v, o: _response_format(v.body) in kinds
    if isinstance(cond, PromptCharsCond):
        (lo, hi), scope = _bounds(cond.prompt_chars), cond.scope
        return lambda v, o: lo <= len(v.text(scope)) <= hi
    if isinstance(cond, StreamCond):
        want = cond.stream
        return lambda v, o: bool(v.body.get("stream")) == want
    raise TypeError(f"unknown condition {type(cond).__name__}")  # unreachable: the schema forbids it


# Plain loops: a generator expression inside all()/any() allocated a generator per rule and request (the
# classifier was a third of the router's request path).
def _all(subs: list[Pred]) -> Pred:
    def pred(v: RequestView, o: int) -> bool:
        for sub in subs:
            if not sub(v, o):
                return False
        return True
    return pred


def _any(subs: list[Pred]) -> Pred:
    def pred(v: RequestView, o: int) -> bool:
        for sub in subs:
            if sub(v, o):
                return True
        return False
    return pred


def _compile_keywords(cond: KeywordsCond, index: KeywordIndex) -> Pred:
    kw = cond.keywords
    words = frozenset(index.add(kw.scope, w) for w in kw.any if w)
    rx = keyword_regex(kw.regex)
    scope, need = kw.scope, kw.min_matches

    def matches(v: RequestView, o: int) -> bool:
        found = len(words & v.hits(scope)) if words else 0
        if found >= need or rx is None:
            return found >= need
        if need == 1:
            return rx.search(v.text(scope)) is not None
        return found + len({m.group(0).lower() for m in rx.finditer(v.text(scope))}) >= need

    return matches


def _boundary_table() -> bytes:
    table = bytearray(range(256))
    for i in range(128):
        if not chr(i).isalnum():
            table[i] = 0x20  # ASCII punctuation and whitespace -> space; UTF-8 bytes (>= 0x80) stay as they are
    return bytes(table)


_BOUNDARY = _boundary_table()


def normalize(text: str) -> str:
    """Lower-case, ASCII punctuation to spaces, padded with a space on each side: a whole word `w` then
    occurs exactly as " w " (a C-speed byte translation, not a regex)."""
    return " " + text.lower().encode("utf-8").translate(_BOUNDARY).decode("utf-8") + " "


class KeywordIndex:
    """One Aho-Corasick automaton per scope over every keyword of every rule: a request's text is scanned
    once per scope, however many rules and keywords the policy has. Keywords are stored as " word " over the
    normalized text, so only whole-word hits come back (no per-hit boundary checks); keywords in scripts
    written without spaces (Chinese, Japanese) match anywhere."""

    def __init__(self) -> None:
        self._keys: dict[str, dict[str, str]] = {}  # scope -> automaton key -> keyword
        self._automata: dict[str, ahocorasick.Automaton] = {}

    def add(self, scope: str, word: str) -> str:
        w = word.lower()
        core = normalize(w).strip()
        spaced = not core or core[0].isascii() or core[-1].isascii()
        key = f" {' '.join(core.split())} " if spaced else core
        self._keys.setdefault(scope, {})[key] = w
        return w

    def build(self) -> None:
        for scope, keys in self._keys.items():
            a = ahocorasick.Automaton()
            for key, word in keys.items():
                a.add_word(key, word)
            a.make_automaton()
            self._automata[scope] = a

    def scan(self, scope: str, text: str) -> frozenset[str]:
        a = self._automata.get(scope)
        if a is None or not text:
            return frozenset()
        return frozenset(word for _end, word in a.iter(normalize(text)))


def _response_format(body: dict[str, Any]) -> str | None:
    rf = body.get("response_format")
    if isinstance(rf, dict):
        return rf.get("type")
    return None


_WORDS = re.compile(r"(\d[\d,]{1,6})[\s-]*(?:words?|palabras|mots|wörter)\b", re.IGNORECASE)


class CompiledPolicy:
    """A policy turned into predicates; built once per policy version."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.keywords = KeywordIndex()
        self.rules = [(r.name, r.weight, _compile(r.when, self.keywords)) for r in policy.rules if r.enabled]
        self._fired = [(FiredRule(name, weight), pred) for name, weight, pred in self.rules]  # shared: immutable
        self.keywords.build()
        # score -> tier from tables built once (Policy.minimum_tier would build them per request)
        self._score_tiers, self._floor = policy.score_tiers(), policy.cheapest_tier()
        self._allow_lower = policy.headers.allow_lower
        est = policy.output_estimate
        self._long_rx = (re.compile("|".join(re.escape(w) for w in est.long_keywords), re.IGNORECASE)
                         if est.long_keywords else None)

    def estimate_output(self, view: RequestView) -> int:
        if view.max_tokens is not None:
            return view.max_tokens
        est = self.policy.output_estimate
        m = _WORDS.search(view.last_user)
        if m:
            return int(int(m.group(1).replace(",", "")) * est.tokens_per_word)
        if self._long_rx is not None and self._long_rx.search(view.last_user):
            return est.long_tokens
        return est.default_tokens

    def classify(self, body: Any, headers: Mapping[str, str], kind: str | None = None) -> Decision:
        view = RequestView(body, headers, self.policy, kind, self.keywords)
        out = self.estimate_output(view)
        fired = []
        score = 0.0
        for rule, pred in self._fired:
            if pred(view, out):
                fired.append(rule)
                score += rule.weight
        tier = tier_for_score(self._score_tiers, self._floor, score)
        ht = view.header_tier
        if ht is not None and (ht.rank < tier.rank or self._allow_lower):
            tier = ht  # headers may raise the minimum tier; lowering needs the policy's consent
        return Decision(score, tier, tuple(fired), out, ht)


def compile_policy(policy: Policy) -> CompiledPolicy:
    return CompiledPolicy(policy)


def classify(policy: Policy | CompiledPolicy, body: Any, headers: Mapping[str, str] | None = None,
             kind: str | None = None) -> Decision:
    """Classify one request. Pass a CompiledPolicy on hot paths; a Policy is compiled on each call."""
    compiled = policy if isinstance(policy, CompiledPolicy) else CompiledPolicy(policy)
    return compiled.classify(body, headers or {}, kind)
