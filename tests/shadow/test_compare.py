"""The comparison of one shadow pair and the reading of response bodies (pure)."""

from __future__ import annotations

import json

import pytest

from quantroute.shadow.compare import common_prefix, compare
from quantroute.shadow.response import read_answer


def test_identical_answers_agree_exactly():
    c = compare("The capital of Peru is Lima.", "The capital of Peru is Lima.")
    assert c.exact and c.normalized and c.agree
    assert c.diverge_char is None and c.diverge_token is None and c.length_ratio == 1.0


def test_normalized_match_ignores_case_punctuation_and_spacing():
    c = compare("Lima, Peru.", "lima   peru")
    assert not c.exact and c.normalized and c.agree
    assert c.diverge_char == 0


def test_first_divergence_in_characters_and_estimated_tokens():
    served, shadow = "alpha beta gamma delta", "alpha beta GAMMA delta!"
    c = compare(served, shadow, completion_tokens=4)
    assert c.diverge_char == len("alpha beta ")
    assert c.diverge_token == round(11 / len(served) * 4) and not c.token_exact
    assert c.length_ratio == pytest.approx(len(shadow) / len(served))


def test_token_divergence_from_the_servers_tokens_when_present():
    c = compare("ab cd ef", "ab cd xy", served_tokens=["ab", " cd", " ef"], shadow_tokens=["ab", " cd", " xy"])
    assert c.diverge_token == 2 and c.token_exact and not c.agree


def test_json_structural_equality_ignores_key_order_and_spacing():
    a = json.dumps({"name": "Grace", "age": 41})
    b = '```json\n{"age": 41,   "name": "Grace"}\n```'
    c = compare(a, b)
    assert c.json_like and c.json_valid_served and c.json_valid_shadow and c.json_equal and c.agree
    assert not c.normalized  # the texts differ; the structure does not


def test_json_broken_or_different_disagrees():
    broken = compare('{"a": [1, 2]}', '{"a": [1, 2')
    assert broken.json_valid_served and broken.json_valid_shadow is False and broken.json_equal is False
    assert not broken.agree
    other = compare('{"a": 1}', '{"a": 2}')
    assert other.json_equal is False and not other.agree


def test_math_final_answer_agreement():
    same = compare("7 apples plus 5 apples.\nAnswer: 12", "Seven and five make\nAnswer: 12.0")
    assert same.math_like and same.numeric_agree and same.agree and not same.normalized
    diff = compare("so the total is\nAnswer: 12", "so the total is\nAnswer: 13")
    assert diff.math_like and diff.numeric_agree is False and not diff.agree
    assert (diff.number_served, diff.number_shadow) == (12, 13)


def test_prose_is_not_math_like():
    c = compare("Lima is lovely in spring.", "Lima is lovely in summer.")
    assert not c.math_like and c.numeric_agree is None and not c.agree


def test_common_prefix():
    assert common_prefix("abc", "abd") == 2 and common_prefix("ab", "abc") == 2 and common_prefix([], [1]) == 0


def test_read_answer_from_a_whole_chat_response():
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "12"}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 9, "completion_tokens": 2}}).encode()
    a = read_answer(body)
    assert a.ok and a.text == "12" and a.completion_tokens == 2 and a.finish_reason == "stop" and a.tokens is None


def test_read_answer_from_a_stream_with_logprobs_and_usage():
    chunks = [{"choices": [{"delta": {"role": "assistant"}}]},
              {"choices": [{"delta": {"content": "Li"}, "logprobs": {"content": [{"token": "Li", "logprob": 0}]}}]},
              {"choices": [{"delta": {"content": "ma"}, "logprobs": {"content": [{"token": "ma", "logprob": 0}]},
                            "finish_reason": "stop"}]},
              {"choices": [], "usage": {"completion_tokens": 2}}]
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    a = read_answer(body)
    assert a.ok and a.text == "Lima" and a.tokens == ("Li", "ma") and a.completion_tokens == 2


def test_read_answer_from_a_completion_and_bad_bodies():
    assert read_answer(json.dumps({"choices": [{"text": " 42"}]}).encode()).text == " 42"
    assert not read_answer(b"not json").ok
    assert not read_answer(json.dumps({"error": {"message": "x"}}).encode()).ok
    broken = b'data: {"choices": [{"delta": {"content": "a"}}]}\n\ndata: {"error": {"message": "cut"}}\n\n'
    assert not read_answer(broken).ok  # a stream that ended in an error event is no answer
