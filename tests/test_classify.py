import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from quantroute.classify import RequestError, RequestView, byte_entropy, classify, compile_policy
from quantroute.policy.condition import ENTROPY_MAX, ENTROPY_UNIT
from quantroute.policy.loader import PolicyValidationError, load_policy, parse_policy
from quantroute.tiers import Tier
from tests.conftest import REPO


@pytest.fixture(scope="module")
def policy():
    return compile_policy(load_policy(REPO / "policies" / "policy-0001.yaml"))


def chat(text, system=None, **kw):
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
    return {"model": "llama3-8b", "messages": msgs, **kw}


def test_greedy_code_goes_to_fp16_and_names_the_rule(policy):
    d = policy.classify(chat("Write a Python function that parses ISO dates", temperature=0), {})
    assert d.tier == Tier.fp16 and "greedy-structured" in d.rule_names


def test_creative_high_temperature_is_tolerant(policy):
    d = policy.classify(chat("Write a short funny story about a cat on a train", temperature=1.0), {})
    assert d.tier == Tier.int4 and d.rule_names == ["creative-high-temp", "sampled-chatter"] and d.score == -5


def test_neutral_work_lands_in_the_middle(policy):
    d = policy.classify(chat("Summarize this: the meeting moved the launch to May."), {})
    assert d.tier == Tier.int8 and d.rules == ()


def test_long_output_raises_regardless_of_temperature(policy):
    d = policy.classify(chat("Tell me about whales", temperature=1.2, max_tokens=2000), {})
    assert "long-output" in d.rule_names and d.tier == Tier.fp16
    est = policy.classify(chat("Write a 2000 word essay about whales", temperature=1.2), {})
    assert est.output_estimate == 2660 and "long-output" in est.rule_names


def test_headers_raise_but_never_lower(policy):
    body = chat("Write a poem about autumn", temperature=1.0)
    assert policy.classify(body, {"x-min-tier": "fp8"}).tier == Tier.fp8
    greedy = chat("Compute the integral of x^2", temperature=0)
    assert policy.classify(greedy, {"x-min-tier": "int4"}).tier == Tier.fp16
    assert policy.classify(body, {"x-priority": "10"}).tier == Tier.fp8  # +9 priority, -5 creative chatter
    assert policy.classify(chat("Summarize the memo"), {"x-priority": "10"}).tier == Tier.fp16
    assert policy.classify(body, {"x-priority": "2"}).score == -8


def test_json_schema_and_tools_are_structured(policy):
    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    d = policy.classify(chat("Extract the invoice fields", response_format=rf, temperature=0.5), {})
    assert d.rule_names == ["structured-sampled"] and d.tier == Tier.fp8
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    greedy = policy.classify(chat("Weather in Oslo?", tools=tools, temperature=0), {})
    assert "structured-greedy" in greedy.rule_names and greedy.tier == Tier.fp16


def test_keywords_match_whole_words_only(policy):
    # "hi" inside "this"/"within" must not count as a greeting; "Hi" at the start does
    assert "casual-chat" not in policy.classify(chat("Is this within budget?"), {}).rule_names
    assert "casual-chat" in policy.classify(chat("Hi! how is it going"), {}).rule_names


def test_completions_prompt_string_list_and_token_ids(policy):
    assert policy.classify({"model": "m", "prompt": "def add(a, b):", "temperature": 0}, {},
                           "completion").tier == Tier.fp16
    assert policy.classify({"model": "m", "prompt": ["Once upon a time, a story", "x"], "temperature": 1},
                           {}).tier == Tier.int4
    assert policy.classify({"model": "m", "prompt": [1, 2, 3]}, {}, "completion").tier == Tier.int8


def test_list_of_parts_content(policy):
    body = {"model": "m", "temperature": 0, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Return JSON with keys a and b"},
                                     {"type": "image_url", "image_url": {"url": "http://x"}}]}]}
    assert "greedy-structured" in policy.classify(body, {}).rule_names


@pytest.mark.parametrize("body,param", [
    ({"model": "m"}, "messages"),
    ({"model": "m", "messages": []}, "messages"),
    ({"model": "m", "messages": [{"content": "hi"}]}, "messages"),
    ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, "temperature"),
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 3}, "temperature"),
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, "max_tokens"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
])
def test_malformed_requests_raise_typed_errors(policy, body, param):
    with pytest.raises(RequestError) as ei:
        policy.classify(body, {}, "chat")
    assert ei.value.param == param


def test_bad_headers_are_request_errors(policy):
    with pytest.raises(RequestError, match="x-priority"):
        policy.classify(chat("hi"), {"x-priority": "eleven"})
    with pytest.raises(RequestError, match="x-min-tier"):
        policy.classify(chat("hi"), {"x-min-tier": "fp4"})


def test_entropy_prose_vs_code():
    prose = "the quick brown fox jumps over the lazy dog and then it rests for a while " * 5
    code = "def f(x):\n    return {'k': [x**2 + 3*x - 7, x // 2]}  # 0x1F; A-Z=42!\n" * 5
    assert byte_entropy("") == 0.0
    assert byte_entropy(prose) < byte_entropy(code)
    assert byte_entropy("aaaa") == 0.0
    assert abs(byte_entropy("ab") - 1.0) < 1e-9


def test_classify_accepts_plain_policy(policy):
    assert classify(policy.policy, chat("hello there"), None).rule_names == ["casual-chat"]


def test_keyword_normalization_punctuation_phrases_and_cjk(policy):
    def hits(text):
        return policy.classify(chat(text, temperature=0), {}).rule_names

    assert "greedy-structured" in hits("Explain it Step-By-Step, please.")
    assert "greedy-structured" in hits("explain it step by step")
    assert "greedy-structured" in hits("(JSON) only!")
    assert "greedy-structured" not in hits("jsonify the mathematics department")  # whole words only
    zh = policy.classify(chat("给我讲一个关于猫的故事吧", temperature=1.0), {})
    assert "creative-high-temp" in zh.rule_names and zh.tier == Tier.int4


def densest_text() -> str:
    """1,024 bytes of UTF-8 (the classifier's sample) using each of the 243 byte values UTF-8 allows about equally
    often: every ASCII byte and every lead byte four times, continuation bytes spread over 0x80-0xBF."""
    used = dict.fromkeys(range(0x80, 0xC0), 0)

    def cont(lo: int = 0x80, hi: int = 0xBF) -> int:  # the least used continuation byte allowed here
        c = min(range(lo, hi + 1), key=lambda v: (used[v], v))
        used[c] += 1
        return c

    chars = [chr(c) for c in range(128)] * 4
    for _ in range(4):
        chars += [chr(((lead & 0x1F) << 6) | (cont() & 0x3F)) for lead in range(0xC2, 0xE0)]
        for lead in range(0xE0, 0xF0):  # E0 needs a first continuation >= A0; ED < A0 (no surrogates)
            c1 = cont(0xA0) if lead == 0xE0 else cont(hi=0x9F) if lead == 0xED else cont()
            chars.append(chr(((lead & 0x0F) << 12) | ((c1 & 0x3F) << 6) | (cont() & 0x3F)))
        for lead in range(0xF0, 0xF5):  # F0 needs a first continuation >= 90; F4 <= 8F (<= U+10FFFF)
            c1 = cont(0x90) if lead == 0xF0 else cont(hi=0x8F) if lead == 0xF4 else cont()
            chars.append(chr(((lead & 0x07) << 18) | ((c1 & 0x3F) << 12) | ((cont() & 0x3F) << 6) | (cont() & 0x3F)))
    return "".join(chars)


def test_an_entropy_rule_at_the_top_of_the_valid_range_can_fire():
    """The schema's entropy bound is in the classifier's unit (bits per UTF-8 byte): a rule at the top of the
    valid range fires on a dense enough prompt, and one above it is refused (it could never fire)."""
    data = yaml.safe_load((REPO / "policies" / "policy-0001.yaml").read_text())
    data["rules"] = [{"name": "densest", "weight": 10, "when": {"entropy": {"min": ENTROPY_MAX}}}]
    top = compile_policy(parse_policy(yaml.safe_dump(data), "top.yaml"))
    dense = densest_text()
    assert len(dense.encode()) == 1024 and byte_entropy(dense) >= ENTROPY_MAX
    assert top.classify(chat(dense), {}).rule_names == ["densest"]
    assert top.classify(chat("def f(x):\n    return {'k': [x**2 + 3*x - 7]}"), {}).rule_names == []
    data["rules"][0]["when"]["entropy"]["min"] = ENTROPY_MAX + 0.1
    with pytest.raises(PolicyValidationError, match=f"outside {ENTROPY_UNIT}"):
        parse_policy(yaml.safe_dump(data), "above.yaml")


DEFAULT_POLICY = load_policy(REPO / "policies" / "policy-0001.yaml")


@settings(max_examples=400, deadline=None, database=None)
@given(text=st.text(st.sampled_from(list("abcdefghijklmnopqrstuvwxyz0123456789{}[]()<>=+-*/ .,;:é中\n")), max_size=300)
       | st.text(max_size=1500), lo=st.floats(0, 8), width=st.floats(0, 8))
def test_the_entropy_bound_never_changes_a_decision(text, lo, width):
    """A short prompt with few distinct bytes skips the entropy computation; the answer stays the same."""
    view = RequestView({"model": "m", "prompt": text}, {}, DEFAULT_POLICY, "completion")
    assert view.entropy_within(lo, lo + width) == (lo <= byte_entropy(text) <= lo + width)
