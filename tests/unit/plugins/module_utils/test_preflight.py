# -*- coding: utf-8 -*-
"""Preflight checks over the constructed GPU topologies (CONSTRUCTED fixtures, see
tests/fixtures/gpu/README.md) and the shipped model profiles and role argument specs."""
from __future__ import annotations

import copy
import inspect
import json
import os
import re

import pytest
import role_templating
import yaml
from ansible.module_utils.testing import patch_module_args
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._roles import preflight as pf
from ansible_collections.moeops.inference.plugins.module_utils._common import role_inputs
from ansible_collections.moeops.inference.plugins.modules import preflight as preflight_module
from conftest import SPEC_ROLES as ROLES
from conftest import ExitJson, FailJson
from conftest import load_json
from conftest import role_spec as spec
from conftest import shipped_profile as profile

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
GB = 10 ** 9


def facts(name):
    return topo.from_snapshot(load_json("constructed", name + ".json"), name)


DEBIAN12 = {"distribution": "Debian", "version": "12.8", "major_version": "12", "os_family": "Debian"}


def run(**kw):
    inputs = dict(distro=DEBIAN12, gpu_facts=facts("rtxpro6000-x8-2numa"), profile=profile("kimi_k25"),
                  driver_branch=580, installs_driver=True,
                  weights={"path": "/var/cache/vllm/huggingface/hub/models--moonshotai--Kimi-K2.5",
                           "present_bytes": 0, "free_bytes": 2000 * GB})
    inputs.update(kw)
    return pf.run_preflight(inputs)


def test_kimi_fits_on_8x_rtx_pro_6000():
    report = run()
    assert report["problems"] == [] and report["warnings"] == []
    assert report["checked"]["tensor_parallel_size"] == 8 and report["checked"]["gpus"] == 8


def test_kimi_refused_on_4x_rtx_pro_6000():
    problems = run(gpu_facts=facts("rtxpro6000-x4-1numa"))["problems"]
    assert problems == [
        "GPU memory: 4 x 102.6 GB at gpu_memory_utilization 0.92 gives 378 GB, but profile kimi-k2.5-int4 needs at "
        "least 714 GB (min_gpu_memory_gb). Use at least 8 such GPUs (tensor parallel), or a smaller model/quantization."]


@pytest.mark.parametrize("gpus, fits", [(4, False), (5, False), (6, True), (8, True)])
def test_glm5_memory_floor_on_rtx_pro_6000(gpus, fits):
    # The profile's 520 GB at 0.90: the community's fewest RTX PRO 6000 for GLM-5 NVFP4 is 6 (TP 2 x PP 3).
    # By memory alone 6 hold it; the advice names 8, the fewest its 64 heads can be split over on one node.
    glm5 = profile("glm5")
    dims = {"num_attention_heads": glm5["num_attention_heads"], "num_key_value_heads": glm5["num_key_value_heads"]}
    result = pf.check_memory(facts("rtxpro6000-x8-2numa"), gpus, glm5["gpu_memory_utilization"],
                             glm5["min_gpu_memory_gb"], glm5["name"],
                             lambda n: pf.tensor_parallel_refusals(n, dims, glm5))
    assert (result["problems"] == []) is fits
    if not fits:
        assert result["problems"][0].endswith(
            "Use at least 8 such GPUs (tensor parallel 8: 6 would hold it, but tensor parallel 6 does not divide the "
            "model's 64 attention heads and cannot split or replicate its 64 key/value heads evenly), or a smaller "
            "model/quantization.")


def test_memory_advice_without_a_size_the_model_allows():
    # Only sizes 4 and 8 allowed, and 9 GPUs' worth of memory needed: no size from 9 up suits.
    p = dict(profile("minimax_m25"), tensor_parallel_sizes=[4, 8], min_gpu_memory_gb=800)
    dims = {"num_attention_heads": 48, "num_key_value_heads": 8}
    problems = pf.check_memory(facts("rtxpro6000-x8-2numa"), 8, 0.9, 800, p["name"],
                               lambda n: pf.tensor_parallel_refusals(n, dims, p))["problems"]
    assert problems[0].endswith(
        "9 such GPUs would hold it, but no tensor-parallel size from 9 up suits the model (at 9 it does not divide "
        "the model's 48 attention heads and cannot split or replicate its 8 key/value heads evenly and is not one of "
        "the profile's tensor_parallel_sizes (4, 8)): use a smaller model/quantization.")
    # Without the head rule and the size list, any count will do.
    plain = dict(p, tensor_parallel_sizes=[], tensor_parallel_divides_attention_heads=False)
    assert pf.check_memory(facts("rtxpro6000-x8-2numa"), 8, 0.9, 800, p["name"],
                           lambda n: pf.tensor_parallel_refusals(n, dims, plain))["problems"][0].endswith(
        "Use at least 9 such GPUs (tensor parallel), or a smaller model/quantization.")


def test_memory_counts_only_the_tensor_parallel_gpus_and_the_utilization():
    assert run(tensor_parallel_size=4)["problems"][0].startswith("GPU memory: 4 x 102.6 GB")
    assert run(gpu_memory_utilization=0.5)["problems"][0].startswith("GPU memory: 8 x 102.6 GB at gpu_memory_utilization 0.50")


def test_mixed_gpus_refused_unless_the_profile_allows_them():
    mixed = facts("mixed-x2")
    small = dict(profile("minimax_m25"), min_gpu_memory_gb=1, min_compute_capability="8.0")
    problems = run(gpu_facts=mixed, profile=small)["problems"]
    assert len(problems) == 1 and problems[0].startswith("GPUs of different models on one host (")
    assert "allow_mixed_gpus: true" in problems[0]
    assert run(gpu_facts=mixed, profile=dict(small, allow_mixed_gpus=True))["problems"] == []


@pytest.mark.parametrize("tp,needle", [
    (3, "vllm_service_tensor_parallel_size 3 does not divide the model's 64 attention heads"),
    (16, "vllm_service_tensor_parallel_size 16 is larger than the 8 GPU(s) on this host"),
    (0, "vllm_service_tensor_parallel_size: must be a positive integer, got 0"),
    ("abc", "vllm_service_tensor_parallel_size: must be a positive integer, got 'abc'"),
])
def test_tensor_parallel_refusals(tp, needle):
    problems = run(tensor_parallel_size=tp)["problems"]
    assert any(p.startswith(needle) for p in problems), problems


def test_tensor_parallel_sizes_of_the_profile():
    p = dict(profile("minimax_m25"), tensor_parallel_sizes=[4, 8], min_gpu_memory_gb=100)
    assert run(profile=p, tensor_parallel_size=2, weights={})["problems"] == [
        "vllm_service_tensor_parallel_size 2 is not one of the sizes profile minimax-m2.5-fp8 supports "
        "(tensor_parallel_sizes: 4, 8)."]


def test_key_value_heads_checked_too():
    # MiniMax-M2.5: 48 heads, 8 KV heads; TP 6 divides 48 but cannot split 8 KV heads.
    dims = {"num_attention_heads": 48, "num_key_value_heads": 8, "sources": {"num_attention_heads": "profile"}}
    problems = pf.check_tensor_parallel(6, 8, dims, profile("minimax_m25"))["problems"]
    assert problems and "cannot split or replicate its 8 key/value heads evenly" in problems[0]
    assert pf.check_tensor_parallel(8, 8, dims, profile("minimax_m25"))["problems"] == []


def test_driver_branch_against_compute_capability():
    assert run(driver_branch=560)["problems"] == [
        "nvidia_driver_branch 560 cannot drive compute capability 12.0 (Blackwell (CUDA 12.8) needs branch 570 or "
        "newer, open kernel modules). Set nvidia_driver_branch to 570 or later (580 is the default)."]
    old = copy.deepcopy(facts("rtxpro6000-x8-2numa"))
    old["driver_version"] = "565.57.01"
    # The run installs 580: the old loaded driver will be replaced.
    assert run(gpu_facts=old)["problems"] == []
    problems = run(gpu_facts=old, installs_driver=False)["problems"]
    assert len(problems) == 1 and problems[0].startswith("the loaded driver 565.57.01 (branch 565) cannot drive")
    # Hopper is fine on 535.
    assert pf.check_driver(facts("h100sxm-x8-nvswitch"), 535, True)["problems"] == []
    assert pf.min_driver_branch("8.9") == (520, "Ada Lovelace (CUDA 11.8)")


def test_nvfp4_needs_blackwell():
    problems = run(gpu_facts=facts("l40s-x8-2switch-2numa"), profile=profile("glm5"), weights={})["problems"]
    assert any(p.startswith("profile glm-5-nvfp4 needs compute capability 10.0 or newer") for p in problems)


def test_disk():
    problems = run(weights={"path": "/w", "present_bytes": 0, "free_bytes": 100 * GB, "mount": "/"})["problems"]
    assert problems == ["disk: /w (filesystem at /) has 100.0 GB free, but the weights need 624.8 GB more "
                        "(0.0 GB of 595.0 GB already there, plus 5% headroom). Free space there, or put the weights "
                        "on a larger filesystem (vllm_hf_home / the profile's source)."]
    # Already there: no space needed.
    assert run(weights={"path": "/w", "present_bytes": 595 * GB, "free_bytes": 0})["problems"] == []
    # Resumed download: only the rest counts.
    assert run(weights={"path": "/w", "present_bytes": 500 * GB, "free_bytes": 100 * GB})["problems"] == []


def test_p2p_unsupported_is_a_warning_only():
    small = dict(profile("minimax_m25"), min_gpu_memory_gb=50)
    report = run(gpu_facts=facts("rtx4090-x4-p2p-unsupported"), profile=small, weights={})
    assert report["problems"] == []
    assert len(report["warnings"]) == 1
    w = report["warnings"][0]
    for needle in ("P2P:", "ACS", "IOMMU", "nvidia-smi topo -p2p r", "lspci -vvv | grep ACSCtl"):
        assert needle in w


@pytest.mark.parametrize("distro,ok,needle", [
    ({"distribution": "Ubuntu", "version": "24.04", "major_version": "24"}, True, ""),
    ({"distribution": "Ubuntu", "version": "22.04", "major_version": "22"}, True, ""),
    ({"distribution": "Debian", "version": "13.1", "major_version": "13"}, True, ""),
    ({"distribution": "Ubuntu", "version": "20.04", "major_version": "20"}, False, "Ubuntu 22.04 and 24.04 are"),
    ({"distribution": "Debian", "version": "11.9", "major_version": "11"}, False, "Debian 12 and 13 are"),
    ({"distribution": "Rocky", "version": "9.4", "major_version": "9", "os_family": "RedHat"}, False, "RHEL family"),
    ({"distribution": "Archlinux", "version": "rolling", "major_version": "rolling"}, False, "is not supported"),
])
def test_distro(distro, ok, needle):
    problems = pf.check_distro(distro["distribution"], distro["version"], distro["major_version"],
                               distro.get("os_family", ""))["problems"]
    assert (problems == []) is ok and (ok or needle in problems[0])


def test_no_gpu_is_a_warning_unless_required():
    none = topo.no_gpu_facts("no driver loaded")
    report = run(gpu_facts=none)
    assert report["problems"] == [] and "GPU checks (memory, tensor parallel, driver, P2P) are skipped" in report["warnings"][0]
    assert run(gpu_facts=none, gpus_required=True)["problems"][0].startswith("no NVIDIA GPU could be read")


def test_role_inputs_against_the_real_specs():
    specs = {"vllm_service": spec("vllm_service"), "vllm": spec("vllm")}
    values = {"vllm_service": {"vllm_service_port": 70000, "vllm_service_start": "sometimes",
                               "vllm_service_nccl_overrides": {"NCCL_PROTO": 1, "NCCL_ALGO": None, "nccl bad": "x"},
                               "vllm_service_environment": {"CUDA_VISIBLE_DEVICES": 0},
                               "vllm_service_restart_sec": "soon", "vllm_service_profile": "kimi_k25"},
              "vllm": {"vllm_venv": "opt/vllm/venv", "vllm_ca_bundle": "", "vllm_extra_packages": "vllm==1"}}
    report = run(role_specs=specs, role_values=values)
    text = "\n".join(report["problems"])
    assert "vllm_service: vllm_service_port must be a TCP port in 1-65535, got 70000" in text
    assert "vllm_service: value of vllm_service_start must be one of: auto, always, never, got: sometimes" in text
    assert 'vllm_service_nccl_overrides.NCCL_PROTO must be a string (quote it in YAML: "1")' in text
    assert "vllm_service_nccl_overrides key 'nccl bad' is not an environment variable name" in text
    assert "NCCL_ALGO" not in text  # null removes: fine
    assert "vllm_service_environment.CUDA_VISIBLE_DEVICES must be a string" in text
    assert "vllm_service_restart_sec" in text and "int" in text
    assert "vllm: vllm_venv must be an absolute path, got 'opt/vllm/venv'" in text
    assert "vllm_ca_bundle" not in text  # empty is its default
    # A list given as a string (as -e gives it) would be split by the spec's conversion: refused, with the way out.
    assert ("vllm: vllm_extra_packages must be a list, got the string 'vllm==1'; from the command line pass JSON: "
            "-e '{\"vllm_extra_packages\": [\"...\"]}'") in text
    assert len(report["problems"]) == 8, report["problems"]


def test_unknown_role_variables_warn_with_a_suggestion():
    specs = {"vllm_service": spec("vllm_service"), "vllm": spec("vllm")}
    report = run(role_specs=specs, variable_names=["vllm_service_prot", "vllm_versoin", "vllm_model_profile", "other"],
                 known_other_variables=["vllm_model_profile"])
    assert report["warnings"] == [
        "vllm_service_prot is set but is not an option of role vllm_service (did you mean vllm_service_port?); "
        "it has no effect.",
        "vllm_versoin is set but is not an option of role vllm (did you mean vllm_version?); it has no effect."]


def test_every_problem_reported_at_once():
    report = run(gpu_facts=facts("rtxpro6000-x4-1numa"), tensor_parallel_size=3, driver_branch=550,
                 distro={"distribution": "Ubuntu", "version": "20.04", "major_version": "20"},
                 weights={"path": "/w", "present_bytes": 0, "free_bytes": GB},
                 profile_error="moeops_model: unknown model profile x")
    starts = [p.split(" ")[0] for p in report["problems"]]
    assert starts == ["distribution", "moeops_model:", "vllm_service_tensor_parallel_size", "GPU",
                      "nvidia_driver_branch", "disk:"], report["problems"]


def test_weights_dir_is_read(tmp_path):
    snap = tmp_path / "hub" / "models--org--m"
    (snap / "blobs").mkdir(parents=True)
    (snap / "snapshots" / "abc").mkdir(parents=True)
    (snap / "blobs" / "w1").write_bytes(b"x" * 1000)
    (snap / "blobs" / "cfg").write_text('{"hidden_size": 3072, "num_attention_heads": 48}')
    os.symlink(str(snap / "blobs" / "w1"), str(snap / "snapshots" / "abc" / "model.safetensors"))
    os.symlink(str(snap / "blobs" / "cfg"), str(snap / "snapshots" / "abc" / "config.json"))
    got = pf.read_weights_dir(str(snap))
    assert got["present_bytes"] == 1000 + len('{"hidden_size": 3072, "num_attention_heads": 48}')
    assert got["config"] == {"hidden_size": 3072, "num_attention_heads": 48}
    assert got["free_bytes"] > 0
    missing = pf.read_weights_dir(str(tmp_path / "not" / "yet"))
    assert missing["present_bytes"] == 0 and missing["config"] is None and missing["free_bytes"] > 0
    assert pf.weights_location("org/m", str(tmp_path)) == str(snap)
    assert pf.weights_location("/srv/m", "/x") == "/srv/m"


def test_config_json_dimensions_win(tmp_path):
    # A config.json with 60 heads: TP 8 no longer divides them, whatever the profile says.
    report = run(weights={"path": "/w", "present_bytes": 0, "free_bytes": 2000 * GB,
                          "config": {"text_config": {"num_attention_heads": 60, "hidden_size": 7168}}})
    assert report["checked"]["dimensions"]["sources"]["num_attention_heads"] == "config.json"
    assert report["problems"][0].startswith("vllm_service_tensor_parallel_size 8 does not divide the model's 60")
    assert "head counts from config.json" in report["problems"][0]


def test_disk_not_checked_when_nothing_fetches_the_weights():
    report = run(check_disk=False, weights={"path": "/w", "present_bytes": 0, "free_bytes": GB})
    assert report["problems"] == []
    assert report["checked"]["weights"]["disk"].startswith("not checked: nothing fetches the weights")


def _line_breaking_values(opt, breaker):
    """A value of the option's own type that carries `breaker` where the role would write it out, and
    the place preflight must name (relative to the option); nothing for types a string cannot pass."""
    kind = opt.get("type", "str")
    text = "LL" + breaker + "ExecStartPre=/bin/sh -c id"
    if kind in ("str", "path", "raw"):
        return [(text if kind != "path" else "/opt/x" + breaker + "ExecStartPre=+/bin/id", "")]
    if kind == "list":
        return [(["ok", text], "[1]")]
    if kind == "dict":
        return [({"NCCL_PROTO": text}, ".NCCL_PROTO"), ({"KEY" + breaker + "X": "v"}, " key ")]
    return []


@pytest.mark.parametrize("breaker, what", [("\n", "a newline"), ("\r", "a carriage return"), ("\0", "a NUL byte")])
def test_every_option_of_every_role_refuses_a_line_break(breaker, what):
    """Generated from the argument specs: every option whose type can carry a string, of every role, is
    refused by preflight when a string in it (a dict's key or value, a list's item) spans lines."""
    covered = []
    for role in ROLES:
        options = spec(role)
        for name, opt in sorted(options.items()):
            for value, place in _line_breaking_values(opt, breaker):
                report = pf.run_preflight({"role_specs": {role: options}, "role_values": {role: {name: value}}})
                wanted = [p for p in report["problems"]
                          if p.startswith("%s: %s%s" % (role, name, place)) and ("contains " + what) in p]
                assert wanted, (role, name, value, report["problems"])
                # The value is never echoed, by this message or any other (the spec's choices, the semantic rules).
                assert "ExecStartPre" not in " ".join(report["problems"]), report["problems"]
                covered.append((role, name))
    # Every role's string-carrying options, not a handful: 94 role/option pairs once the second spellings
    # (vllm_service_venv, model_weights_user, the *_gpu_facts, ...) were removed; a shared name such as
    # vllm_user counts once for each role that declares it.
    assert len(set(covered)) >= 94, sorted(set(covered))


def test_pcie_host_findings_are_warnings_with_their_remedy(seed_host_facts):
    report = pf.run_preflight({"gpu_facts": seed_host_facts, "profile": profile("kimi_k25")})
    pcie = [w for w in report["warnings"] if w.startswith("PCIe host ")]
    want = ["PCIe host iommu"] + ["PCIe host acs"] * 8 + ["PCIe host hmm", "PCIe host pcie_port_pm"]
    assert [w.split(":")[0] for w in pcie] == want
    assert "remedy: options nvidia_uvm uvm_disable_hmm=1" in pcie[9]
    assert not any("PCIe" in p for p in report["problems"])
    assert [f["check"] for f in report["checked"]["pcie_host"] if f["result"] == "ok"] == ["bar1", "link_width"]
    # A blocking finding would be a problem: none of the rules blocks (docs/pcie-host-facts.md).
    assert all(f["result"] != "blocking" for f in report["checked"]["pcie_host"])


def test_line_safety_names_the_place_and_keeps_clean_values():
    assert role_inputs.line_safety_problems("v", {"A": ["x", {"B": "y\r\nz"}], "C": "fine"}) == [
        "v.A[1].B contains a newline (\\n) and a carriage return (\\r): no value may span lines "
        "(systemd reads each line as a directive)"]
    assert role_inputs.line_safety_problems("v", {"A": "LL", "B": ["Ring", 8, None, True]}) == []


@pytest.mark.parametrize("gmu", [-0.5, 0, 1.5])
def test_utilisation_out_of_range_is_named_once_without_memory_advice(gmu):
    specs = {"vllm_service": spec("vllm_service")}
    report = run(gpu_memory_utilization=gmu, role_specs=specs,
                 role_values={"vllm_service": {"vllm_service_gpu_memory_utilization": gmu,
                                               "vllm_service_profile": "kimi_k25"}})
    assert report["problems"] == [
        "vllm_service: vllm_service_gpu_memory_utilization must be above 0 and at most 1 (null takes the profile's), "
        "got %r" % gmu], report["problems"]


# --- what this run will do, decided from the roles' variables (was the role's Jinja in vars/main.yml) ---------

NO_HARDWARE = {"backend": "snapshot", "count": 8, "from_hardware": False}  # a simulated node
HARDWARE = {"backend": "nvml", "count": 8, "from_hardware": True}


def decision_specs():
    return {"nvidia_driver": spec("nvidia_driver"), "model_weights": spec("model_weights"),
            "vllm_service": spec("vllm_service")}


@pytest.mark.parametrize("source, facts_, expected", [
    ("hf", NO_HARDWARE, True),       # the role downloads them
    ("http", NO_HARDWARE, True),
    ("rsync", NO_HARDWARE, True),
    ("local", NO_HARDWARE, False),   # used where they are: nothing needs room
    ("local", HARDWARE, False),      # ... and vLLM loads that directory, not a repo id
    ("none", NO_HARDWARE, False),    # a simulated node never starts vLLM, so nothing downloads
    ("none", HARDWARE, True),        # vLLM downloads the repo id when the service starts
])
def test_auto_checks_the_disk_only_when_this_run_fetches_weights(source, facts_, expected):
    assert pf.disk_check_decision("auto", source, "auto", facts_["from_hardware"]) is expected
    # The same through the module's decisions, from the variables it is sent and the GPU facts.
    assert pf.decide(decision_specs(), {"model_weights_source": source}, facts_, None)["check_disk"] is expected


def test_always_and_never_win():
    assert pf.disk_check_decision("always", "local", "auto", False) is True
    assert pf.disk_check_decision("never", "hf", "auto", True) is False
    assert pf.decide(decision_specs(), {"model_weights_source": "local"}, NO_HARDWARE, None, "always")["check_disk"]
    assert not pf.decide(decision_specs(), {"model_weights_source": "hf"}, HARDWARE, None, "never")["check_disk"]


@pytest.mark.parametrize("start, hardware, expected", [
    ("always", False, True),   # the service starts even on a simulated node: vLLM downloads at start
    ("never", True, False),    # it never starts: nothing downloads
    ("auto", True, True),
    ("auto", False, False),
])
def test_auto_follows_whether_the_service_starts(start, hardware, expected):
    assert pf.disk_check_decision("auto", "none", start, hardware) is expected
    facts_ = HARDWARE if hardware else NO_HARDWARE
    assert pf.decide(decision_specs(), {"vllm_service_start": start}, facts_, None)["check_disk"] is expected


def test_unset_variables_take_the_role_defaults():
    # model_weights_source none and vllm_service_start auto are the roles' defaults: the hardware decides.
    assert pf.decide(decision_specs(), {}, HARDWARE, None)["check_disk"] is True
    assert pf.decide(decision_specs(), {}, NO_HARDWARE, None)["check_disk"] is False
    # Without the roles' specs the same defaults hold.
    assert pf.decide({}, {}, HARDWARE, None)["check_disk"] is True


def test_gpus_from_hardware_is_the_facts_own_flag_else_the_backend_rule():
    assert pf.gpus_from_hardware({"backend": "nvml", "count": 8, "from_hardware": False}) is False
    assert pf.gpus_from_hardware({"backend": "snapshot", "count": 8, "from_hardware": True}) is True
    assert pf.gpus_from_hardware({"backend": "nvml", "count": 8}) is True        # facts from before the flag
    assert pf.gpus_from_hardware({"backend": "nvidia_smi", "count": 0}) is False
    assert pf.gpus_from_hardware({"backend": "snapshot", "count": 8}) is False
    assert pf.gpus_from_hardware({}) is False
    assert pf.gpus_from_hardware(facts("rtxpro6000-x8-2numa")) is False  # a constructed double, replayed


@pytest.mark.parametrize("variables, branch, installs", [
    ({}, 580, True),                                                 # the nvidia_driver role's defaults
    ({"nvidia_driver_branch": 560}, 560, True),
    ({"nvidia_driver_branch": "570"}, 570, True),                    # as -e gives it
    ({"nvidia_driver_branch": "latest"}, None, True),                # the role-input check names it
    ({"nvidia_driver_branch": True}, None, True),
    ({"nvidia_driver_install_packages": False}, 580, False),         # decides and renders only
    ({"nvidia_driver_install_packages": "no"}, 580, False),
    ({"nvidia_driver_install_packages": "yes"}, 580, True),
])
def test_driver_branch_and_install_when_the_driver_role_is_checked(variables, branch, installs):
    specs = {"nvidia_driver": spec("nvidia_driver")}
    assert pf.planned_driver_branch(specs, variables) == branch
    assert pf.installs_driver(specs, variables) is installs
    got = pf.decide(specs, variables, {}, None)
    assert (got["driver_branch"], got["installs_driver"]) == (branch, installs)


def test_no_driver_decision_without_the_driver_role():
    specs = {"vllm_service": spec("vllm_service")}
    variables = {"nvidia_driver_branch": 580, "nvidia_driver_install_packages": True}
    assert pf.planned_driver_branch(specs, variables) is None
    assert pf.installs_driver(specs, variables) is False
    # A checked role whose spec has no default: nothing to install from, packages by the role's rule.
    assert pf.planned_driver_branch({"nvidia_driver": {}}, {}) is None
    assert pf.installs_driver({"nvidia_driver": {}}, {}) is True


def test_driver_decisions_reach_the_driver_check():
    old = copy.deepcopy(facts("rtxpro6000-x8-2numa"))
    old["driver_version"] = "565.57.01"
    specs = {"nvidia_driver": spec("nvidia_driver")}
    got = pf.decide(specs, {}, old, profile("kimi_k25"))
    assert run(gpu_facts=old, driver_branch=got["driver_branch"], installs_driver=got["installs_driver"])["problems"] == []
    got = pf.decide(specs, {"nvidia_driver_install_packages": False}, old, profile("kimi_k25"))
    problems = run(gpu_facts=old, driver_branch=got["driver_branch"], installs_driver=got["installs_driver"])["problems"]
    assert len(problems) == 1 and problems[0].startswith("the loaded driver 565.57.01 (branch 565) cannot drive")


KIMI_HF = "/var/cache/vllm/huggingface/hub/models--moonshotai--Kimi-K2.5"


@pytest.mark.parametrize("override, variables, expected", [
    # the explicit preflight_weights_path wins over everything
    ("/srv/w", {"vllm_service_model_path": "/m", "model_weights_source": "local", "model_weights_local_path": "/l"},
     "/srv/w"),
    # then vllm_service_model_path
    ("", {"vllm_service_model_path": "/m", "model_weights_source": "http", "model_weights_dest": "/d"}, "/m"),
    # a mirror: its destination, else /var/cache/vllm/models/<model_weights_name or the profile's name>
    ("", {"model_weights_source": "http", "model_weights_dest": "/d"}, "/d"),
    ("", {"model_weights_source": "rsync", "model_weights_dest": "/d"}, "/d"),
    ("", {"model_weights_source": "http", "model_weights_name": "kimi-mine"}, "/var/cache/vllm/models/kimi-mine"),
    ("", {"model_weights_source": "rsync"}, "/var/cache/vllm/models/kimi-k2.5-int4"),
    ("", {"model_weights_source": "rsync", "model_weights_dest": "", "model_weights_name": ""},
     "/var/cache/vllm/models/kimi-k2.5-int4"),
    # a local source is used where it is
    ("", {"model_weights_source": "local", "model_weights_local_path": "/l"}, "/l"),
    ("", {"model_weights_source": "local"}, ""),
    # nothing staged to a place of its own: the caller takes the profile's source
    ("", {"model_weights_source": "hf", "model_weights_dest": "/d", "model_weights_local_path": "/l"}, ""),
    ("", {"model_weights_source": "none"}, ""),
    ("", {}, ""),
    # null (or a value of the wrong type, which the role-input check reports) is no path
    ("", {"vllm_service_model_path": None, "model_weights_source": "local", "model_weights_local_path": "/l"}, "/l"),
    ("", {"vllm_service_model_path": ["/m"]}, ""),
])
def test_weights_path_rule(override, variables, expected):
    kimi = profile("kimi_k25")
    assert pf.weights_path(override, decision_specs(), variables, kimi) == expected
    # decide falls back to the profile's source: the Hugging Face cache's directory for its repository.
    assert pf.decide(decision_specs(), variables, {}, kimi, weights_override=override)["weights_path"] == \
        (expected or KIMI_HF)


def test_weights_path_without_a_profile_or_a_name():
    assert pf.weights_path("", {}, {"model_weights_source": "http"}, None) == "/var/cache/vllm/models/"
    assert pf.decide({}, {}, {}, None)["weights_path"] == ""
    assert pf.decide({}, {}, {}, "not a profile")["weights_path"] == ""
    local = dict(profile("kimi_k25"), source="/srv/models/kimi")
    assert pf.decide({}, {}, {}, local)["weights_path"] == "/srv/models/kimi"
    assert pf.decide({}, {}, {}, profile("kimi_k25"), hf_home="/hf")["weights_path"] == \
        "/hf/hub/models--moonshotai--Kimi-K2.5"


def test_a_weights_path_that_spans_lines_is_neither_read_nor_measured():
    specs = {"model_weights": spec("model_weights")}
    got = pf.decide(specs, {"model_weights_source": "http", "model_weights_dest": "/opt/x\nExecStartPre=/bin/id"}, {},
                    profile("kimi_k25"), disk_check="always")
    assert (got["weights_path"], got["check_disk"]) == ("", False)


def test_disk_not_checked_by_choice_says_so():
    report = run(check_disk=False, disk_check="never", weights={"path": "/w", "present_bytes": 0, "free_bytes": GB})
    assert report["problems"] == []
    assert report["checked"]["weights"]["disk"] == "not checked: preflight_disk_check is never"


# --- the module: decides from its variables; secrets never reach it ----------------------------------------------

def run_module(args):
    with patch_module_args(args):
        with pytest.raises((ExitJson, FailJson)) as exc:
            preflight_module.main()
    return exc.type, exc.value.args[0]


@pytest.mark.usefixtures("module_exits")
def test_module_decides_from_its_variables(tmp_path):
    specs = decision_specs()
    kind, result = run_module({
        "gpu_facts": dict(facts("rtxpro6000-x8-2numa"), from_hardware=False), "profile": profile("kimi_k25"),
        "role_specs": specs, "fail_on_problems": False,
        "variables": {"nvidia_driver_branch": 560, "model_weights_source": "local",
                      "model_weights_local_path": str(tmp_path / "kimi")}})
    assert kind is ExitJson
    assert result["checked"]["decisions"] == {"driver_branch": 560, "installs_driver": True, "check_disk": False,
                                              "weights_path": str(tmp_path / "kimi")}
    assert result["checked"]["weights"]["path"] == str(tmp_path / "kimi")
    assert any(p.startswith("nvidia_driver_branch 560 cannot drive compute capability 12.0") for p in result["problems"])
    # The explicit path and the mode win.
    kind, result = run_module({"gpu_facts": {}, "profile": profile("kimi_k25"), "weights_path": str(tmp_path),
                               "disk_check": "always", "role_specs": specs, "fail_on_problems": False})
    assert kind is ExitJson
    assert result["checked"]["decisions"] == {"driver_branch": 580, "installs_driver": True, "check_disk": True,
                                              "weights_path": str(tmp_path)}


@pytest.mark.usefixtures("module_exits")
def test_module_checks_the_secrets_without_showing_them():
    kind, result = run_module({
        "gpu_facts": {}, "profile": profile("kimi_k25"), "fail_on_problems": False,
        "role_specs": {"vllm_service": spec("vllm_service"), "model_weights": spec("model_weights")},
        "variables": {"vllm_service_port": 8001},
        "secret_variables": {"vllm_service_api_key": "sk-1\nExecStartPre=/bin/id", "model_weights_token": "hf 2"},
        "secret_variable_names": ["vllm_service_apikey"]})
    assert kind is ExitJson
    said = " ".join(result["problems"] + result["preflight_warnings"])
    assert "vllm_service: vllm_service_api_key contains a newline" in said
    assert "did you mean vllm_service_api_key?" in said
    assert "sk-1" not in said and "ExecStartPre" not in said and "hf 2" not in said


@pytest.mark.usefixtures("module_exits")
@pytest.mark.parametrize("option, value", [("driver_branch", 580), ("installs_driver", True), ("check_disk", False),
                                           ("disk_check", "sometimes")])
def test_module_refuses_the_options_it_decides_itself(option, value):
    kind, result = run_module({option: value})
    assert kind is FailJson and option in result["msg"]


def module_task():
    with open(os.path.join(role_templating.ROLES, "preflight", "tasks", "main.yml")) as f:
        return next(t for t in yaml.safe_load(f) if "moeops.inference.preflight" in t)


SECRETS = {
    "vllm_service_hf_token": "hf_SECRET_1",               # no_log options of the real specs
    "vllm_service_api_key": "SECRET_2",
    "model_weights_token": "SECRET_3",                    # by name only
    "vllm_index_password": "SECRET_4",
    "model_weights_mirror_secret": "SECRET_5",
    "nvidia_driver_repo_api_key": "SECRET_6",
    "gpu_facts_other_token": {"nested": "SECRET_7"},
    "vllm_service_apikey": "sk-SECRET_9",                 # a typo of vllm_service_api_key
}


def module_args(specs=None, **variables):
    """The preflight module's arguments as the role's task renders them (its vars over the role's
    defaults and vars, over `variables` as inventory would set them)."""
    task = module_task()
    data = role_templating.role_vars("preflight", **variables)
    data.update(ansible_facts={"distribution": "Debian", "distribution_version": "12.8",
                               "distribution_major_version": "12", "os_family": "Debian", "nvidia_gpu": HARDWARE},
                _preflight_profile=profile("kimi_k25"), _preflight_profile_error="")
    data.update(role_templating.trusted(task["vars"]))
    if specs is not None:
        data["_preflight_role_specs"] = specs
    return Templar(loader=DataLoader(), variables=data).template(role_templating.trusted(task["moeops.inference.preflight"]))


def module_no_log_options():
    return sorted(re.findall(r"(\w+)=dict\([^)]*no_log=True", inspect.getsource(preflight_module.main)))


def test_secrets_go_only_in_the_no_log_option():
    args = module_args(vllm_service_port=8001, nvidia_driver_branch=575, model_weights_source="http", **SECRETS)
    # The no_log options of the specs go in secret_variables, which the module declares no_log (Ansible masks it
    # in the invocation and in any output); nothing else carries a secret.
    no_log = ("vllm_service_hf_token", "vllm_service_api_key", "model_weights_token")
    assert args["secret_variables"] == {k: SECRETS[k] for k in no_log}
    assert module_no_log_options() == ["secret_variables"]
    sent = json.dumps({k: v for k, v in args.items() if k != "secret_variables"}, default=str)
    assert "SECRET" not in sent, [k for k in args["variables"] if "SECRET" in json.dumps(args["variables"][k])]
    assert not set(SECRETS) & set(args["variables"])
    # ... while everything else with a checked role's prefix is, so the module can decide from it.
    assert args["variables"]["vllm_service_port"] == 8001
    assert args["variables"]["nvidia_driver_branch"] == 575
    assert args["variables"]["model_weights_source"] == "http"
    assert args["variables"]["vllm_service_profile"] == "kimi_k25"  # the role's default
    assert sorted(args["role_specs"]) == sorted(args_roles() + ["preflight"])
    assert args["disk_check"] == "auto" and args["weights_path"] == ""
    # A secret-looking name that is no option goes by name only, so the typo still gets its warning.
    assert sorted(args["secret_variable_names"]) == sorted(set(SECRETS) - set(no_log))
    names = sorted(set(args["variables"]) | set(args["secret_variable_names"]))
    report = pf.run_preflight({"role_specs": args["role_specs"], "variable_names": names})
    assert ("vllm_service_apikey is set but is not an option of role vllm_service (did you mean vllm_service_api_key?)"
            in " ".join(report["warnings"])), report["warnings"]


def args_roles():
    with open(os.path.join(role_templating.ROLES, "preflight", "defaults", "main.yml")) as f:
        return yaml.safe_load(f)["preflight_roles"]


def test_no_log_options_are_never_sent_whatever_their_name():
    specs = {"vllm_service": dict(spec("vllm_service"), vllm_service_session={"type": "str", "no_log": True},
                                  vllm_service_plain={"type": "str", "no_log": False})}
    args = module_args(specs=specs, preflight_roles=["vllm_service"], vllm_service_session="SECRET_8",
                       vllm_service_plain="shown")
    assert args["secret_variables"] == {"vllm_service_session": "SECRET_8"}
    assert "SECRET" not in json.dumps({k: v for k, v in args.items() if k != "secret_variables"}, default=str)
    assert args["variables"]["vllm_service_plain"] == "shown"
    assert "vllm_service_session" not in args["variables"]


def test_nothing_to_send_is_an_empty_mapping():
    args = module_args(specs={"ray_cluster": {}}, preflight_roles=["ray_cluster"])
    # Only the preflight role's own variables (its inputs are checked with the others'), none of ray_cluster's.
    assert sorted(args["variables"]) == sorted(k for k in role_templating.role_vars("preflight") if k.startswith("preflight_"))
