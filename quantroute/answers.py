"""What a model's answer text says, read the same way wherever answers are judged: the body of a fenced block,
the text normalized for comparison, the final number, the JSON it carries. Pure functions, no I/O: the eval
graders (`evals.graders`) and the live shadow comparison (`shadow.compare`) share them, so "the same answer"
means the same thing on the golden suite and on live traffic."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)
_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+")


def fenced(text: str, *langs: str) -> str | None:
    """Body of the first ``` block whose language is one of `langs` (or untagged); None when there is none."""
    for m in _FENCE.finditer(text):
        if not m.group(1) or m.group(1).lower() in langs:
            return m.group(2)
    return None


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"```[A-Za-z0-9_+-]*", " ", text)
    text = "".join(" " if unicodedata.category(c).startswith("P") or c in "`'\"" else c for c in text)
    return " ".join(text.split())


def last_number(text: str) -> float | None:
    boxed = re.findall(r"\\boxed\{([^}]*)\}", text)
    found = _NUMBER.findall(boxed[-1] if boxed else text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", "").replace("−", "-"))
    except ValueError:
        return None


def parse_json(text: str) -> Any:
    """JSON from the answer: a ```json fence, else the whole answer. Raises ValueError when it is not JSON."""
    body = fenced(text, "json")
    return json.loads(body if body is not None else text.strip())
