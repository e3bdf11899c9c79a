# -*- coding: utf-8 -*-
"""The generation canary's judgement (module_utils/_canary.py): garbage and the expected answer."""
from __future__ import annotations

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._policy import canary


def answer(text, ids=None, finish="stop"):
    return {"text": text, "token_ids": ids, "finish_reason": finish}


def test_a_right_answer_passes():
    assert canary.judge(answer("391", [18, 24]), r"\b391\b") == []
    assert canary.judge(answer("The product is 391.\n"), r"\b391\b") == []


@pytest.mark.parametrize("text,ids,expect,problem", [
    ("", None, "", "empty answer (finish_reason stop)"),
    ("   \n", [201, 201], "", "empty answer (finish_reason stop)"),
    ("ok " * 3, [7] * 8, "", "one token repeated 8 times in a row"),
    ("aaaaaaaaaa", None, "", "one character repeated 10 times in a row"),
    ("4\ufffd2", [1, 2, 3], "", "text outside the tokenizer's ordinary range: U+FFFD (bytes that do not decode)"),
    ("4\x1a2", [1, 2, 3], "", "text outside the tokenizer's ordinary range: U+001A (Cc)"),
    ("392", [1, 2], r"\b391\b", "the expected answer /\\b391\\b/ is not in it"),
])
def test_garbage_and_wrong_answers_fail(text, ids, expect, problem):
    assert problem in canary.judge(answer(text, ids), expect)


def test_a_run_below_the_limit_and_ordinary_controls_pass():
    assert canary.judge(answer("1\n\t2\r\n", [5, 5, 5, 6]), "") == []
    assert canary.judge(answer("x", [9] * 7), "", repeat_limit=8) == []


def test_the_answer_reads_reasoning_and_content_and_token_ids():
    got = canary.answer_of({"choices": [{"message": {"reasoning": "6*7=42. ", "content": "42"},
                                         "token_ids": [1, 2], "finish_reason": "stop"}]})
    assert got == {"text": "6*7=42. 42", "content": "42", "token_ids": [1, 2], "finish_reason": "stop"}
    with pytest.raises(ValueError):
        canary.answer_of({"object": "error"})


def test_the_request_is_greedy_and_short():
    body = canary.request_body("kimi-k2.5", "What is 17 times 23?", 16, {"thinking": False})
    assert body["temperature"] == 0 and body["max_tokens"] == 16 and body["stream"] is False
    assert body["messages"] == [{"role": "user", "content": "What is 17 times 23?"}]
    assert body["chat_template_kwargs"] == {"thinking": False}
    assert "chat_template_kwargs" not in canary.request_body("m", "q", 4)


def test_shown_answers_are_quoted_and_cut():
    assert canary.shorten("a\x1ab") == "'a\\x1ab'"
    assert len(canary.shorten("x" * 500)) == canary.SHOWN
