# -*- coding: utf-8 -*-
"""vllm_service_plan: everything the vllm_service role derives, from the role's inputs.

GPU facts: the REAL H200 capture (tests/fixtures/gpu/real/h200-x1-device.nvml.snapshot.json, one GPU, compute
capability 9.0) wherever one GPU will do, "as read on the node" being that capture with the backend it was read
with (nvml) and gpu_facts' from_hardware; the CONSTRUCTED 8-GPU doubles (tests/fixtures/gpu/constructed) where
a test needs several GPUs or compute capability 12.0, for which no capture exists.  Profiles: the shipped ones.
"""
from __future__ import annotations

import json
import math
import os

import pytest
import yaml

from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._common.plan import plan_role
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import unit as vsp
from ansible_collections.moeops.inference.plugins.module_utils._policy.settings import serve_settings
from conftest import FIXTURES, REPO, load_json, role_inputs, role_spec, shipped_profile

# The role's own hardening defaults (plain YAML, no templating in them).
with open(os.path.join(REPO, "roles", "vllm_service", "defaults", "main.yml")) as _f:
    HARDENING = yaml.safe_load(_f)["vllm_service_hardening"]

TINY = {"name": "tiny", "source": "org/tiny", "served_name": "tiny", "max_model_len": 4096,
        "gpu_memory_utilization": 0.9, "quantization": "bf16", "weights_size_gb": 1, "min_gpu_memory_gb": 1,
        "hidden_size": 64, "num_attention_heads": 4}
SNAP = "/var/cache/vllm/huggingface/hub/models--org--tiny/snapshots/" + "a" * 40


def h200_snapshot():
    """The real H200 capture replayed (backend snapshot), as gpu_facts returns it with backend=snapshot."""
    return topo.from_snapshot(load_json("real", "h200-x1-device.nvml.snapshot.json"), "h200-x1-device")


def h200():
    """The real H200 as gpu_facts read it on that machine: the capture's backend (nvml) and from_hardware."""
    facts = h200_snapshot()
    assert facts["snapshot"]["captured"]["backend"] == "nvml"
    facts["backend"] = "nvml"
    facts["from_hardware"] = topo.from_hardware(facts)
    return facts


def constructed(name):
    return topo.from_snapshot(load_json("constructed", name + ".json"), name)


def rtxpro_x8():
    return constructed("rtxpro6000-x8-2numa")  # compute capability 12.0, PCIe across two sockets


def h100_x8():
    return constructed("h100sxm-x8-nvswitch")  # compute capability 9.0, NVSwitch


# The old short names of these tests, to the role's variables (or the plan's context): the role's interface is its
# argument spec; this table only keeps the tests short.
VAR = {"name": "vllm_service_name", "venv": "vllm_venv", "hf_home": "vllm_hf_home", "home": "vllm_home",
       "host": "vllm_service_host", "port": "vllm_service_port", "start": "vllm_service_start",
       "tensor_parallel_size": "vllm_service_tensor_parallel_size", "max_model_len": "vllm_service_max_model_len",
       "gpu_memory_utilization": "vllm_service_gpu_memory_utilization", "extra_args": "vllm_service_extra_args",
       "nccl_overrides": "vllm_service_nccl_overrides", "environment": "vllm_service_environment",
       "health_timeout": "vllm_service_health_timeout", "health_timeout_base": "vllm_service_health_timeout_base",
       "weights_read_mb_per_s": "vllm_service_weights_read_mb_per_s", "hardening": "vllm_service_hardening",
       "hardening_overrides": "vllm_service_hardening_overrides", "stage_dir": "vllm_service_stage_dir",
       "restart_sec": "vllm_service_restart_sec", "ray_address": "vllm_service_ray_address",
       "pipeline_parallel_size": "vllm_service_pipeline_parallel_size", "ray_environment": "vllm_service_ray_environment",
       "p2p_gate": "vllm_service_p2p_gate", "p2p_gate_backend": "vllm_service_p2p_gate_backend",
       "shutdown_timeout": "vllm_service_shutdown_timeout", "backend_port": "vllm_service_backend_port",
       "front_routes": "vllm_service_front_routes", "front_metrics_cidrs": "vllm_service_front_metrics_cidrs",
       "front_tls_cert": "vllm_service_front_tls_cert", "front_tls_key": "vllm_service_front_tls_key",
       "front_read_timeout": "vllm_service_front_read_timeout", "front_retry_after": "vllm_service_front_retry_after",
       "engine": "vllm_engine", "canary": "vllm_service_canary", "model_path": "vllm_service_model_path"}
CTX = {"facts": "gpus", "tuning": "tuning", "config": "model_weights_config", "p2p_fallback": "p2p_fallback",
       "profile": "profile", "engine_venv": "engine_venv"}


def inputs(**over):
    """The role's defaults (defaults/main.yml, as the role_plan action reads them) with the overrides, and the context,
    on the real H200 with Kimi-K2.5."""
    values = role_inputs("vllm_service")
    values["vllm_service_env_file"] = "/etc/vllm/vllm.env"
    values["vllm_service_api_key_file"] = "/etc/vllm/vllm.api-key"
    ctx = {"gpus": h200(), "profile": shipped_profile("kimi_k25")}
    for key, value in over.items():
        if key == "api_key_given":
            values["vllm_service_api_key"] = "k-given" if value else ""
        elif key in CTX:
            ctx[CTX[key]] = value
        else:
            values[VAR.get(key, key)] = value
    return values, ctx


def plan_result(**over):
    """The role's whole plan through the role_plan action's code: every rule, then the plan."""
    values, ctx = inputs(**over)
    return plan_role("vllm_service", role_spec("vllm_service"), values, [], spec_roles(), ctx)


def plan(**over):
    """The unit plan. Problems that stop the planning (the inputs) as a ValueError, each without the role's prefix (as
    the tests match them); the model's fit on the GPUs (Kimi-K2.5 on one H200 does not fit) has tests of its own."""
    result = plan_result(**over)
    if result["plan"] is None:
        raise ValueError("; ".join(p[len("vllm_service: "):] for p in result["problems"]))
    return result["plan"]


def option(args, flag):
    return args[args.index(flag) + 1]


# --------------------------------------------------------------------------- the whole result

def test_the_result_is_plain_data_with_an_outcome_line():
    result = plan_result()
    assert json.loads(json.dumps(result)) == result
    assert result["outcome"].startswith("vllm_service: kimi-k2.5 (kimi-k2.5-int4) from vllm_service_profile kimi_k25 "
                                        "(profiles/kimi_k25.yml, shipped with the collection), at tensor parallel 1, "
                                        "vLLM at")
    assert result["plan"]["profile_origin"] == "kimi_k25 (profiles/kimi_k25.yml, shipped with the collection)"


def test_the_outcome_names_a_users_profile_file_by_its_path():
    path = os.path.join(REPO, "tests", "integration", "bad-inputs", "tiny_model.yml")
    values, ctx = inputs(vllm_service_profile=path)
    del ctx["profile"]  # loaded from the file, as the role does
    result = plan_role("vllm_service", role_spec("vllm_service"), values, [], spec_roles(), ctx)
    assert result["plan"]["profile_origin"] == "%s (your file)" % path
    assert " from vllm_service_profile %s (your file), at tensor parallel " % path in result["outcome"]


# --------------------------------------------------------------------------- hardening

def test_default_hardening_has_the_cuda_compatible_sandbox():
    h = plan(facts=rtxpro_x8())["hardening"]
    assert h["NoNewPrivileges"] is True and h["ProtectSystem"] == "strict" and h["DevicePolicy"] == "closed"
    assert h["RestrictAddressFamilies"] == "AF_UNIX AF_INET AF_INET6 AF_NETLINK"
    assert h["LimitMEMLOCK"] == "infinity" and h["UMask"] == "0027"
    # The GPUs' nodes come from the facts, after the control and unified-memory devices.
    assert h["DeviceAllow"][:4] == ["/dev/nvidiactl rw", "/dev/nvidia-uvm rw", "/dev/nvidia-uvm-tools rw",
                                    "char-nvidia-caps rw"]
    assert h["DeviceAllow"][4:] == ["/dev/nvidia%d rw" % i for i in range(8)]
    assert "MemoryDenyWriteExecute" not in h and "PrivateDevices" not in h
    # Everything else is the role's directive as given; the input is not changed.
    assert {k: v for k, v in h.items() if k != "DeviceAllow"} == {k: v for k, v in HARDENING.items() if k != "DeviceAllow"}
    assert len(HARDENING["DeviceAllow"]) == 4


def test_device_nodes_follow_the_gpus_read():
    assert plan()["hardening"]["DeviceAllow"][4:] == ["/dev/nvidia0 rw"]  # the real H200: one GPU
    assert plan(facts=topo.no_gpu_facts("no driver"))["hardening"]["DeviceAllow"] == HARDENING["DeviceAllow"]


def test_each_directive_switches_off_or_changes_alone():
    h = plan(hardening_overrides={"SystemCallFilter": None, "UMask": "0077", "ProtectHome": "read-only",
                                  "MemoryDenyWriteExecute": True})["hardening"]
    assert "SystemCallFilter" not in h
    assert (h["UMask"], h["ProtectHome"], h["NoNewPrivileges"]) == ("0077", "read-only", True)
    assert h["MemoryDenyWriteExecute"] is True
    assert "DeviceAllow" not in plan(hardening_overrides={"DeviceAllow": None})["hardening"]


def test_device_allow_given_as_one_string_or_replaced_still_gets_the_gpus():
    assert plan(hardening=dict(HARDENING, DeviceAllow="/dev/nvidiactl rw"))["hardening"]["DeviceAllow"] == [
        "/dev/nvidiactl rw", "/dev/nvidia0 rw"]
    over = plan(facts=h100_x8(), hardening_overrides={"DeviceAllow": ["char-nvidia-caps rw"]})["hardening"]
    assert over["DeviceAllow"] == ["char-nvidia-caps rw"] + ["/dev/nvidia%d rw" % i for i in range(8)]


def test_no_device_allow_in_the_directives_adds_no_device_nodes():
    bare = {k: v for k, v in HARDENING.items() if k != "DeviceAllow"}
    assert "DeviceAllow" not in plan(hardening=bare)["hardening"]
    assert plan(hardening={}, hardening_overrides={})["hardening"] == {}


# --------------------------------------------------------------------------- API key, loopback, health URL

@pytest.mark.parametrize("host,key,generate", [
    ("127.0.0.1", False, False), ("localhost", False, False), ("::1", False, False), ("127.0.1.1", False, False),
    ("0.0.0.0", False, True), ("10.0.0.5", False, True), ("::", False, True), ("0.0.0.0", True, False),
    ("10.0.0.5", True, False), ("127.0.0.1", True, False),
])
def test_a_key_is_generated_only_beyond_loopback_without_one(host, key, generate):
    result = plan(host=host, api_key_given=key)
    assert result["generate_api_key"] is generate
    assert result["loopback"] is (host in ("127.0.0.1", "localhost", "::1", "127.0.1.1"))


@pytest.mark.parametrize("host,url", [
    ("127.0.0.1", "http://127.0.0.1:8001/health"), ("localhost", "http://localhost:8001/health"),
    ("::1", "http://[::1]:8001/health"),
])
def test_health_is_polled_where_vllm_listens_on_loopback(host, url):
    assert plan(host=host, port=8001)["health_url"] == url


def test_health_url_brackets_an_ipv6_literal_and_polls_a_wildcard_on_loopback():
    assert vsp.health_url("fd00::5", 8001) == "http://[fd00::5]:8001/health"
    assert vsp.health_url("0.0.0.0", 8001) == vsp.health_url("::", 8001) == "http://127.0.0.1:8001/health"


@pytest.mark.parametrize("host,listen", [
    ("0.0.0.0", "0.0.0.0:8000"), ("", "0.0.0.0:8000"), ("::", "[::]:8000"), ("10.0.0.5", "10.0.0.5:8000"),
    ("fd00::5", "[fd00::5]:8000"),
])
def test_beyond_loopback_vllm_moves_to_loopback_behind_the_front(host, listen):
    result = plan(host=host, port=8000)
    front = result["front"]
    assert front["enabled"] and front["listen"] == listen and front["backend"] == "127.0.0.1:8001"
    assert result["health_url"] == "http://127.0.0.1:8001/health"
    args = result["args"]
    assert args[args.index("--host") + 1] == "127.0.0.1" and args[args.index("--port") + 1] == "8001"
    assert result["arg_sources"]["--host"]["rule"] == "api_front"
    assert result["arg_sources"]["--port"]["rule"] == "vllm_service_backend_port"
    assert plan(host=host, port=8000, backend_port=9100)["front"]["backend"] == "127.0.0.1:9100"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.1.1", "localhost", "::1"])
def test_on_loopback_there_is_no_front_and_vllm_keeps_the_address(host):
    result = plan(host=host, port=8000)
    assert result["front"]["enabled"] is False and "loopback" in result["front"]["why"]
    assert result["args"][result["args"].index("--port") + 1] == "8000"


def test_shutdown_timeout_is_passed_and_the_stop_timeout_is_derived_above_it():
    assert plan()["args"][-2:] == ["--shutdown-timeout", "120"]
    result = plan(shutdown_timeout=120)
    assert result["args"][-2:] == ["--shutdown-timeout", "120"] and result["timeout_stop_sec"] == 150
    assert result["arg_sources"]["--shutdown-timeout"]["rule"] == "vllm_service_shutdown_timeout"


@pytest.mark.parametrize("over,message", [
    ({"backend_port": 8000}, r"vllm_service_backend_port must differ from vllm_service_port"),
    ({"front_tls_cert": "/etc/c.pem"}, r"given together or not at all"),
    ({"front_tls_cert": "c.pem", "front_tls_key": "k.pem"}, r"vllm_service_front_tls_cert must be an absolute path"),
    ({"front_routes": ["GET /v1/models", "FETCH /x"]}, r"vllm_service_front_routes\[1\] must be 'METHOD /path'"),
    ({"front_routes": ["GET /v1/../docs"]}, r"vllm_service_front_routes\[0\] must be"),
    ({"front_metrics_cidrs": ["10.0.0.0/33"]}, r"vllm_service_front_metrics_cidrs\[0\] must be a network"),
    ({"shutdown_timeout": -1}, r"vllm_service_shutdown_timeout must be 0 or more seconds"),
])
def test_front_inputs_are_refused_with_the_variable_named(over, message):
    with pytest.raises(ValueError, match=message):
        plan(host="0.0.0.0", **over)


def test_no_secret_reaches_the_args_or_the_environment():
    # The plan never gets a key or a token (only whether a key is given): argv and Environment= carry none;
    # they go to the root-only environment file (tests/unit/roles/test_vllm_service_safety.py).
    for key in (True, False):
        result = plan(host="0.0.0.0", api_key_given=key, facts=rtxpro_x8(), tensor_parallel_size=8)
        assert not [a for a in result["args"] if a.startswith(("--api-key", "--hf-token"))]
        assert "VLLM_API_KEY" not in result["environment"] and "HF_TOKEN" not in result["environment"]


# --------------------------------------------------------------------------- health timeout, start limit

@pytest.mark.parametrize("over,seconds", [
    ({}, 600 + 3047),  # Kimi-K2.5, 595 GB at 200 MB/s: ceil(3046.4)
    ({"health_timeout": 900}, 900),
    ({"health_timeout": "900"}, 900),  # as -e passes it
    ({"weights_read_mb_per_s": 1000}, 600 + 610),  # ceil(609.28)
    ({"health_timeout_base": 0}, 3047),
    ({"profile": shipped_profile("glm5")}, 600 + 2253),  # 440 GB: ceil(2252.8)
    ({"profile": dict(TINY, weights_size_gb=0.5)}, 600 + 3),  # ceil(2.56)
])
def test_health_timeout_is_sized_from_the_weights(over, seconds):
    assert plan(**over)["health_timeout"] == seconds


def test_without_a_weights_size_the_health_timeout_is_an_hour():
    assert vsp.health_timeout(None, 0, 600, 200) == 3600
    assert vsp.health_timeout(None, None, 600, 200) == 3600
    assert vsp.health_timeout(900, None, 600, 200) == 900
    assert vsp.health_timeout(None, 595, 600, 200) == 600 + math.ceil(595 * 1024 / 200)
    # A profile without a size does not reach the plan: the profile check names the key.
    with pytest.raises(ValueError, match=r"vllm_service_profile\.weights_size_gb: must be above 0"):
        plan(profile=dict(TINY, weights_size_gb=0))


@pytest.mark.parametrize("over,seconds", [
    ({}, 3647),  # the health timeout is longer than 10 restart delays
    ({"health_timeout": 100}, 300),  # 10 x 30 s
    ({"health_timeout": 100, "restart_sec": 0}, 100),
    ({"health_timeout": 900, "restart_sec": 120}, 1200),
])
def test_start_limit_interval_outlasts_both_the_restarts_and_the_load(over, seconds):
    assert plan(**over)["start_limit_interval"] == seconds


# --------------------------------------------------------------------------- start decisions

def test_gpus_read_on_the_node_start_the_service():
    result = plan()
    assert (result["from_hardware"], result["start"], result["why_not_started"]) == (True, True, "")


def test_a_replayed_snapshot_is_not_started_and_says_why():
    result = plan(facts=h200_snapshot())
    assert result["from_hardware"] is False and result["start"] is False
    assert result["why_not_started"] == "GPUs replayed from a snapshot, not read from hardware"
    # The snapshot's reason wins over "never".
    assert plan(facts=h200_snapshot(), start="never")["why_not_started"] == \
        "GPUs replayed from a snapshot, not read from hardware"
    assert plan(facts=rtxpro_x8())["why_not_started"] == "GPUs replayed from a snapshot, not read from hardware"


@pytest.mark.parametrize("start,facts,started,why", [
    ("never", h200, False, "vllm_service_start is never"),
    ("always", h200_snapshot, True, ""),
    # No GPU read: the CUDA build gets no unit at all (a tensor-parallel size over 0 GPUs), whatever start says.
    ("always", lambda: topo.no_gpu_facts("no driver"), False, "no GPU read: no unit written"),
    ("auto", lambda: topo.no_gpu_facts("no driver"), False, "no GPU read: no unit written"),
    ("auto", lambda: dict(h200(), from_hardware=False), False, "no GPU read"),
])
def test_start_decisions(start, facts, started, why):
    result = plan(start=start, facts=facts())
    assert (result["start"], result["why_not_started"]) == (started, why)


def test_facts_without_from_hardware_fall_back_to_the_backend():
    facts = h200()
    del facts["from_hardware"]
    assert plan(facts=facts)["from_hardware"] is True
    assert plan(facts=dict(facts, backend="nvidia_smi"))["from_hardware"] is True
    assert plan(facts=dict(facts, count=0, gpus=[], pairs=[]))["from_hardware"] is False
    # gpu_facts' own boolean wins over the backend.
    assert plan(facts=dict(h200_snapshot(), from_hardware=True))["start"] is True


# --------------------------------------------------------------------------- tensor parallel and layout

def test_tensor_parallel_size_from_the_layout_or_given():
    one = plan()
    assert one["tensor_parallel_size"] == 1 == one["layout"]["tensor_parallel_size"]
    assert option(one["args"], "--tensor-parallel-size") == "1"
    assert one["arg_sources"]["--tensor-parallel-size"] == {
        "source": "policy", "rule": "parallel_layout", "reason": one["layout"]["reasons"]["tensor_parallel_size"]}
    assert "the 1 GPU(s)" in one["layout"]["reasons"]["tensor_parallel_size"]
    eight = plan(facts=rtxpro_x8())
    assert eight["tensor_parallel_size"] == 8 and option(eight["args"], "--tensor-parallel-size") == "8"
    given = plan(facts=rtxpro_x8(), tensor_parallel_size=4)
    assert given["tensor_parallel_size"] == 4 and given["layout"]["tensor_parallel_size"] == 8
    assert option(given["args"], "--tensor-parallel-size") == "4"
    assert given["arg_sources"]["--tensor-parallel-size"] == {
        "source": "inventory", "rule": "vllm_service_tensor_parallel_size", "reason": ""}
    assert plan(facts=rtxpro_x8(), tensor_parallel_size="2")["tensor_parallel_size"] == 2  # from -e


def test_layout_is_the_topology_policys():
    nvswitch = plan(facts=h100_x8())["layout"]
    assert (nvswitch["expert_parallel"], nvswitch["custom_all_reduce"]) == (True, True)
    pcie = plan(facts=rtxpro_x8())["layout"]
    assert (pcie["expert_parallel"], pcie["custom_all_reduce"]) == (False, False)


# --------------------------------------------------------------------------- vllm serve arguments and sources

def sources_for(result):
    """Every setting of the argv as the settings report reads it, and the source the plan gives it."""
    keys = list(serve_settings([result["executable"]] + result["args"]))
    assert list(result["arg_sources"]) == keys
    return result["arg_sources"]


SHUTDOWN_SOURCE = {"source": "variable", "rule": "vllm_service_shutdown_timeout",
                   "reason": "in-flight requests finish on a restart (0 would abort them)"}
NUMA_SOURCE = {"source": "role", "rule": "numa_bind", "reason": vsp.NUMA_BIND_REASON}


def test_glm5_on_compute_capability_12_every_argument_and_its_source():
    result = plan(profile=shipped_profile("glm5"), facts=rtxpro_x8(), host="0.0.0.0",
                  extra_args=["--enable-expert-parallel", "--max-num-seqs=64"])
    assert result["executable"] == "/opt/vllm/engine/bin/vllm"
    assert result["args"] == [
        "serve", "nvidia/GLM-5-NVFP4", "--served-model-name", "glm-5", "--tensor-parallel-size", "8", "--no-numa-bind",
        "--max-model-len", "131072", "--gpu-memory-utilization", "0.9",
        "--enable-auto-tool-choice", "--tool-call-parser", "glm47", "--reasoning-parser", "glm45",
        "--chat-template-content-format", "string", "--disable-custom-all-reduce",
        "--host", "127.0.0.1", "--port", "8001", "--enable-expert-parallel", "--max-num-seqs=64",
        "--shutdown-timeout", "120"]
    reason = shipped_profile("glm5")["compute_capability_constraints"][0]["reason"]

    def prof(key, why=""):
        return {"source": "profile", "rule": "glm-5-nvfp4." + key, "reason": why}

    inventory = {"source": "inventory", "rule": "vllm_service_extra_args", "reason": ""}
    assert sources_for(result) == {
        "executable": {"source": "variable", "rule": "vllm_venv", "reason": "the venv it links to, where it is a link (the vllm role's engine)"},
        "subcommand": {"source": "role", "rule": "vllm.service.j2", "reason": ""},
        "model": prof("source"),
        "--served-model-name": prof("served_name"),
        "--tensor-parallel-size": {"source": "policy", "rule": "parallel_layout",
                                   "reason": result["layout"]["reasons"]["tensor_parallel_size"]},
        "--max-model-len": prof("max_model_len"),
        "--gpu-memory-utilization": prof("gpu_memory_utilization"),
        "--enable-auto-tool-choice": prof("tool_call_parser"),
        "--tool-call-parser": prof("tool_call_parser"),
        "--reasoning-parser": prof("reasoning_parser"),
        "--chat-template-content-format": prof("chat_template_content_format"),
        "--disable-custom-all-reduce": prof("compute_capability_constraints[0]", reason),
        "--host": {"source": "policy", "rule": "api_front", "reason": "loopback only: vllm-front listens on 0.0.0.0:8000"},
        "--port": {"source": "variable", "rule": "vllm_service_backend_port", "reason": "behind vllm-front"},
        "--shutdown-timeout": SHUTDOWN_SOURCE,
        "--no-numa-bind": NUMA_SOURCE,
        "--enable-expert-parallel": inventory,
        "--max-num-seqs": inventory,
    }


def test_the_compute_capability_constraint_applies_on_12_0_only():
    glm5 = shipped_profile("glm5")
    on_12 = plan(profile=glm5, facts=rtxpro_x8())
    assert "--kv-cache-dtype" not in on_12["args"] and "--disable-custom-all-reduce" in on_12["args"]
    assert on_12["model_settings"]["compute_capabilities"] == ["12.0"]
    assert on_12["model_settings"]["kv_cache_dtype"] == "auto"
    assert on_12["model_settings"]["disable_custom_all_reduce"] is True
    assert on_12["model_settings"]["applied"] == [
        "compute capability 12.0: the KV cache dtype left to vLLM (auto), --disable-custom-all-reduce (%s)"
        % glm5["compute_capability_constraints"][0]["reason"]]
    on_9 = plan(profile=glm5, facts=h100_x8())
    assert "--kv-cache-dtype" not in on_9["args"] and "--disable-custom-all-reduce" not in on_9["args"]
    assert "--kv-cache-dtype" not in on_9["arg_sources"] and on_9["model_settings"]["applied"] == []
    assert on_9["model_settings"]["compute_capabilities"] == ["9.0"]


def test_a_constraints_extra_args_and_a_profile_kv_cache_dtype_have_their_sources():
    profile = dict(TINY, kv_cache_dtype="fp8", extra_args=["--enforce-eager"], compute_capability_constraints=[
        {"compute_capabilities": ["8.0"], "reason": "not these GPUs", "kv_cache_dtype": "auto"},
        {"compute_capabilities": ["9.0"], "reason": "Hopper needs it", "extra_args": ["--max-num-batched-tokens", "8192"]}])
    result = plan(profile=profile)
    assert result["args"][11:] == ["--kv-cache-dtype", "fp8", "--enforce-eager", "--max-num-batched-tokens", "8192",
                                   "--host", "127.0.0.1", "--port", "8000", "--shutdown-timeout", "120"]
    src = sources_for(result)
    assert src["--kv-cache-dtype"] == {"source": "profile", "rule": "tiny.kv_cache_dtype", "reason": ""}
    assert src["--enforce-eager"] == {"source": "profile", "rule": "tiny.extra_args", "reason": ""}
    assert src["--max-num-batched-tokens"] == {
        "source": "profile", "rule": "tiny.compute_capability_constraints[1].extra_args", "reason": "Hopper needs it"}
    # The inventory's extra argument comes last and wins, in vLLM and in the sources.
    again = plan(profile=profile, extra_args=["--max-num-batched-tokens", "4096"])
    assert again["args"][-4:-2] == ["--max-num-batched-tokens", "4096"]
    assert again["arg_sources"]["--max-num-batched-tokens"]["source"] == "inventory"


def test_kimi_on_the_real_h200_every_argument_and_its_source():
    result = plan(max_model_len=65536, gpu_memory_utilization=0.85)
    assert result["args"] == [
        "serve", "moonshotai/Kimi-K2.5", "--served-model-name", "kimi-k2.5", "--tensor-parallel-size", "1",
        "--no-numa-bind", "--max-model-len", "65536", "--gpu-memory-utilization", "0.85", "--trust-remote-code",
        "--enable-auto-tool-choice", "--tool-call-parser", "kimi_k2", "--reasoning-parser", "kimi_k2",
        "--mm-encoder-tp-mode", "data", "--host", "127.0.0.1", "--port", "8000", "--shutdown-timeout", "120"]

    def prof(key):
        return {"source": "profile", "rule": "kimi-k2.5-int4." + key, "reason": ""}

    assert sources_for(result) == {
        "executable": {"source": "variable", "rule": "vllm_venv", "reason": "the venv it links to, where it is a link (the vllm role's engine)"},
        "subcommand": {"source": "role", "rule": "vllm.service.j2", "reason": ""},
        "model": prof("source"),
        "--served-model-name": prof("served_name"),
        "--tensor-parallel-size": {"source": "policy", "rule": "parallel_layout",
                                   "reason": result["layout"]["reasons"]["tensor_parallel_size"]},
        "--max-model-len": {"source": "inventory", "rule": "vllm_service_max_model_len", "reason": ""},
        "--gpu-memory-utilization": {"source": "inventory", "rule": "vllm_service_gpu_memory_utilization", "reason": ""},
        "--trust-remote-code": prof("trust_remote_code"),
        "--enable-auto-tool-choice": prof("tool_call_parser"),
        "--tool-call-parser": prof("tool_call_parser"),
        "--reasoning-parser": prof("reasoning_parser"),
        "--mm-encoder-tp-mode": prof("extra_args"),
        "--host": {"source": "variable", "rule": "vllm_service_host", "reason": ""},
        "--port": {"source": "variable", "rule": "vllm_service_port", "reason": ""},
        "--shutdown-timeout": SHUTDOWN_SOURCE,
        "--no-numa-bind": NUMA_SOURCE,
    }


def test_null_or_zero_inventory_values_take_the_profiles():
    for over in ({}, {"max_model_len": None, "gpu_memory_utilization": None}):
        result = plan(**over)
        assert option(result["args"], "--max-model-len") == "131072"
        assert option(result["args"], "--gpu-memory-utilization") == "0.92"
        assert result["arg_sources"]["--max-model-len"]["source"] == "profile"


def test_default_loads_the_profiles_source():
    result = plan(profile=TINY)
    assert result["args"][:2] == ["serve", "org/tiny"]
    assert option(result["args"], "--served-model-name") == "tiny"
    assert result["arg_sources"]["model"] == {"source": "profile", "rule": "tiny.source", "reason": ""}


def test_model_path_replaces_the_source_and_keeps_the_served_name():
    for model_path in (SNAP, SNAP + "/"):
        args = plan(profile=TINY, model_path=model_path)["args"]
        assert args[:2] == ["serve", model_path]
        assert args.count(model_path) == 1 and "org/tiny" not in args
        assert option(args, "--served-model-name") == "tiny"
    assert plan(profile=TINY, model_path=SNAP)["arg_sources"]["model"] == {
        "source": "variable", "rule": "vllm_service_model_path", "reason": "the staged weights"}
    # Null: the profile's source; empty is no path (refused by the input rules).
    assert plan(profile=TINY, model_path=None)["args"][1] == "org/tiny"
    with pytest.raises(ValueError, match=r"vllm_service_model_path must be an absolute path, got ''"):
        plan(profile=TINY, model_path="")


def test_a_pinned_revision_applies_to_the_source_only():
    pinned = dict(TINY, revision="0123abc")
    result = plan(profile=pinned)
    assert option(result["args"], "--revision") == "0123abc"
    assert result["arg_sources"]["--revision"] == {"source": "profile", "rule": "tiny.revision", "reason": ""}
    staged = plan(profile=pinned, model_path=SNAP)
    assert "--revision" not in staged["args"] and "--revision" not in staged["arg_sources"]


def test_chat_template_arguments_have_their_sources():
    profile = dict(TINY, chat_template="/etc/vllm/tiny.jinja", default_chat_template_kwargs={"enable_thinking": False})
    result = plan(profile=profile)
    assert option(result["args"], "--default-chat-template-kwargs") == '{"enable_thinking":false}'
    src = sources_for(result)
    assert src["--chat-template"]["rule"] == "tiny.chat_template"
    assert src["--default-chat-template-kwargs"]["rule"] == "tiny.default_chat_template_kwargs"
    assert {s["source"] for s in src.values()} == {"profile", "variable", "role", "policy"}


# --------------------------------------------------------------------------- Ray

def test_ray_appends_the_executor_and_the_pipeline_stages():
    result = plan(facts=rtxpro_x8(), host="0.0.0.0", ray_address="10.0.0.1:6379", pipeline_parallel_size=2,
                  ray_environment={"NCCL_SOCKET_IFNAME": "=enp1s0", "GLOO_SOCKET_IFNAME": "enp1s0"})
    assert result["args"][-6:-2] == ["--distributed-executor-backend", "ray", "--pipeline-parallel-size", "2"]
    assert option(result["args"], "--tensor-parallel-size") == "8"  # the GPUs of one node
    src = sources_for(result)
    assert src["--distributed-executor-backend"]["rule"] == "vllm_service_ray_address"
    assert "10.0.0.1:6379" in src["--distributed-executor-backend"]["reason"]
    assert src["--pipeline-parallel-size"] == {"source": "variable", "rule": "vllm_service_pipeline_parallel_size",
                                               "reason": "pipeline stages across the Ray nodes"}
    assert result["environment"]["RAY_ADDRESS"] == "10.0.0.1:6379"
    assert result["environment"]["NCCL_SOCKET_IFNAME"] == "=enp1s0"
    assert result["environment_sources"]["RAY_ADDRESS"] == {"source": "variable", "rule": "vllm_service_ray_address",
                                                            "reason": ""}
    assert result["environment_sources"]["GLOO_SOCKET_IFNAME"] == {
        "source": "variable", "rule": "vllm_service_ray_environment", "reason": ""}
    assert plan(ray_address="h:6379", pipeline_parallel_size="3")["args"][-3] == "3"  # from -e
    assert plan(ray_address="h:6379")["args"][-3] == "1"


def test_one_node_has_no_ray_arguments_or_environment():
    result = plan(ray_environment={"NCCL_SOCKET_IFNAME": "=enp1s0"}, pipeline_parallel_size=2)
    assert "--distributed-executor-backend" not in result["args"] and "--pipeline-parallel-size" not in result["args"]
    assert "RAY_ADDRESS" not in result["environment"] and "NCCL_SOCKET_IFNAME" not in result["environment"]
    assert plan(ray_address=None)["args"] == plan()["args"]


# --------------------------------------------------------------------------- environment

def test_environment_in_the_units_order_and_its_sources():
    result = plan(facts=rtxpro_x8(), environment={"VLLM_LOGGING_LEVEL": "DEBUG", "NCCL_PROTO": "Simple"},
                  nccl_overrides={"NCCL_ALGO": None, "NCCL_DEBUG": "WARN"})
    env, src = result["environment"], result["environment_sources"]
    assert list(env) == ["HF_HOME"] + CACHE_VARS + ["NCCL_PROTO", "VLLM_LOGGING_LEVEL", "GLOO_SOCKET_IFNAME", "NCCL_DEBUG",
                                                    "NCCL_P2P_LEVEL", "NCCL_SOCKET_IFNAME"]
    assert env["HF_HOME"] == "/var/cache/vllm/huggingface"
    assert src["HF_HOME"] == {"source": "variable", "rule": "vllm_hf_home", "reason": ""}
    assert (env["VLLM_LOGGING_LEVEL"], src["VLLM_LOGGING_LEVEL"]) == (
        "DEBUG", {"source": "inventory", "rule": "vllm_service_environment", "reason": ""})
    # The NCCL lines come after the inventory's in the unit: for systemd the later one wins.
    assert env["NCCL_PROTO"] == "LL" and src["NCCL_PROTO"]["source"] == "policy"
    assert src["NCCL_P2P_LEVEL"]["rule"] == "p2p_level"
    assert env["NCCL_DEBUG"] == "WARN"
    assert src["NCCL_DEBUG"] == {"source": "inventory", "rule": "inventory", "reason": "set in inventory"}
    assert "NCCL_ALGO" not in env and "NCCL_ALGO removed by inventory override (policy would set Ring)." in result["nccl"]["notes"]
    assert result["nccl"]["env"] == {k: v for k, v in env.items() if k.startswith(("NCCL_", "GLOO_"))}
    assert set(result["nccl"]) == {"env", "settings", "workload", "topology_file", "warnings", "notes", "report"}


def test_all_nvlink_or_one_gpu_gets_no_nccl_tuning_only_the_single_boxs_loopback_sockets():
    assert list(plan(facts=h100_x8())["environment"]) == ["HF_HOME"] + CACHE_VARS + ["GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"]
    assert list(plan()["environment"]) == ["HF_HOME"] + CACHE_VARS + ["GLOO_SOCKET_IFNAME"]


def test_one_box_keeps_gloo_and_nccl_sockets_on_loopback_and_a_ray_deploy_does_not():
    one = plan(facts=rtxpro_x8())
    assert one["environment"]["GLOO_SOCKET_IFNAME"] == "lo" and one["environment"]["NCCL_SOCKET_IFNAME"] == "lo"
    assert one["environment_sources"]["GLOO_SOCKET_IFNAME"]["rule"] == "single_box_loopback"
    assert [line for line in one["nccl"]["report"] if line.startswith("NCCL_SOCKET_IFNAME=lo [policy: single_box_loopback]")]
    # Inventory may take NCCL's back (null removes it), as any NCCL setting.
    mine = plan(facts=rtxpro_x8(), nccl_overrides={"NCCL_SOCKET_IFNAME": None})
    assert "NCCL_SOCKET_IFNAME" not in mine["environment"] and mine["environment"]["GLOO_SOCKET_IFNAME"] == "lo"
    # Across boxes the ranks are elsewhere: the Ray units carry the cluster's interfaces instead.
    ray = plan(facts=rtxpro_x8(), ray_address="10.0.0.1:6379", pipeline_parallel_size=2)
    assert "GLOO_SOCKET_IFNAME" not in ray["environment"] and "NCCL_SOCKET_IFNAME" not in ray["environment"]


# The compile and JIT caches, one directory per engine (unit.py ENGINE_CACHES), in the unit's (sorted) order.
CACHE_VARS = ["CUDA_CACHE_PATH", "FLASHINFER_WORKSPACE_BASE", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR",
              "TRITON_CACHE_DIR", "VLLM_CACHE_ROOT"]


def test_each_engine_keeps_its_compile_caches_in_a_directory_of_its_own():
    one = plan(engine_venv="/opt/vllm/venvs/0.33.0-cuda-0123456789ab")
    two = plan(engine_venv="/opt/vllm/venvs/0.34.0-cuda-ba9876543210")
    assert one["environment"]["VLLM_CACHE_ROOT"] == "/var/lib/vllm/engine-caches/0.33.0-cuda-0123456789ab/vllm"
    assert two["environment"]["TRITON_CACHE_DIR"] == "/var/lib/vllm/engine-caches/0.34.0-cuda-ba9876543210/triton"
    assert one["engine_caches_dir"] == "/var/lib/vllm/engine-caches"
    assert {one["environment"][v] for v in CACHE_VARS}.isdisjoint({two["environment"][v] for v in CACHE_VARS})
    assert one["environment_sources"]["CUDA_CACHE_PATH"]["source"] == "engine"
    # The inventory's value wins, as the unit's later line does for systemd.
    mine = plan(environment={"TRITON_CACHE_DIR": "/srv/triton"})
    assert mine["environment"]["TRITON_CACHE_DIR"] == "/srv/triton"
    assert mine["environment_sources"]["TRITON_CACHE_DIR"]["source"] == "inventory"


def test_the_real_tuning_result_of_the_h200_sets_its_environment():
    with open(os.path.join(os.path.dirname(FIXTURES), "nccl_tune", "h200-x1-device", "result.json")) as f:
        doc = json.load(f)
    result = plan(tuning=doc)
    assert result["environment"]["NCCL_NVLS_ENABLE"] == doc["best"]["env"]["NCCL_NVLS_ENABLE"]
    assert result["environment_sources"]["NCCL_NVLS_ENABLE"]["source"] == "tuning"
    assert result["environment_sources"]["NCCL_NVLS_ENABLE"]["rule"] == "nccl_tune:" + doc["fingerprint"]
    # A measured environment replaces the policy's, but never where gloo and NCCL listen on one box.
    assert result["environment"]["GLOO_SOCKET_IFNAME"] == "lo"
    assert result["environment_sources"]["GLOO_SOCKET_IFNAME"]["rule"] == "single_box_loopback"
    assert "NCCL_NVLS_ENABLE" not in plan(tuning=doc, nccl_overrides={"NCCL_NVLS_ENABLE": None})["environment"]
    assert plan(tuning={})["nccl"] == plan(tuning=None)["nccl"] == plan()["nccl"]
    # The switch off, as -e gives it (a string): the plan's converted false, the static policy (issue 28, class 6).
    for word in ("false", "no", "0", "off"):
        assert "NCCL_NVLS_ENABLE" not in plan(tuning=doc, vllm_service_nccl_tuning=word)["environment"], word
    assert plan(tuning=doc, vllm_service_nccl_tuning="true")["environment"]["NCCL_NVLS_ENABLE"] == \
        doc["best"]["env"]["NCCL_NVLS_ENABLE"]
    # Measured elsewhere: ignored with a warning.
    other = plan(facts=rtxpro_x8(), tuning=doc)
    assert other["nccl"]["env"] == {"GLOO_SOCKET_IFNAME": "lo", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS",
                                    "NCCL_PROTO": "LL", "NCCL_SOCKET_IFNAME": "lo"}
    assert "measured on another topology" in other["nccl"]["warnings"][-1]


# --------------------------------------------------------------------------- model settings and paths

def test_model_settings_are_the_profiles_constraints_and_dimensions_for_these_gpus():
    config = {"text_config": {"hidden_size": 7168, "num_attention_heads": 64}}
    for profile, facts, cfg in ((shipped_profile("glm5"), rtxpro_x8(), None), (shipped_profile("kimi_k25"), h200(), config)):
        settings = plan(profile=profile, facts=facts, config=cfg)["model_settings"]
        ccs = model_profile.compute_capabilities(facts)
        assert settings["compute_capabilities"] == ccs
        assert {k: v for k, v in settings.items() if k not in ("dimensions", "compute_capabilities")} == \
            model_profile.effective_settings(profile, ccs)
        assert settings["dimensions"] == model_profile.model_dimensions(profile, cfg)
    dims = plan(config=config)["model_settings"]["dimensions"]
    assert dims["sources"] == {"hidden_size": "config.json", "num_attention_heads": "config.json",
                               "num_key_value_heads": "config.json"}
    assert plan(config={})["model_settings"]["dimensions"]["sources"]["hidden_size"] == "profile"


def test_paths():
    result = plan(name="vllm-kimi", stage_dir="/srv/staging")
    assert result["unit_path"] == "/etc/systemd/system/vllm-kimi.service"
    assert result["stage_path"] == "/srv/staging/vllm-kimi.service"
    assert result["previous_dir"] == "/srv/staging/previous"
    assert plan(venv="/srv/venv")["executable"] == "/srv/venv/bin/vllm"


# --------------------------------------------------------------------------- bad inputs

@pytest.mark.parametrize("over,message", [
    ({"nccl_overrides": {"NCCL_PROTO": 1}}, r"vllm_service_nccl_overrides\.NCCL_PROTO must be a string \(quote it in YAML: "
                                            r"\"1\"\) or null to remove it, got int"),
    ({"nccl_overrides": "NCCL_PROTO=LL"}, r"vllm_service_nccl_overrides must be a dict, got the string 'NCCL_PROTO=LL'; "
                                          r"from the command line pass JSON"),
    ({"nccl_overrides": {"": "x"}}, r"vllm_service_nccl_overrides key '' is not an environment variable name"),
    ({"environment": {"A": None}}, r"vllm_service_environment\.A must be a string \(quote it in YAML: \"null\"\), got NoneType"),
    ({"environment": ["A=1"]}, r"argument 'vllm_service_environment' is of type list and we were unable to convert to dict"),
    ({"ray_environment": {"NCCL_IB_HCA": 1}}, r"vllm_service_ray_environment\.NCCL_IB_HCA must be a string"),
    ({"extra_args": "--enforce-eager"}, r"vllm_service_extra_args must be a list, got the string '--enforce-eager'"),
    ({"port": True}, r"vllm_service_port must be a number, got the boolean true"),
    ({"port": 70000}, r"vllm_service_port must be a TCP port in 1-65535"),
    ({"port": "80a"}, r"argument 'vllm_service_port' is of type str and we were unable to convert to int"),
    ({"tensor_parallel_size": 0}, r"vllm_service_tensor_parallel_size must be a positive number of GPUs"),
    ({"max_model_len": "long"}, r"argument 'vllm_service_max_model_len' is of type str and we were unable to convert to int"),
    ({"gpu_memory_utilization": "most"}, r"argument 'vllm_service_gpu_memory_utilization' is of type str and we were "
                                         r"unable to convert to float"),
    ({"health_timeout": 0}, r"vllm_service_health_timeout must be a positive number of seconds"),
    ({"weights_read_mb_per_s": 0}, r"vllm_service_weights_read_mb_per_s must be a positive read rate in MB/s"),
    ({"restart_sec": False}, r"vllm_service_restart_sec must be a number, got the boolean false"),
    ({"start": "sometimes"}, r"value of vllm_service_start must be one of: auto, always, never, got: sometimes"),
    ({"start": True}, r"value of vllm_service_start must be one of"),
    ({"hardening": ["NoNewPrivileges=yes"]}, r"argument 'vllm_service_hardening' is of type list"),
    ({"hardening_overrides": "x"}, r"argument 'vllm_service_hardening_overrides' is of type str"),
    ({"hardening_overrides": {"DeviceAllow": 5}}, r"vllm_service_hardening\.DeviceAllow .* must be a string or a list"),
    ({"venv": "opt/vllm/venv"}, r"vllm_venv must be an absolute path, got 'opt/vllm/venv'"),
    ({"home": "~vllm"}, r"vllm_home must be an absolute path"),
    ({"stage_dir": "staging"}, r"vllm_service_stage_dir must be an absolute path"),
    ({"model_path": "org/tiny"}, r"vllm_service_model_path must be an absolute path"),
    ({"name": "../vllm"}, r"vllm_service_name must be a systemd unit name"),
    ({"config": "{}"}, r"model_weights_config: expected a mapping or nothing, got str"),
    ({"tuning": "best"}, r"the stored NCCL tuning result: expected a mapping or nothing, got str"),
    ({"facts": {}}, r"ansible_facts\.nvidia_gpu: expected the facts of moeops.inference.gpu_facts"),
    ({"facts": None}, r"ansible_facts\.nvidia_gpu: expected the facts of moeops.inference.gpu_facts"),
    ({"facts": {"count": "two"}}, r"ansible_facts\.nvidia_gpu: expected the facts of moeops.inference.gpu_facts \(a whole count"),
    ({"profile": {}}, r"vllm_service_profile: expected a model profile"),
    ({"profile": dict(TINY, max_model_len="4k")}, r"vllm_service_profile\.max_model_len: must be a integer, got str"),
])
def test_bad_inputs_name_the_role_variable(over, message):
    with pytest.raises(ValueError, match=message):
        plan(**over)


def test_the_p2p_gate_fallback_renders_nccl_p2p_disable_with_its_source():
    failure = "P2P gate failed at copy: GPU pair 0-1 did not answer within 120 s (killed)"
    result = plan(facts=rtxpro_x8(), p2p_fallback=failure)
    assert result["environment"]["NCCL_P2P_DISABLE"] == "1"
    assert result["environment_sources"]["NCCL_P2P_DISABLE"]["source"] == "p2p_gate"
    assert {k: v for k, v in result["environment"].items() if k != "NCCL_P2P_DISABLE"} == \
        plan(facts=rtxpro_x8())["environment"]
    assert plan(facts=rtxpro_x8(), p2p_fallback=None) == plan(facts=rtxpro_x8())
    # The fallback's message comes from the gate module: any text is kept as the reason.
    assert plan(facts=rtxpro_x8(), p2p_fallback="x")["environment"]["NCCL_P2P_DISABLE"] == "1"


def test_the_inputs_are_not_changed():
    values, ctx = inputs(facts=rtxpro_x8(), hardening_overrides={"UMask": "0077"}, extra_args=["--enforce-eager"])
    before = json.dumps([values, ctx], sort_keys=True)
    plan_role("vllm_service", role_spec("vllm_service"), values, [], spec_roles(), ctx)
    assert json.dumps([values, ctx], sort_keys=True) == before


# --------------------------------------------------------------------------- the P2P gate


def test_the_gate_runs_before_a_start_on_more_than_one_gpu():
    hardware = dict(rtxpro_x8(), from_hardware=True)
    gate = plan(facts=hardware)["p2p_gate"]
    assert gate == {"run": True, "why": "", "backend": "nccl", "world_size": 8, "hidden_size": 7168}
    assert plan(facts=hardware, p2p_gate=False)["p2p_gate"]["why"] == "vllm_service_p2p_gate is false"
    assert plan(facts=hardware, tensor_parallel_size=1)["p2p_gate"]["why"] == "1 GPU: nothing to prove"
    # A snapshot's GPUs are not started on: nothing to prove there either, and it says why.
    assert plan(facts=rtxpro_x8())["p2p_gate"]["why"].startswith("the service does not start in this run (")
    # start always on replayed GPUs (the stand-in scenarios): no GPU to prove.
    assert plan(facts=rtxpro_x8(), start="always")["p2p_gate"]["why"] == (
        "the GPUs were not read from hardware (a snapshot): there are no GPUs to prove")
    # The real H200 of the fixtures: one GPU.
    assert plan(facts=dict(h200(), from_hardware=True))["p2p_gate"]["run"] is False


def test_the_gloo_mode_proves_the_harness_on_two_cpu_ranks_where_the_service_starts():
    gate = plan(facts=rtxpro_x8(), start="always", p2p_gate_backend="gloo")["p2p_gate"]
    assert gate["run"] and gate["world_size"] == 2 and gate["backend"] == "gloo"
    with pytest.raises(ValueError, match="value of vllm_service_p2p_gate_backend must be one of: nccl, gloo, got: mpi"):
        plan(facts=rtxpro_x8(), p2p_gate_backend="mpi")


# --------------------------------------------------------------------------- engine and canary

def test_the_cpu_build_starts_without_gpus_from_hardware():
    """vLLM's CPU build (vllm_engine cpu, simulation and CI) serves without a GPU: auto starts it on a snapshot."""
    assert plan(facts=rtxpro_x8())["start"] is False
    cpu = plan(facts=rtxpro_x8(), engine="cpu")
    assert (cpu["start"], cpu["why_not_started"], cpu["engine"]) == (True, "", "cpu")
    assert plan(facts=rtxpro_x8(), engine="cpu", start="never")["start"] is False
    with pytest.raises(ValueError, match=r"^value of vllm_engine must be one of: cuda, cpu, got: rocm"):
        plan(engine="rocm")


def test_the_canary_asks_the_profiles_question_where_clients_ask():
    direct = plan(facts=rtxpro_x8(), engine="cpu")["canary"]
    kimi = shipped_profile("kimi_k25")["canary"]
    assert direct["run"] is True and direct["prompt"] == kimi["prompt"] and direct["expect"] == kimi["expect"]
    assert (direct["url"], direct["validate_certs"], direct["via"]) == ("http://127.0.0.1:8000", True, "vLLM directly")
    front = plan(facts=rtxpro_x8(), engine="cpu", host="0.0.0.0",
                 front_tls_cert="/etc/t/c.pem", front_tls_key="/etc/t/k.pem")["canary"]
    # Through the front on loopback: its certificate names the host's public name, so this hop is not verified.
    assert (front["url"], front["validate_certs"], front["via"]) == ("https://127.0.0.1:8000", False, "vllm-front")
    # Its result is kept for the settings report, one file a unit.
    assert direct["record"] == "/var/lib/moeops/canary-vllm.json"
    assert plan(facts=rtxpro_x8(), engine="cpu", name="vllm-b")["canary"]["record"] == "/var/lib/moeops/canary-vllm-b.json"


def test_no_canary_when_the_service_does_not_start_or_it_is_switched_off():
    assert plan(facts=rtxpro_x8())["canary"]["run"] is False
    off = plan(facts=rtxpro_x8(), engine="cpu", canary=False)["canary"]
    assert off["run"] is False and "a hung or garbling engine would pass the deploy" in off["why"]
    # -e vllm_service_canary=false is the string "false": converted by the spec's type, never taken as true.
    assert plan(facts=rtxpro_x8(), engine="cpu", canary="false")["canary"]["run"] is False


def test_a_profile_without_a_canary_gets_the_garbage_only_default():
    got = plan(profile=TINY, facts=rtxpro_x8(), engine="cpu")["canary"]
    assert got["expect"] == "" and got["prompt"] and got["max_tokens"] == 32


# --------------------------------------------------------------------------- NUMA binding (issue 36)

def test_numa_binding_is_set_off_explicitly_and_a_numa_bind_in_the_extra_args_wins():
    """vLLM 0.33.0 binds no GPU worker to a NUMA node by default and 0.34.0 binds where it can: the CUDA unit says
    --no-numa-bind, before every extra argument, so that --numa-bind in vllm_service_extra_args comes later and wins
    in vLLM's argparse. Both flags exist in vLLM 0.33.0 (ParallelConfig.numa_bind, a BooleanOptionalAction)."""
    p = plan(facts=rtxpro_x8(), profile=shipped_profile("minimax_m25"))
    assert p["args"].count("--no-numa-bind") == 1
    assert p["arg_sources"]["--no-numa-bind"]["rule"] == "numa_bind"
    p = plan(facts=rtxpro_x8(), profile=shipped_profile("minimax_m25"), extra_args=["--numa-bind"])
    assert p["args"].index("--no-numa-bind") < p["args"].index("--numa-bind")
    assert serve_settings([p["executable"]] + p["args"])["--numa-bind"] == "true"


def test_the_cpu_build_gets_no_numa_flag():
    p = plan(engine="cpu", facts=rtxpro_x8(), profile=shipped_profile("minimax_m25"))
    assert not [a for a in p["args"] if "numa" in a]


# --------------------------------------------------------------------------- the engine gate

def test_the_engine_gate_compares_the_latency_workload_by_the_rate_and_the_medians():
    gate = plan(facts=rtxpro_x8(), start="always")["engine_gate"]
    assert gate["enabled"] and gate["why"] == "" and gate["problems"] == []
    assert (gate["warn"], gate["fail"]) == (0.10, 0.25)
    assert gate["metrics"] == ["output_tok_s", "ttft_p50_ms", "itl_p50_ms"]
    assert {k: gate["scenario"][k] for k in ("name", "input_len", "output_len", "num_prompts", "max_concurrency")} == {
        "name": "latency", "input_len": 1024, "output_len": 256, "num_prompts": 16, "max_concurrency": 1}
    assert gate["describe"] == "latency: 16 prompts, 1 at a time, 1024 in / 256 out, seed 301"


def test_the_engine_gate_is_off_when_switched_off_or_when_nothing_starts():
    off = plan(facts=rtxpro_x8(), start="always", vllm_service_engine_gate=False)["engine_gate"]
    assert not off["enabled"] and "vllm_service_engine_gate is false" in off["why"]
    idle = plan(facts=rtxpro_x8(), start="never")["engine_gate"]
    assert not idle["enabled"] and idle["why"] == "the service does not start in this run"


@pytest.mark.parametrize("over, message", [
    ({"vllm_service_engine_gate_warn": 0.5, "vllm_service_engine_gate_fail": 0.2},
     "vllm_service_engine_gate_warn (0.5) must not be above vllm_service_engine_gate_fail (0.2)"),
    ({"vllm_service_engine_gate_fail": 0.0}, "vllm_service_engine_gate_fail must be a regression above 0"),
    ({"vllm_service_engine_gate_metrics": ["ttft_p50_ms", "tokens_per_dollar"]},
     "vllm_service_engine_gate_metrics must name at least one of output_tok_s"),
    ({"vllm_service_engine_gate_metrics": []}, "vllm_service_engine_gate_metrics must name at least one of"),
    ({"vllm_service_engine_gate_prompts": 0}, "vllm_service_engine_gate_prompts must be a whole number of at least 1"),
])
def test_an_engine_gate_that_cannot_judge_is_refused_naming_the_variable(over, message):
    with pytest.raises(ValueError) as err:
        plan(facts=rtxpro_x8(), start="always", **over)
    assert message in str(err.value)


def test_the_gates_requests_must_fit_the_units_length_unless_it_is_off():
    # The profile's length (Kimi-K2.5: 262144) or the one given.
    result = plan_result(facts=rtxpro_x8(), start="always", max_model_len=1024)
    assert ("vllm_service: the engine gate's requests need 1024 + 256 tokens (and 16 spare) but the unit serves "
            "--max-model-len 1024: lower vllm_service_engine_gate_input_len or vllm_service_engine_gate_output_len"
            in result["problems"])
    assert not plan_result(facts=rtxpro_x8(), start="always", max_model_len=1024,
                           vllm_service_engine_gate=False)["problems"]


def test_a_host_name_the_node_cannot_resolve_is_refused_before_any_change():
    """Issue 41, class 5: nginx -t refused it only after the run had changed the node; the role's check (and preflight)
    look vllm_service_host up on the node (ansible.builtin.getent) and hand the plan its facts."""
    from ansible_collections.moeops.inference.plugins.module_utils._roles import vllm_service
    front = {"enabled": True}
    assert vllm_service.host_lookup_problems("gpu7.lab.example", {"name": "gpu7.lab.example", "ahosts": {"gpu7.lab.example": None}}, front) == [
        "vllm_service_host 'gpu7.lab.example' does not resolve on the node (getent ahosts finds no address): the "
        "front's nginx (listen) binds it at start and would fail there, after this run had changed the node; use an "
        "address, or a name the node resolves"]
    assert "vLLM (--host)" in vllm_service.host_lookup_problems("h", {"name": "h", "ahosts": {"h": None}}, {"enabled": False})[0]
    # Resolved, not looked up, or looked up for another value (a stale register): nothing to say.
    for lookup in ({"name": "h", "ahosts": {"10.0.0.7": [["STREAM", "h"]]}}, None, {"name": "other", "ahosts": {"other": None}},
                   {"name": "h"}):
        assert vllm_service.host_lookup_problems("h", lookup, front) == []
