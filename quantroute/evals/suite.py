"""An eval suite: JSONL, one `EvalItem` per line. Loading validates every line and reports every bad line at
once (line number and field); a suite with any bad line is never run. The suite hash pins what was asked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# Short, stable names: reports, thresholds (`--category-threshold math=0.03`) and the simulator key on them.
Category = Literal["math", "code", "json", "structured", "multilingual", "long_context", "chat", "safety"]
CATEGORIES: tuple[str, ...] = get_args(Category)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExactGrader(_Spec):
    """The answer, stripped of surrounding whitespace, equals one of `expected`."""
    type: Literal["exact"] = "exact"
    expected: list[str] = Field(min_length=1)

    @field_validator("expected", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


class NormalizedGrader(ExactGrader):
    """Like exact, after case folding, dropping punctuation/quotes/code fences and collapsing whitespace."""
    type: Literal["normalized"] = "normalized"  # type: ignore[assignment]  # narrows the base grader's type tag to this grader's


class NumericGrader(_Spec):
    """The last number in the answer is within `tolerance` (absolute) of `expected`."""
    type: Literal["numeric"] = "numeric"
    expected: float
    tolerance: float = Field(default=1e-6, ge=0)


class RegexGrader(_Spec):
    """`pattern` is found in the answer (`fullmatch` for the whole stripped answer). Flags: i, m, s."""
    type: Literal["regex"] = "regex"
    pattern: str
    flags: str = Field(default="", pattern=r"^[ims]*$")
    fullmatch: bool = False


class ContainsGrader(_Spec):
    """Every `all_of`, at least one `any_of` (when given) and none of `none_of` appear in the answer."""
    type: Literal["contains"] = "contains"
    all_of: list[str] = Field(default_factory=list)
    any_of: list[str] = Field(default_factory=list)
    none_of: list[str] = Field(default_factory=list)
    case_sensitive: bool = False

    @model_validator(mode="after")
    def _something_to_check(self) -> ContainsGrader:
        if not (self.all_of or self.any_of or self.none_of):
            raise ValueError("give at least one of all_of, any_of, none_of")
        return self


class JsonValidGrader(_Spec):
    """The answer (optionally inside a ```json fence) parses as JSON; `expect` is matched as a subset."""
    type: Literal["json_valid"] = "json_valid"
    expect: dict[str, Any] | None = None


class JsonSchemaGrader(_Spec):
    """The answer parses as JSON, validates against `schema` (JSON Schema 2020-12) and contains `expect`
    as a subset (strings compared case-insensitively): a tool call can be well-formed yet call the wrong thing."""
    type: Literal["json_schema"] = "json_schema"
    schema_: dict[str, Any] = Field(alias="schema")
    expect: dict[str, Any] | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("schema_")
    @classmethod
    def _schema_is_valid(cls, v: dict[str, Any]) -> dict[str, Any]:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(v)
        except SchemaError as e:
            raise ValueError(f"not a valid JSON Schema: {e.message}") from None
        return v


class CodeGrader(_Spec):
    """The answer's code (from a ```python fence, else the whole answer) defines `entry_point`; each of
    `tests` (a Python statement, typically an assert) runs in the sandbox; all must pass."""
    type: Literal["code"] = "code"
    entry_point: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    tests: list[str] = Field(min_length=1)
    timeout_s: float = Field(default=5.0, gt=0, le=60)


GraderSpec = Annotated[
    ExactGrader | NormalizedGrader | NumericGrader | RegexGrader | ContainsGrader | JsonValidGrader
    | JsonSchemaGrader | CodeGrader,
    Field(discriminator="type"),
]

# Graders whose answers have a machine format; an answer that breaks it is "invalid" (counts for the
# retry rate, and for json/json_schema towards the JSON/tool validity the gate watches).
FORMAT_GRADERS = ("numeric", "json_valid", "json_schema", "code")
VALIDITY_GRADERS = ("json_valid", "json_schema")


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


class EvalItem(BaseModel):
    """One question, asked identically of both arms."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    category: Category
    messages: list[Message] | None = None
    prompt: str | None = None  # shorthand for one user message
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int = Field(default=256, ge=1, le=8192)
    stop: list[str] | None = None
    grader: GraderSpec
    reference: str = Field(min_length=1)  # a correct answer: must pass `grader`
    wrong: str | None = None  # a plausible wrong answer: must fail `grader`
    tags: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _messages_or_prompt(self) -> EvalItem:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("give exactly one of messages or prompt")
        if self.messages is not None and (not self.messages or self.messages[-1].role != "user"):
            raise ValueError("messages must end with a user message")
        return self

    def chat_messages(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return [m.model_dump() for m in self.messages]
        return [{"role": "user", "content": self.prompt or ""}]

    @property
    def last_user_text(self) -> str:
        """What the simulated fleet keys on to recognise an eval prompt."""
        return self.chat_messages()[-1]["content"]

    def decode_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.stop:
            params["stop"] = list(self.stop)
        return params


class SuiteIssue(BaseModel):
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}" if self.field else f"line {self.line}: {self.message}"


class SuiteError(ValueError):
    """Every problem of a suite file, each with its line number and field."""

    def __init__(self, source: str, issues: list[SuiteIssue]):
        self.source = source
        self.issues = issues
        lines = "\n".join(f"  {source}:{i.line}: " + (f"{i.field}: " if i.field else "") + i.message
                          for i in issues)
        super().__init__(f"{source}: {len(issues)} problem(s); nothing was run\n{lines}")


class Suite(BaseModel):
    name: str
    path: str
    items: list[EvalItem]
    hash: str

    def categories(self) -> list[str]:
        return [c for c in CATEGORIES if any(i.category == c for i in self.items)]


def _field_path(loc: tuple[Any, ...]) -> str:
    # Drop the discriminator tag pydantic inserts ("grader.code.tests" -> "grader.tests").
    parts = [str(p) for p in loc]
    if len(parts) >= 2 and parts[0] == "grader" and parts[1] in {
            "exact", "normalized", "numeric", "regex", "contains", "json_valid", "json_schema", "code"}:
        parts = [parts[0]] + parts[2:]
    return ".".join(parts)


def parse_suite(text: str, *, source: str = "<string>", name: str | None = None) -> Suite:
    """Validate every line; raise `SuiteError` listing all problems. Blank lines and `#` comments are skipped."""
    items: list[EvalItem] = []
    issues: list[SuiteIssue] = []
    seen_ids: dict[str, int] = {}
    seen_prompts: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            issues.append(SuiteIssue(line=lineno, field="", message=f"not valid JSON: {e.msg} at column {e.colno}"))
            continue
        try:
            item = EvalItem.model_validate(data)
        except ValidationError as e:
            for err in e.errors():
                issues.append(SuiteIssue(line=lineno, field=_field_path(err["loc"]), message=err["msg"]))
            continue
        if item.id in seen_ids:
            issues.append(SuiteIssue(line=lineno, field="id",
                                     message=f"duplicate id {item.id!r} (first on line {seen_ids[item.id]})"))
        if item.last_user_text in seen_prompts:
            issues.append(SuiteIssue(line=lineno, field="messages", message=(
                f"same last user message as line {seen_prompts[item.last_user_text]}; "
                "each item must ask something different")))
        seen_ids.setdefault(item.id, lineno)
        seen_prompts.setdefault(item.last_user_text, lineno)
        items.append(item)
    if not items and not issues:
        issues.append(SuiteIssue(line=0, field="", message="the suite has no items"))
    if issues:
        raise SuiteError(source, issues)
    return Suite(name=name or Path(source).stem, path=source, items=items, hash=suite_hash(items))


def load_suite(path: str | Path) -> Suite:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise SuiteError(str(p), [SuiteIssue(line=0, field="", message=f"cannot read: {e.strerror}")]) from None
    return parse_suite(text, source=str(p))


def suite_hash(items: list[EvalItem]) -> str:
    """sha256 over the validated items in order (formatting and key order of the file do not matter)."""
    h = hashlib.sha256()
    for item in items:
        h.update(json.dumps(item.model_dump(mode="json", by_alias=True), sort_keys=True,
                            separators=(",", ":"), ensure_ascii=False).encode())
        h.update(b"\n")
    return "sha256:" + h.hexdigest()
