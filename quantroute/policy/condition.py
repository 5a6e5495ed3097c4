"""Policy conditions: the `when` of a rule (temperature, keywords, output length, priority, latency budget,
entropy, tools, response format, prompt length, stream, and all/any/not of them), and the strict base every
policy model shares. `policy.model` builds rules and policies from these."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from quantroute.policy.patterns import keyword_regex


class Strict(BaseModel):
    # Unknown keys are mistakes in a hand-edited policy (a typo silently ignored is a routing bug).
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- conditions -------------------------------------------------------------------------------------------

class Range(Strict):
    """Inclusive bounds; either may be omitted."""

    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.min is None and self.max is None:
            raise ValueError("give at least one of min or max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    def contains(self, x: float) -> bool:
        return (self.min is None or x >= self.min) and (self.max is None or x <= self.max)


def _bounded(r: Range, lo: float, hi: float, meaning: str) -> Range:
    """A bound outside what the signal can take makes a rule that silently never (or always) fires."""
    for side in ("min", "max"):
        v = getattr(r, side)
        if v is not None and not lo <= v <= hi:
            raise ValueError(f"{side} {v:g} is outside {meaning}: valid {lo:g} to {hi:g}")
    return r


Scope = Literal["system", "user", "messages", "prompt", "last_user"]


class Keywords(Strict):
    """Words (case-insensitive, matched on word boundaries) and/or regexes searched in one part of the request.
    scope: system = system prompt(s); user = all user turns; last_user = the newest user turn;
    messages = every message; prompt = the whole prompt text (all of the above, or a completions prompt)."""

    any: list[str] = Field(default_factory=list)
    regex: list[str] = Field(default_factory=list)
    scope: Scope = "prompt"
    min_matches: int = Field(default=1, ge=1)

    @field_validator("regex")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        keyword_regex(patterns)  # what the classifier compiles; PatternError is a ValueError: pydantic reports it
        return patterns

    @model_validator(mode="after")
    def _something(self) -> Keywords:
        if not self.any and not self.regex:
            raise ValueError("give keywords in 'any' or patterns in 'regex'")
        return self


class TemperatureCond(Strict):
    temperature: Range
    # Clients that omit temperature get the server default (1.0 for OpenAI-compatible servers).
    default: float = Field(default=1.0, ge=0, le=2)

    @field_validator("temperature")
    @classmethod
    def _range(cls, r: Range) -> Range:
        return _bounded(r, 0, 2, "the OpenAI API's temperature range")


class KeywordsCond(Strict):
    keywords: Keywords


class OutputTokensCond(Strict):
    """Requested max_tokens, or when absent the policy's estimate of the output length."""

    output_tokens: Range

    @field_validator("output_tokens")
    @classmethod
    def _range(cls, r: Range) -> Range:
        return _bounded(r, 0, math.inf, "a token count")


class PriorityCond(Strict):
    priority: Range  # x-priority header, 1-10

    @field_validator("priority")
    @classmethod
    def _range(cls, r: Range) -> Range:
        return _bounded(r, 1, 10, "the x-priority header's range")


class LatencyBudgetCond(Strict):
    latency_budget_ms: Range  # x-latency-budget-ms header

    @field_validator("latency_budget_ms")
    @classmethod
    def _range(cls, r: Range) -> Range:
        return _bounded(r, 0, math.inf, "a latency budget in milliseconds")


# Prompt entropy is the Shannon entropy of the prompt's UTF-8 bytes (`classify.byte_entropy`), in bits per byte.
# UTF-8 text uses 243 of the 256 byte values, so no prompt exceeds log2(243) = 7.92 bits per byte; the valid range
# stops at 7.9, which a dense enough prompt reaches: every rule that validates can fire.
ENTROPY_UNIT = "bits per UTF-8 byte"
ENTROPY_MAX = 7.9


class EntropyCond(Strict):
    entropy: Range = Field(description=f"Shannon entropy of the prompt, in {ENTROPY_UNIT} (0 to {ENTROPY_MAX:g}; "
                                       "prose ~4.2, code, math and JSON ~4.6-5.2)")

    @field_validator("entropy")
    @classmethod
    def _range(cls, r: Range) -> Range:
        return _bounded(r, 0, ENTROPY_MAX, ENTROPY_UNIT)


class ToolsCond(Strict):
    tools: bool  # request carries tools / functions


class ResponseFormatCond(Strict):
    response_format: list[Literal["json_schema", "json_object", "text"]] = Field(min_length=1)


class PromptCharsCond(Strict):
    """Length of the prompt text in characters (short greetings vs long documents)."""

    prompt_chars: Range
    scope: Scope = "prompt"

    @field_validator("prompt_chars")
    @classmethod
    def _range(cls, r: Range) -> Range:
        return _bounded(r, 0, math.inf, "a character count")


class StreamCond(Strict):
    stream: bool


class AllCond(Strict):
    all: list[Condition] = Field(min_length=1)


class AnyCond(Strict):
    any: list[Condition] = Field(min_length=1)


class NotCond(Strict):
    not_: Condition = Field(alias="not")
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


CONDITION_KINDS: dict[str, type[Strict]] = {
    "all": AllCond, "any": AnyCond, "not": NotCond, "temperature": TemperatureCond, "keywords": KeywordsCond,
    "output_tokens": OutputTokensCond, "priority": PriorityCond, "latency_budget_ms": LatencyBudgetCond,
    "entropy": EntropyCond, "tools": ToolsCond, "response_format": ResponseFormatCond, "stream": StreamCond,
    "prompt_chars": PromptCharsCond,
}


def _condition_kind(value: object) -> str | None:
    # The key present names the kind, so a bad condition gets errors for its own kind only,
    # not one error per alternative of the union.
    if isinstance(value, dict):
        kinds = [k for k in value if k in CONDITION_KINDS]
        return kinds[0] if len(kinds) == 1 else None
    if isinstance(value, BaseModel):
        return next(k for k, cls in CONDITION_KINDS.items() if isinstance(value, cls))
    return None


if TYPE_CHECKING:  # the union below, spelled out for the type checker
    Condition = (AllCond | AnyCond | NotCond | TemperatureCond | KeywordsCond | OutputTokensCond | PriorityCond
                 | LatencyBudgetCond | EntropyCond | ToolsCond | ResponseFormatCond | StreamCond | PromptCharsCond)
else:
    Condition = Annotated[
        # A union built at runtime from the table of kinds, each tagged for the discriminator (`X | Y` cannot
        # spell a union of a computed tuple).
        Union[tuple(Annotated[cls, Tag(k)] for k, cls in CONDITION_KINDS.items())],  # noqa: UP007 - see above
        Discriminator(_condition_kind, custom_error_type="condition",
                      custom_error_message="a condition needs exactly one of: " + ", ".join(CONDITION_KINDS)),
    ]
for _m in (AllCond, AnyCond, NotCond):
    _m.model_rebuild()
