# -*- coding: utf-8 -*-
"""Preflight checks over the constructed GPU topologies (CONSTRUCTED fixtures, see
tests/fixtures/gpu/README.md) and the shipped model profiles and role argument specs."""
from __future__ import annotations

import copy
import os

import pytest

from ansible_collections.moeops.inference.plugins.module_utils import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils import preflight as pf
from ansible_collections.moeops.inference.plugins.module_utils import role_inputs
from conftest import SPEC_ROLES as ROLES
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
                               "vllm_service_restart_sec": "soon", "vllm_service_model": profile("kimi_k25")},
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
                assert "ExecStartPre" not in " ".join(wanted)  # the value is never echoed
                covered.append(name)
    # Every role's string-carrying options (100 when this was written), not a handful.
    assert len(set(covered)) >= 100, sorted(set(covered))


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
                                               "vllm_service_model": profile("kimi_k25")}})
    assert report["problems"] == [
        "vllm_service: vllm_service_gpu_memory_utilization must be above 0 and at most 1 (null takes the profile's), "
        "got %r" % gmu], report["problems"]
