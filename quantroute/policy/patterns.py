"""The one compile path for a keyword condition's regexes, used by policy validation and the classifier alike.

The classifier searches a condition's patterns as one alternation (one scan of the text, not one per pattern).
Patterns that compile one by one may not compile joined: a global inline flag such as `(?i)` is only allowed at
the very start of an expression, and a group name may appear once. Validating each pattern alone let such a
policy be saved and activated, then fail in the router at load time; compiling exactly what the classifier
uses, here, makes "it validates" mean "it loads"."""

from __future__ import annotations

import re


class PatternError(ValueError):
    """Says which pattern is wrong, or that the patterns only fail together, and what would be valid."""


def keyword_regex(patterns: list[str]) -> re.Pattern[str] | None:
    """The case-insensitive alternation of `patterns` the classifier matches, or None for no patterns."""
    if not patterns:
        return None
    for i, p in enumerate(patterns):
        try:
            re.compile(p)
        except re.error as e:
            raise PatternError(f"regex[{i}] {p!r} does not compile: {e}") from None
    try:
        return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)
    except re.error as e:
        raise PatternError(
            f"the patterns compile one by one but not together ({e}); they are matched as one alternation, so a "
            "global flag like (?i) must be written scoped, as (?i:...), and each group name may appear once"
        ) from None
