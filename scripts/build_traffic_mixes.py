"""Assemble the traffic mixes in data/traffic/ (format: data/traffic/README.md).

Sources, all hand-written: the labelled requests (data/requests/labelled.jsonl, class from their label), the
chat / neutral / sensitive one-liners and long documents in scripts/traffic_parts.py and traffic_documents.py,
and the multi-turn sessions there. This script only chooses sampling parameters, mixes, and enforces the fleet's limits
(max_tokens <= 1500, prompt <= 4000 chars). Seeded, so the output is reproducible.

    python scripts/build_traffic_mixes.py
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from pathlib import Path

# Modules next to this script (run as a script, its folder is on sys.path).
import traffic_documents as documents
import traffic_parts as parts
import traffic_sessions as session_parts

ROOT = Path(__file__).resolve().parent.parent
MODEL = "llama3-8b"
CLASS_OF_TIER = {"fp16": "sensitive", "fp8": "sensitive", "int8": "neutral", "int4": "tolerant"}
MAX_TOKENS_CAP, MAX_PROMPT_CHARS = 1500, 4000

# Most requests ask for little; a few ask for a lot (weights are relative).
SHORT = [(32, 6), (48, 6), (64, 12), (96, 10), (128, 16), (160, 8), (200, 10), (256, 12), (300, 5), (400, 6),
         (512, 6)]
MEDIUM = [(128, 6), (200, 6), (256, 10), (384, 8), (512, 10), (600, 4), (768, 4)]
LONGER = [(256, 6), (384, 6), (512, 10), (768, 6), (1024, 5), (1200, 2), (1500, 2)]


def prompt_chars(body: dict) -> int:
    if "prompt" in body:
        p = body["prompt"]
        return sum(map(len, p)) if isinstance(p, list) else len(p)
    total = 0
    for m in body["messages"]:
        c = m.get("content") or ""
        total += len(c) if isinstance(c, str) else sum(len(part.get("text", "")) for part in c)
    return total


def weighted(rng: random.Random, table: list[tuple[int, int]]) -> int:
    values, weights = zip(*table)
    return rng.choices(values, weights=weights)[0]


def fit_max_tokens(rng: random.Random, body: dict, cls: str) -> None:
    """Every template carries max_tokens in [32, 1500]: the load tester sizes its work from it."""
    mt = body.get("max_tokens")
    if mt is None:
        mt = weighted(rng, {"tolerant": SHORT, "neutral": MEDIUM, "sensitive": LONGER}[cls])
    body["max_tokens"] = max(32, min(MAX_TOKENS_CAP, mt))


def line(body: dict, cls: str, headers: dict | None = None, session: str | None = None, turn: int = 1) -> dict:
    return {"session": session, "turn": turn, "class": cls, "body": body, "headers": dict(headers or {})}


def labelled_lines(rng: random.Random) -> list[tuple[str, dict]]:
    """Labelled requests as (id, single-turn template). Tolerant requests whose max_tokens is an SDK ceiling
    over 1500 are left out: clamping would hide the edge case they exist for."""
    out = []
    for raw in (ROOT / "data" / "requests" / "labelled.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(raw)
        cls = CLASS_OF_TIER[row["expected_tier"]]
        body = copy.deepcopy(row["body"])
        if body.get("max_tokens", 0) > MAX_TOKENS_CAP and cls != "sensitive":
            continue
        fit_max_tokens(rng, body, cls)
        out.append((row["id"], line(body, cls, row.get("headers"))))
    return out


def pool_lines(rng: random.Random, variant: int) -> dict[str, list[dict]]:
    """One-liners from traffic_parts, dressed with a product system prompt and sampling parameters.
    `variant` shifts the choices so two files built from the same pool do not repeat each other's lines."""
    r = random.Random(f"{rng.random()}-{variant}")
    out: dict[str, list[dict]] = {"tolerant": [], "neutral": [], "sensitive": []}
    for text in parts.CHAT_LINES:
        body = {"model": MODEL, "messages": [{"role": "system", "content": r.choice(parts.CHAT_SYSTEMS)},
                                             {"role": "user", "content": text}],
                "temperature": r.choice([0.7, 0.8, 0.9, 1.0, 1.0, 1.1, 1.2])}
        fit_max_tokens(r, body, "tolerant")
        out["tolerant"].append(line(body, "tolerant"))
    for text in parts.CREATIVE_LINES:
        body = {"model": MODEL, "messages": [{"role": "user", "content": text}],
                "temperature": r.choice([0.8, 0.9, 1.0, 1.1])}
        if r.random() < 0.5:
            body["messages"].insert(0, {"role": "system", "content": r.choice(parts.CREATIVE_SYSTEMS)})
        fit_max_tokens(r, body, "tolerant")
        out["tolerant"].append(line(body, "tolerant"))
    for sys_prompt, text in parts.NEUTRAL_LINES:
        body = {"model": MODEL, "messages": [{"role": "system", "content": sys_prompt},
                                             {"role": "user", "content": text}]}
        if r.random() < 0.5:
            body["temperature"] = r.choice([0.3, 0.5, 0.7])
        fit_max_tokens(r, body, "neutral")
        out["neutral"].append(line(body, "neutral"))
    for sys_prompt, text, temperature in parts.SENSITIVE_LINES:
        body = {"model": MODEL, "messages": [{"role": "system", "content": sys_prompt},
                                             {"role": "user", "content": text}], "temperature": temperature}
        fit_max_tokens(r, body, "sensitive")
        out["sensitive"].append(line(body, "sensitive"))
    return out


def document_lines(rng: random.Random) -> list[dict]:
    """Tasks over the long documents: the mixes' prompts of 1,000-3,000 characters."""
    out = []
    for sys_prompt, template, doc_name, cls, params in documents.DOCUMENT_TASKS:
        body = {"model": MODEL, "messages": [{"role": "system", "content": sys_prompt}, {
            "role": "user", "content": template.format(doc=documents.DOCUMENTS[doc_name])}], **params}
        fit_max_tokens(rng, body, cls)
        out.append(line(body, cls))
    return out


def session_lines(rng: random.Random, session: dict, sid: str) -> list[dict]:
    """Turn k carries the system prompt, every earlier user/assistant pair, and the k-th user message."""
    history = [{"role": "system", "content": session["system"]}] if session.get("system") else []
    out = []
    for k, turn in enumerate(session["turns"], start=1):
        body = {"model": MODEL, "messages": history + [{"role": "user", "content": turn["user"]}],
                **session.get("params", {}), **turn.get("params", {})}
        fit_max_tokens(rng, body, turn["class"])
        out.append(line(body, turn["class"], session.get("headers"), session=sid, turn=k))
        history = body["messages"] + [{"role": "assistant", "content": turn.get("assistant", "")}]
    return out


def add_stream(rng: random.Random, lines: list[dict], share: float) -> None:
    for ln in lines:
        if "messages" in ln["body"] and rng.random() < share:
            ln["body"]["stream"] = True


def interleave(rng: random.Random, singles: list[dict], sessions: list[list[dict]]) -> list[dict]:
    """Shuffle the singles and thread each session through them: turn k+1 follows turn k after 2-12 other
    lines, as a user's next message follows other users' traffic, so a file read in order replays sessions."""
    singles = rng.sample(singles, len(singles))
    keyed = [(float(i), 0, ln) for i, ln in enumerate(singles)]
    for n, run in enumerate(sessions, start=1):
        span = 7 * len(run)  # expected length of the run, to keep its start inside the file
        pos = rng.uniform(0, max(1.0, len(singles) - span))
        for ln in run:
            keyed.append((pos + 0.5, n, ln))
            pos += rng.randint(2, 12)
    return [ln for _, _, ln in sorted(keyed, key=lambda k: (k[0], k[1]))]


def take(rng: random.Random, pool: list[dict], n: int, *, max_chars: int, min_chars: int = 0) -> list[dict]:
    fitting = [ln for ln in pool if min_chars <= prompt_chars(ln["body"]) <= max_chars]
    if len(fitting) < n:
        raise SystemExit(f"pool too small: need {n}, have {len(fitting)}")
    return rng.sample(fitting, n)


def build_file(rng: random.Random, *, size: int, shares: dict[str, float], sessions: list[dict],
               fixed: list[dict], variant: int, max_chars: int, min_chars: int = 0) -> list[dict]:
    """`size` lines with the given class shares: every session turn and every `fixed` line, topped up per
    class with labelled requests and pool one-liners."""
    session_runs = [session_lines(rng, s, f"s-{i + 1:04d}") for i, s in enumerate(sessions)]
    have = Counter(ln["class"] for ln in fixed) + Counter(ln["class"] for run in session_runs for ln in run)
    labelled = [ln for _, ln in labelled_lines(rng)]
    pool = pool_lines(rng, variant)
    singles = list(fixed)
    for cls, share in shares.items():
        candidates = [ln for ln in labelled if ln["class"] == cls] + pool[cls]
        singles += take(rng, candidates, max(0, round(size * share) - have[cls]), max_chars=max_chars,
                        min_chars=min_chars)
    return interleave(rng, singles, session_runs)


def build_mixed(rng: random.Random) -> list[dict]:
    out = build_file(rng, size=300, shares={"tolerant": 0.60, "neutral": 0.15, "sensitive": 0.25},
                     sessions=session_parts.SESSIONS, fixed=document_lines(rng), variant=1, max_chars=3000,
                     min_chars=50)
    add_stream(rng, out, 0.3)
    return out


def build_sensitive_heavy(rng: random.Random) -> list[dict]:
    # Pivot sessions with a single tolerant opener: enough to exercise pinning without diluting the mix.
    chosen = [s for s in session_parts.SESSIONS if s["tag"] == "sensitive"
              or (s["tag"] == "pivot" and sum(t["class"] == "tolerant" for t in s["turns"]) == 1)]
    fixed = [ln for ln in document_lines(rng) if ln["class"] == "sensitive"]
    out = build_file(rng, size=100, shares={"tolerant": 0.10, "neutral": 0.10, "sensitive": 0.80},
                     sessions=chosen, fixed=fixed, variant=2, max_chars=MAX_PROMPT_CHARS)
    add_stream(rng, out, 0.3)
    return out


def build_chat_only(rng: random.Random) -> list[dict]:
    chosen = [s for s in session_parts.SESSIONS if s.get("tag") == "tolerant"]
    sessions = [session_lines(rng, s, f"s-{i + 1:04d}") for i, s in enumerate(chosen)]
    n_sessions = sum(map(len, sessions))
    pool = pool_lines(rng, variant=3)["tolerant"]
    chat_kinds = ("chat-", "creative-", "roleplay-", "brainstorm-", "fast-")
    labelled = [ln for rid, ln in labelled_lines(rng) if rid.startswith(chat_kinds)]
    candidates = [ln for ln in labelled + pool if ln["class"] == "tolerant" and "messages" in ln["body"]]
    singles = take(rng, candidates, 100 - n_sessions, max_chars=MAX_PROMPT_CHARS)
    out = interleave(rng, singles, sessions)
    add_stream(rng, out, 0.5)
    return out


def write(name: str, lines: list[dict]) -> None:
    dumped = [json.dumps(ln, ensure_ascii=False) for ln in lines]
    if len(set(dumped)) != len(dumped):
        raise SystemExit(f"{name}: duplicate lines")
    path = ROOT / "data" / "traffic" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(dumped) + "\n", encoding="utf-8")
    counts = Counter(ln["class"] for ln in lines)
    n_sessions = len({ln["session"] for ln in lines if ln["session"]})
    chars = sorted(prompt_chars(ln["body"]) for ln in lines)
    print(f"{name}: {len(lines)} lines, {n_sessions} sessions, "
          + ", ".join(f"{c} {counts[c]} ({counts[c] / len(lines):.0%})" for c in ("tolerant", "neutral", "sensitive"))
          + f"; prompt chars {chars[0]}..{chars[-1]} (median {chars[len(chars) // 2]})")


def main() -> None:
    write("mixed.jsonl", build_mixed(random.Random(1)))
    write("sensitive-heavy.jsonl", build_sensitive_heavy(random.Random(2)))
    write("chat-only.jsonl", build_chat_only(random.Random(3)))


if __name__ == "__main__":
    main()
