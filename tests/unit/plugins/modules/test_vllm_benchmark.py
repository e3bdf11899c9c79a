# -*- coding: utf-8 -*-
"""vllm_benchmark's steps without a vLLM: check mode (the plan, nothing run), record (a real probe of this test's own
Python, records written to a temporary store) and compare, over the simulated node's real record and records made
worse from it by a stated factor (tests/fixtures/benchmark/)."""
from __future__ import annotations

import json
import os
import sys

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.moeops.inference.plugins.modules import vllm_benchmark
from conftest import ExitJson, FailJson

pytestmark = pytest.mark.usefixtures("module_exits")

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "benchmark")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils"))
from test_benchmark import RECORD, SERVICE, fixture, seed_facts, worse  # noqa: E402  pylint: disable=wrong-import-position


def run(args, expect=ExitJson):
    with patch_module_args(args):
        with pytest.raises(expect) as exc:
            vllm_benchmark.main()
    return exc.value.args[0]


def test_check_mode_returns_the_plan_and_runs_nothing():
    got = run({"service": fixture(SERVICE), "scenario": "cold_prefill", "prefill_input_len": 1024,
               "_ansible_check_mode": True})
    assert got["line"] == "cold_prefill: 1 prompt, 1 at a time, 1024 in / 16 out, seed 303"
    assert got["command"][:3] == ["/opt/vllm/venv/bin/vllm", "bench", "serve"] and "metrics" not in got
    assert got["url"] == "http://127.0.0.1:8000"


def test_a_scenario_that_does_not_fit_the_unit_is_refused_in_check_mode_too():
    got = run({"service": fixture(SERVICE), "scenario": "cold_prefill", "_ansible_check_mode": True}, FailJson)
    assert "--max-model-len 2048" in got["msg"]


def store_with(tmp_path, *docs):
    fp = fixture(RECORD)["fingerprint"]["id"]
    directory = tmp_path / fp
    directory.mkdir(exist_ok=True)
    for doc in docs:
        (directory / (doc["name"] + ".json")).write_text(json.dumps(doc))
    return directory


def test_compare_fails_a_record_made_1_5_times_slower_and_warns_on_15_percent(tmp_path, monkeypatch):
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: warned.append(text))
    real = fixture(RECORD)
    slow = worse(real, 1.5, "20991231T000000Z-FABRICATED-throughput-div-1.5", throughput_only=True)
    directory = store_with(tmp_path, real, slow)
    got = run({"step": "compare", "record": str(directory / (slow["name"] + ".json"))}, FailJson)
    assert got["msg"].startswith("benchmark regression above 25%: latency output tok/s")
    assert "throughput output tok/s" in got["msg"] and "FAIL (regression 33.3% > 25%)" in got["msg"]
    assert "TTFT" not in got["msg"]  # latencies untouched
    assert got["verdict"] == "fail" and got["fabricated"] == "test: 1.5"
    got = run({"step": "compare", "record": str(directory / (slow["name"] + ".json")), "fail_on_regression": False})
    assert got["verdict"] == "fail" and got["changed"] is False
    os.unlink(str(directory / (slow["name"] + ".json")))
    bit = worse(real, 1 / 0.85, "20991231T000001Z-FABRICATED-15-percent")
    store_with(tmp_path, bit)
    got = run({"step": "compare", "record": str(directory / (bit["name"] + ".json"))})
    assert got["verdict"] == "warn"
    assert warned[-1].startswith("benchmark regression above 10% (below 25%) in 18 metric(s): latency output tok/s -15.0%, ")
    # the real record itself: nothing earlier to compare with
    assert run({"step": "compare", "record": str(directory / (real["name"] + ".json"))})["verdict"] == "no_baseline"


def test_compare_refuses_what_is_not_a_record(tmp_path):
    path = tmp_path / "20261204T000000Z.json"
    path.write_text("{}")
    assert "not a benchmark record" in run({"step": "compare", "record": str(path)}, FailJson)["msg"]


def test_record_writes_every_run_and_compares_with_the_previous(tmp_path):
    real = fixture(RECORD)
    # the run step's results, as a registered loop holds them
    results = [{"scenario": dict(s["workload"], name=s["name"], what=s.get("what", "")), "metrics": s["metrics"],
                "result": s["result"], "command": s["command"], "elapsed_s": s["elapsed_s"]} for s in real["scenarios"]]
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(sys.executable, str(venv / "bin" / "python"))
    args = {"step": "record", "service": fixture(SERVICE), "results": results, "gpu_facts": seed_facts(),
            "profile": "tiny-deepseek-v3-test", "collection_version": "0.1.0", "store": str(tmp_path / "store"),
            "venv": str(venv), "user": "", "host": "unit-test"}
    first = run(args)
    assert first["changed"] and first["verdict"] == "no_baseline"
    assert os.path.dirname(first["path"]) == str(tmp_path / "store" / first["fingerprint"]["id"])
    written = json.loads(open(first["path"]).read())
    assert written == first["record"] and written["host"] == "unit-test"
    assert [s["metrics"] for s in written["scenarios"]] == [s["metrics"] for s in real["scenarios"]]
    c = written["fingerprint"]["components"]
    assert (c["cuda_version"], c["nccl_version"]) == ("none", "none")
    second = run(args)
    assert second["path"] != first["path"] and second["verdict"] == "pass"
    assert {r["baseline"] for r in second["comparison"]["rows"]} == {os.path.basename(first["path"])}
    assert len(os.listdir(os.path.dirname(first["path"]))) == 2
