# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The generation canary's rules: the request it sends and how its answer is judged. Private to the collection.

vLLM's /health answers 200 unless the engine has already failed, so a hung engine or one that emits garbage looks
healthy. The canary asks one fixed question at temperature 0 through the path clients use and judges the answer:
  - empty: no text at all;
  - repeated: one token (or, without token ids, one character) over and over;
  - unreadable: bytes that do not decode (U+FFFD) or control characters, text outside the tokenizer's ordinary range;
  - unexpected: the profile's expectation (a regular expression) is not found.
The last result is kept on the node, one file a unit (`record_path`), beside the digest of the unit it ran under; the
settings report shows it (`last_result`) and says whether the unit changed since.
Pure functions: the vllm_canary module sends the request, calls `judge` and writes `record`; vllm_service_info reads
the file back.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Dict, List, Mapping, Optional, Sequence

# The answer shown in messages is cut to this many characters.
SHOWN = 200
# A run of the same token this long is garbage (a real answer of a handful of tokens never has one).
DEFAULT_REPEAT_LIMIT = 8
# Control characters an answer may hold.
ALLOWED_CONTROLS = frozenset("\n\r\t")

# The last result on the node: <RECORD_DIR>/canary-<unit name>.json.
RECORD_DIR = "/var/lib/moeops"
RECORD_SCHEMA = 1
# Keys that alone are no change: a deploy whose canary gives the same result under the same unit leaves the file as it
# is (and reports no change), so `since` is the first run that gave this result.
RECORD_VOLATILE = ("since", "elapsed_s")


def request_body(model: str, prompt: str, max_tokens: int,
                 chat_template_kwargs: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The OpenAI chat request: greedy (temperature 0, a fixed seed), short, with vLLM's token ids in the answer."""
    body: Dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}],
                            "temperature": 0, "seed": 0, "max_tokens": int(max_tokens), "stream": False,
                            "return_token_ids": True}
    if chat_template_kwargs:
        body["chat_template_kwargs"] = dict(chat_template_kwargs)
    return body


def answer_of(response: Mapping[str, Any]) -> Dict[str, Any]:
    """The answer in an OpenAI chat response: its text (the reasoning first, where a reasoning parser split it off),
    its token ids where vLLM returned them, and why it ended."""
    choices = response.get("choices") or []
    if not choices or not isinstance(choices[0], Mapping):
        raise ValueError("the response has no choices: %s" % shorten(str(dict(response))))
    choice = choices[0]
    message = choice.get("message") or {}
    parts = [message.get(k) for k in ("reasoning", "reasoning_content", "content")]
    text = "".join(p for p in parts if isinstance(p, str))
    ids = choice.get("token_ids")
    return {"text": text, "content": message.get("content") or "",
            "token_ids": list(ids) if isinstance(ids, list) else None,
            "finish_reason": choice.get("finish_reason")}


def shorten(text: str, limit: int = SHOWN) -> str:
    """The text as a message shows it: repr-quoted (so control characters are visible), cut to `limit` characters."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


def longest_run(items: Sequence[Any]) -> int:
    best = run = 0
    previous: Any = object()
    for item in items:
        run = run + 1 if item == previous else 1
        previous = item
        best = max(best, run)
    return best


def unreadable(text: str) -> List[str]:
    """The characters of `text` outside a tokenizer's ordinary range, each described once."""
    found = []
    for char in text:
        if char == "\ufffd":
            what = "U+FFFD (bytes that do not decode)"
        elif unicodedata.category(char) in ("Cc", "Cs", "Co", "Cn") and char not in ALLOWED_CONTROLS:
            what = "U+%04X (%s)" % (ord(char), unicodedata.category(char))
        else:
            continue
        if what not in found:
            found.append(what)
    return found


def judge(answer: Mapping[str, Any], expect: Optional[str], repeat_limit: int = DEFAULT_REPEAT_LIMIT) -> List[str]:
    """What is wrong with the answer, one problem a line; [] when the canary passes."""
    text = answer.get("text") or ""
    problems: List[str] = []
    if not text.strip():
        return ["empty answer (finish_reason %s)" % answer.get("finish_reason")]
    ids = answer.get("token_ids")
    run = longest_run(ids) if ids else longest_run(text)
    if run >= repeat_limit:
        problems.append("one %s repeated %d times in a row" % ("token" if ids else "character", run))
    odd = unreadable(text)
    if odd:
        problems.append("text outside the tokenizer's ordinary range: %s" % ", ".join(odd))
    if expect and not re.search(expect, text):
        problems.append("the expected answer /%s/ is not in it" % expect)
    return problems


# ------------------------------------------------------------------ the last result, kept on the node

def record_path(unit_name: str) -> str:
    """Where the last canary result of the unit `<unit_name>.service` is kept."""
    return "%s/canary-%s.json" % (RECORD_DIR, unit_name)


def record(passed: bool, problems: Sequence[str], answer: Optional[Mapping[str, Any]], request: Mapping[str, Any],
           expect: str, url: str, unit_path: str, unit_digest: Optional[str], since: str,
           elapsed_s: Optional[float] = None) -> Dict[str, Any]:
    """The document kept on the node: the result, the question, where it was asked, and the unit it ran under (the
    SHA-256 of its file, as vllm_service_info digests it; None when the file could not be read)."""
    answer = answer or {}
    return {
        "schema_version": RECORD_SCHEMA,
        "since": since,
        "passed": bool(passed),
        "problems": list(problems),
        "answer": shorten(answer.get("text") or "") if answer else None,
        "finish_reason": answer.get("finish_reason"),
        "model": request.get("model"),
        "prompt": (request.get("messages") or [{}])[0].get("content"),
        "max_tokens": request.get("max_tokens"),
        "expect": expect or "",
        "url": url,
        "unit": {"path": unit_path, "digest": unit_digest},
        "elapsed_s": elapsed_s,
    }


def last_result(doc: Any, why: str, unit_digest_now: Optional[str]) -> Dict[str, Any]:
    """The last canary beside the unit deployed now, for the settings report: `status` (passed, failed, none),
    `settings_changed` (None when unknown), one `line` and a `problem` (a failure under the unit deployed now)."""
    out: Dict[str, Any] = {"status": "none", "record": None, "settings_changed": None, "problem": ""}
    if not isinstance(doc, Mapping) or doc.get("schema_version") != RECORD_SCHEMA:
        if doc is None:
            shown = "no record file" if "No such file" in (why or "") else (why or "no record")
        else:
            shown = "not a canary record of schema %d" % RECORD_SCHEMA
        out["line"] = "none yet (%s): the deploy records the canary it asks after /health" % shown
        return out
    out.update(status="passed" if doc.get("passed") else "failed", record=dict(doc))
    then = (doc.get("unit") or {}).get("digest")
    if not then or not unit_digest_now:
        under = "the unit it ran under is not known" if not then else "no unit is deployed now"
    else:
        out["settings_changed"] = then != unit_digest_now
        under = ("under the unit deployed now (sha256 %s)" % then[:12] if then == unit_digest_now else
                 "UNIT CHANGED SINCE: it ran under sha256 %s, the unit is %s now" % (then[:12], unit_digest_now[:12]))
    expect = (" (expected /%s/)" % doc["expect"]) if doc.get("expect") else " (checked for garbage only)"
    if doc.get("passed"):
        what = "passed: %s answered %s%s" % (doc.get("model"), doc.get("answer"), expect)
    else:
        said = doc.get("answer") if doc.get("answer") is not None else "nothing"
        why = "; ".join(doc.get("problems") or []) or "?"
        what = "FAILED: %s; %s answered %s%s" % (why, doc.get("model"), said, expect)
        if out["settings_changed"] is False:
            out["problem"] = "last canary failed under the deployed unit"
    out["line"] = "%s; via %s, this result since %s; %s" % (what, doc.get("url"), doc.get("since"), under)
    return out
