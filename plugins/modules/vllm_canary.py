#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_canary
short_description: Ask a served model one fixed question and judge the answer
version_added: 0.6.0
description:
  - vLLM's C(/health) answers 200 unless the engine has already failed, so an engine that hangs or emits garbage looks
    healthy. This module sends one chat request at temperature 0 with a small O(max_tokens) and judges the answer.
  - The answer fails when it is empty, when one token repeats O(repeat_limit) times in a row, when it holds text
    outside the tokenizer's ordinary range (bytes that do not decode, control characters), or when O(expect) is not
    found in it. With a reasoning parser, the reasoning and the content are judged together.
  - The M(moeops.inference.vllm_service) role runs it after C(/health) on every deploy, through the path clients use
    (the API key, and the front when there is one), with the model profile's C(canary).
author:
  - moeops.inference contributors (@moeops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: partial
    details: In check mode nothing is sent; the module returns the request it would send.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  url:
    description: The server's base URL, without C(/v1), as a client on this host reaches it.
    type: str
    required: true
  model:
    description: The served model name (C(--served-model-name)).
    type: str
    required: true
  prompt:
    description: The question, sent as the one user message.
    type: str
    required: true
  max_tokens:
    description: The most tokens the answer may have.
    type: int
    default: 32
  expect:
    description: A regular expression (Python's C(re.search)) the answer must hold; empty checks only for garbage.
    type: str
    default: ""
  chat_template_kwargs:
    description: Passed to the chat template, for example C(enable_thinking=false) as a mapping.
    type: dict
    default: {}
  api_key:
    description: The API key, sent as a bearer token. Never returned, never logged.
    type: str
  api_key_file:
    description: A file on the host that holds the API key (used when O(api_key) is not given).
    type: path
  timeout:
    description: Seconds to wait for the whole answer.
    type: int
    default: 120
  repeat_limit:
    description: A run of this many equal tokens in a row counts as garbage.
    type: int
    default: 8
  validate_certs:
    description:
      - Verify the server's TLS certificate. The role turns it off for its own front, reached on loopback, whose
        certificate names the host's public name.
    type: bool
    default: true
  record:
    description:
      - Absolute path of a JSON file on the host where the result is kept, passed or failed, with the question, the
        URL and the O(unit_file)'s SHA-256 (the role uses C(/var/lib/moeops/canary-<unit>.json), which
        M(moeops.inference.vllm_service_info) reads for the settings report). Not written in check mode.
      - The file is rewritten only when the result or the unit differs from the one it holds; its C(since) is then
        the first run that gave this result. A failure to write it is a warning, never the canary's failure.
    type: path
    version_added: 0.7.0
  unit_file:
    description: The systemd unit the served model runs under; its SHA-256 goes into O(record).
    type: path
    version_added: 0.7.0
notes:
  - The answer is returned and shown cut to 200 characters, quoted, so that control characters are visible.
  - The module reports a change only when it writes O(record), that is when the result or the unit is new.
seealso:
  - module: moeops.inference.vllm_service_info
"""

EXAMPLES = r"""
- name: Ask the served model what 17 times 23 is
  moeops.inference.vllm_canary:
    url: http://127.0.0.1:8000
    model: kimi-k2.5
    prompt: What is 17 times 23? Answer with the number only.
    max_tokens: 16
    expect: '\b391\b'
    chat_template_kwargs:
      thinking: false

- name: The same, keeping the result for the settings report
  moeops.inference.vllm_canary:
    url: http://127.0.0.1:8000
    model: kimi-k2.5
    prompt: What is 17 times 23? Answer with the number only.
    expect: '\b391\b'
    record: /var/lib/moeops/canary-vllm.json
    unit_file: /etc/systemd/system/vllm.service
"""

RETURN = r"""
passed:
  description: Whether the answer passed every check.
  returned: always
  type: bool
problems:
  description: What is wrong with the answer, one problem an item.
  returned: always
  type: list
  elements: str
answer:
  description: The answer's text (reasoning and content), quoted and cut to 200 characters.
  returned: success
  type: str
  sample: "'391'"
text:
  description: The answer's whole text.
  returned: success
  type: str
token_ids:
  description: The answer's token ids, where vLLM returned them.
  returned: success
  type: list
  elements: int
finish_reason:
  description: Why the answer ended (C(stop), C(length)).
  returned: success
  type: str
elapsed_s:
  description: Seconds from the request to the whole answer.
  returned: success
  type: float
request:
  description: The request body that was (or in check mode would be) sent.
  returned: always
  type: dict
record:
  description: The document kept in O(record) (the file's, when it already held this result).
  returned: when O(record) is given, not in check mode
  type: dict
  version_added: 0.7.0
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.moeops.inference.plugins.module_utils._common import state_files
from ansible_collections.moeops.inference.plugins.module_utils._policy import canary as _canary
from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as _settings


def _keep(module, result, request, answer):
    """Write the result to the record file, when one is asked for; the module's `changed` says whether it was written."""
    p = module.params
    if not p["record"]:
        return
    digest = None
    if p["unit_file"]:
        try:
            with open(p["unit_file"], "r", encoding="utf-8") as handle:
                digest = _settings.text_digest(handle.read())
        except (OSError, UnicodeDecodeError) as exc:
            module.warn("canary: cannot read the unit %s for the record: %s" % (p["unit_file"], exc))
    doc = _canary.record(result["passed"], result["problems"], answer, request, p["expect"], p["url"],
                         p["unit_file"] or "", digest, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         result.get("elapsed_s"))
    try:
        os.makedirs(os.path.dirname(p["record"]) or ".", mode=0o755, exist_ok=True)
        result["changed"] = state_files.write_json(p["record"], doc, mode=0o644, ignore_keys=_canary.RECORD_VOLATILE,
                                                   move=module.atomic_move)
    except (OSError, TypeError, ValueError) as exc:
        module.warn("canary: cannot keep the result in %s: %s" % (p["record"], exc))
        result["record"] = doc
        return
    # What the file holds: a same result keeps the earlier `since`.
    result["record"] = doc if result["changed"] else (state_files.read_json(p["record"]) or doc)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            model=dict(type="str", required=True),
            prompt=dict(type="str", required=True),
            max_tokens=dict(type="int", default=32, no_log=False),
            expect=dict(type="str", default=""),
            chat_template_kwargs=dict(type="dict", default={}),
            api_key=dict(type="str", no_log=True),
            api_key_file=dict(type="path"),
            timeout=dict(type="int", default=120),
            repeat_limit=dict(type="int", default=_canary.DEFAULT_REPEAT_LIMIT),
            validate_certs=dict(type="bool", default=True),
            record=dict(type="path"),
            unit_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    body = _canary.request_body(p["model"], p["prompt"], p["max_tokens"], p["chat_template_kwargs"])
    if module.check_mode:
        module.exit_json(changed=False, passed=True, problems=[], request=body)
    key = p["api_key"]
    if not key and p["api_key_file"]:
        try:
            with open(p["api_key_file"], "r", encoding="utf-8") as handle:
                key = handle.read().strip()
        except OSError as exc:
            module.fail_json(msg="cannot read the API key file %s: %s" % (p["api_key_file"], exc.strerror or exc),
                             passed=False, problems=[], request=body)
        module.no_log_values.add(key)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer %s" % key
    url = p["url"].rstrip("/") + "/v1/chat/completions"
    start = time.monotonic()
    try:
        resp = open_url(url, data=json.dumps(body), headers=headers, method="POST", timeout=p["timeout"],
                        validate_certs=p["validate_certs"])
        raw = resp.read().decode("utf-8", "replace")
    except Exception as exc:  # pylint: disable=broad-except
        detail = ""
        if hasattr(exc, "read"):
            try:
                detail = ": " + _canary.shorten(exc.read().decode("utf-8", "replace"))
            except Exception:  # pylint: disable=broad-except
                detail = ""
        result = dict(changed=False, passed=False, problems=["no answer: %s" % exc], request=body,
                      elapsed_s=round(time.monotonic() - start, 3))
        _keep(module, result, body, None)
        module.fail_json(msg="canary request to %s failed after %.1f s: %s%s" % (url, result["elapsed_s"], exc, detail),
                         **result)
    elapsed = round(time.monotonic() - start, 3)
    try:
        answer = _canary.answer_of(json.loads(raw))
    except ValueError as exc:
        result = dict(changed=False, passed=False, problems=["not a chat completion"], request=body, elapsed_s=elapsed)
        _keep(module, result, body, {"text": raw, "finish_reason": None})
        module.fail_json(msg="canary: %s answered what is not a chat completion: %s (%s)" % (url, _canary.shorten(raw), exc),
                         **result)
    problems = _canary.judge(answer, p["expect"], p["repeat_limit"])
    result = dict(changed=False, passed=not problems, problems=problems, answer=_canary.shorten(answer["text"]),
                  text=answer["text"], token_ids=answer["token_ids"], finish_reason=answer["finish_reason"],
                  elapsed_s=elapsed, request=body)
    _keep(module, result, body, answer)
    if problems:
        module.fail_json(msg="canary failed: %s; the answer was %s" % ("; ".join(problems), result["answer"]), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
