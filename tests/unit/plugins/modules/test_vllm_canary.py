# -*- coding: utf-8 -*-
"""vllm_canary against a real HTTP server the test starts in place of vLLM's /v1/chat/completions (a TEST DOUBLE that
answers what each test sets), and the record it keeps in a temporary directory."""
from __future__ import annotations

import http.server
import json
import os
import threading

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vs
from ansible_collections.moeops.inference.plugins.modules import vllm_canary
from conftest import ExitJson, FailJson

pytestmark = pytest.mark.usefixtures("module_exits")

UNIT = "[Service]\nEnvironment=NCCL_PROTO=LL\nExecStart=/opt/vllm/venv/bin/vllm serve m\n"


class FakeVllm(http.server.BaseHTTPRequestHandler):
    answer = " 42"

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"choices": [{"message": {"content": FakeVllm.answer}, "token_ids": [1, 2],
                                        "finish_reason": "length"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = http.server.HTTPServer(("127.0.0.1", 0), FakeVllm)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    FakeVllm.answer = " 42"
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()


@pytest.fixture
def node(tmp_path):
    unit = tmp_path / "vllm.service"
    unit.write_text(UNIT)
    return {"unit": unit, "record": tmp_path / "state" / "canary-vllm.json"}


def run(args, expect=ExitJson):
    with patch_module_args(args):
        with pytest.raises(expect) as exc:
            vllm_canary.main()
    return exc.value.args[0]


def ask(server, node, expect=r"\b42\b"):
    return {"url": server, "model": "tiny", "prompt": "What is 6 times 7?", "max_tokens": 12, "expect": expect,
            "record": str(node["record"]), "unit_file": str(node["unit"])}


def test_a_pass_is_kept_once_and_the_same_answer_again_is_no_change(server, node):
    first = run(ask(server, node))
    assert first["passed"] and first["changed"] is True
    doc = json.loads(node["record"].read_text())
    assert doc["passed"] and doc["answer"] == "' 42'" and doc["expect"] == r"\b42\b" and doc["url"] == server
    assert doc["unit"] == {"path": str(node["unit"]), "digest": vs.text_digest(UNIT)}
    assert first["record"] == doc
    stat = os.stat(node["record"])
    again = run(ask(server, node))
    # The same answer under the same unit: the file is left as it is, its `since` the first run's.
    assert again["passed"] and again["changed"] is False
    assert os.stat(node["record"]).st_mtime_ns == stat.st_mtime_ns and again["record"]["since"] == doc["since"]


def test_a_new_unit_or_answer_is_a_change(server, node):
    run(ask(server, node))
    node["unit"].write_text(UNIT.replace("LL", "Simple"))
    assert run(ask(server, node))["changed"] is True
    assert json.loads(node["record"].read_text())["unit"]["digest"] == vs.text_digest(UNIT.replace("LL", "Simple"))
    FakeVllm.answer = " 42."
    assert run(ask(server, node))["changed"] is True


def test_a_failure_is_kept_before_the_module_fails(server, node):
    FakeVllm.answer = " 380swer"
    got = run(ask(server, node), FailJson)
    assert got["msg"].startswith("canary failed: the expected answer") and got["changed"] is True
    doc = json.loads(node["record"].read_text())
    assert doc["passed"] is False and doc["answer"] == "' 380swer'"
    assert doc["problems"] == ["the expected answer /\\b42\\b/ is not in it"]


def test_no_answer_is_kept_as_a_failure(node):
    got = run(dict(ask("http://127.0.0.1:9", node), timeout=2), FailJson)
    assert got["msg"].startswith("canary request to http://127.0.0.1:9/v1/chat/completions failed")
    doc = json.loads(node["record"].read_text())
    assert doc["passed"] is False and doc["answer"] is None and doc["problems"][0].startswith("no answer: ")


def test_a_record_that_cannot_be_written_is_a_warning_not_a_failure(server, node, monkeypatch):
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: warned.append(text))
    node["record"].parent.write_text("a file where the directory should be")
    got = run(ask(server, node))
    assert got["passed"] and got["changed"] is False
    assert warned and warned[0].startswith("canary: cannot keep the result in %s" % node["record"])


def test_without_a_record_nothing_is_written_and_check_mode_sends_nothing(server, node):
    args = ask(server, node)
    del args["record"]
    assert run(args)["changed"] is False and not node["record"].exists()
    got = run(dict(ask("http://127.0.0.1:9", node), _ansible_check_mode=True))
    assert got["changed"] is False and got["request"]["temperature"] == 0 and not node["record"].exists()
