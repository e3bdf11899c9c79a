# -*- coding: utf-8 -*-
"""The generation canary's judgement (module_utils/_canary.py): garbage and the expected answer."""
from __future__ import annotations

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._common import state_files
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


# ------------------------------------------------------------------ the last result, kept on the node

REQUEST = canary.request_body("tiny-deepseek-v3", "What is 6 times 7? Answer with the number only.", 12)
DIGEST = "5c57999ee385" + "0" * 52


def kept(passed=True, problems=(), digest=DIGEST, text=" 42", since="2026-12-04T10:00:00Z"):
    return canary.record(passed, list(problems), answer(text, [1, 2], "length"), REQUEST, r"\b42\b",
                         "http://127.0.0.1:8000", "/etc/systemd/system/vllm.service", digest, since, 0.4)


def test_the_record_holds_the_result_the_question_and_the_unit():
    doc = kept()
    assert canary.record_path("vllm") == "/var/lib/moeops/canary-vllm.json"
    assert doc == {"schema_version": 1, "since": "2026-12-04T10:00:00Z", "passed": True, "problems": [],
                   "answer": "' 42'", "finish_reason": "length", "model": "tiny-deepseek-v3",
                   "prompt": "What is 6 times 7? Answer with the number only.", "max_tokens": 12, "expect": r"\b42\b",
                   "url": "http://127.0.0.1:8000", "unit": {"path": "/etc/systemd/system/vllm.service", "digest": DIGEST},
                   "elapsed_s": 0.4}
    # A later run with the same answer under the same unit is the same record: only its time and duration differ.
    later = kept(since="2026-12-05T08:00:00Z")
    later["elapsed_s"] = 0.9
    assert state_files.same_document(doc, later, canary.RECORD_VOLATILE)
    assert not state_files.same_document(doc, kept(text=" 43"), canary.RECORD_VOLATILE)
    assert not state_files.same_document(doc, kept(digest="f" * 64), canary.RECORD_VOLATILE)


def test_the_last_result_beside_the_unit_deployed_now():
    same = canary.last_result(kept(), "", DIGEST)
    assert same["status"] == "passed" and same["settings_changed"] is False and not same["problem"]
    assert same["line"] == ("passed: tiny-deepseek-v3 answered ' 42' (expected /\\b42\\b/); via http://127.0.0.1:8000, "
                            "this result since 2026-12-04T10:00:00Z; under the unit deployed now (sha256 5c57999ee385)")
    moved = canary.last_result(kept(), "", "abcdef" * 10 + "abcd")
    assert moved["settings_changed"] is True
    assert moved["line"].endswith("UNIT CHANGED SINCE: it ran under sha256 5c57999ee385, the unit is abcdefabcdef now")


def test_a_failed_canary_under_the_unit_deployed_now_is_a_problem():
    bad = kept(passed=False, problems=["the expected answer /\\b42\\b/ is not in it"], text=" 380swer")
    got = canary.last_result(bad, "", DIGEST)
    assert got["status"] == "failed" and got["problem"] == "last canary failed under the deployed unit"
    assert got["line"].startswith("FAILED: the expected answer /\\b42\\b/ is not in it; tiny-deepseek-v3 answered "
                                  "' 380swer' (expected /\\b42\\b/)")
    # Rolled back since: the unit it failed under is no longer deployed, so the line says so and it is no problem.
    rolled = canary.last_result(bad, "", "e" * 64)
    assert rolled["settings_changed"] is True and not rolled["problem"]
    # No answer at all.
    silent = canary.record(False, ["no answer: timed out"], None, REQUEST, "", "http://x", "/u", None, "t")
    assert silent["answer"] is None
    line = canary.last_result(silent, "", DIGEST)["line"]
    assert "answered nothing (checked for garbage only)" in line and line.endswith("the unit it ran under is not known")


@pytest.mark.parametrize("doc,why,shown", [
    (None, "[Errno 2] No such file or directory: '/var/lib/moeops/canary-vllm.json'", "no record file"),
    (None, "Expecting value: line 1 column 1 (char 0)", "Expecting value: line 1 column 1 (char 0)"),
    ({"passed": True}, "", "not a canary record of schema 1"),
])
def test_no_record_says_why(doc, why, shown):
    got = canary.last_result(doc, why, DIGEST)
    assert got["status"] == "none" and got["settings_changed"] is None
    assert got["line"] == "none yet (%s): the deploy records the canary it asks after /health" % shown
