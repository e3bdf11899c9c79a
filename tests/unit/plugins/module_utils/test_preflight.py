# -*- coding: utf-8 -*-
"""The rules a deploy checks before anything changes, each in its role (module_utils/_roles): the model's fit on the
GPUs (vllm_service), the driver branch (nvidia_driver), the PCIe host findings (pcie_host), the host itself
(preflight: distribution, room for the weights), over the constructed GPU topologies (CONSTRUCTED fixtures, see
tests/fixtures/gpu/README.md) and the shipped model profiles and role argument specs."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs
from ansible_collections.moeops.inference.plugins.module_utils._common.plan import plan_role
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._roles import preflight as pf
from ansible_collections.moeops.inference.plugins.module_utils._roles.vllm_service import fit as pf_fit
from conftest import SPEC_ROLES as ROLES
from conftest import load_json, role_inputs
from conftest import role_spec as spec
from conftest import shipped_profile as profile

GB = 10 ** 9
DEBIAN = {"distribution": "Debian", "distribution_version": "12", "distribution_release": "bookworm",
          "architecture": "x86_64", "kernel": "6.1.0-28-amd64"}


def facts(name):
    return topo.from_snapshot(load_json("constructed", name + ".json"), name)


def run(role="vllm_service", gpus=None, prof=None, **over):
    """One role's plan with all its rules, as the role_plan action runs it (the role's defaults and `over`)."""
    values = dict(role_inputs(role), **over)
    if role == "vllm_service":
        values.update(vllm_service_env_file="/etc/vllm/vllm.env", vllm_service_api_key_file="/etc/vllm/vllm.api-key")
    ctx = {"gpus": gpus if gpus is not None else facts("rtxpro6000-x8-2numa"), "facts": DEBIAN}
    if prof is not None:
        ctx["profile"] = prof
    result = plan_role(role, spec(role), values, sorted(values), spec_roles(), ctx)
    return {k: [m[len(role) + 2:] for m in result[k]] for k in ("problems", "warnings")}


def test_kimi_fits_on_8x_rtx_pro_6000():
    assert run() == {"problems": [], "warnings": []}


def test_kimi_refused_on_4x_rtx_pro_6000():
    assert run(gpus=facts("rtxpro6000-x4-1numa"))["problems"] == [
        "GPU memory: 4 x 102.6 GB at gpu_memory_utilization 0.92 gives 378 GB, but profile kimi-k2.5-int4 needs at "
        "least 714 GB (min_gpu_memory_gb). Use at least 8 such GPUs (tensor parallel), or a smaller model/quantization."]


@pytest.mark.parametrize("gpus, fits", [(4, False), (5, False), (6, True), (8, True)])
def test_glm5_memory_floor_on_rtx_pro_6000(gpus, fits):
    # The profile's 520 GB at 0.90: the community's fewest RTX PRO 6000 for GLM-5 NVFP4 is 6 (TP 2 x PP 3).
    # By memory alone 6 hold it; the advice names 8, the fewest its 64 heads can be split over on one node.
    glm5 = profile("glm5")
    dims = {"num_attention_heads": glm5["num_attention_heads"], "num_key_value_heads": glm5["num_key_value_heads"]}
    result = pf_fit.check_memory(facts("rtxpro6000-x8-2numa"), gpus, glm5["gpu_memory_utilization"],
                                 glm5["min_gpu_memory_gb"], glm5["name"],
                                 lambda n: pf_fit.tensor_parallel_refusals(n, dims, glm5))
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
    problems = pf_fit.check_memory(facts("rtxpro6000-x8-2numa"), 8, 0.9, 800, p["name"],
                                   lambda n: pf_fit.tensor_parallel_refusals(n, dims, p))["problems"]
    assert problems[0].endswith(
        "9 such GPUs would hold it, but no tensor-parallel size from 9 up suits the model (at 9 it does not divide "
        "the model's 48 attention heads and cannot split or replicate its 8 key/value heads evenly and is not one of "
        "the profile's tensor_parallel_sizes (4, 8)): use a smaller model/quantization.")
    # Without the head rule and the size list, any count will do.
    plain = dict(p, tensor_parallel_sizes=[], tensor_parallel_divides_attention_heads=False)
    assert pf_fit.check_memory(facts("rtxpro6000-x8-2numa"), 8, 0.9, 800, p["name"],
                               lambda n: pf_fit.tensor_parallel_refusals(n, dims, plain))["problems"][0].endswith(
        "Use at least 9 such GPUs (tensor parallel), or a smaller model/quantization.")


def test_key_value_heads_checked_too():
    # MiniMax-M2.5: 48 heads, 8 KV heads; TP 6 divides 48 but cannot split 8 KV heads.
    dims = {"num_attention_heads": 48, "num_key_value_heads": 8, "sources": {"num_attention_heads": "profile"}}
    problems = pf_fit.check_tensor_parallel(6, 8, dims, profile("minimax_m25"))["problems"]
    assert problems and "cannot split or replicate its 8 key/value heads evenly" in problems[0]
    assert pf_fit.check_tensor_parallel(8, 8, dims, profile("minimax_m25"))["problems"] == []


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


def test_memory_counts_only_the_tensor_parallel_gpus_and_the_utilization():
    assert run(vllm_service_tensor_parallel_size=4)["problems"][0].startswith("GPU memory: 4 x 102.6 GB")
    assert run(vllm_service_gpu_memory_utilization=0.5)["problems"][0].startswith(
        "GPU memory: 8 x 102.6 GB at gpu_memory_utilization 0.50")


def test_mixed_gpus_refused_unless_the_profile_allows_them():
    small = dict(profile("minimax_m25"), min_gpu_memory_gb=1, min_compute_capability="8.0")
    problems = run(gpus=facts("mixed-x2"), prof=small, vllm_service_tensor_parallel_size=2)["problems"]
    assert len(problems) == 1 and problems[0].startswith("GPUs of different models on one host (")
    assert "allow_mixed_gpus: true" in problems[0]
    assert run(gpus=facts("mixed-x2"), prof=dict(small, allow_mixed_gpus=True),
               vllm_service_tensor_parallel_size=2)["problems"] == []


@pytest.mark.parametrize("tp,needle", [
    (3, "vllm_service_tensor_parallel_size 3 does not divide the model's 64 attention heads"),
    (16, "vllm_service_tensor_parallel_size 16 is larger than the 8 GPU(s) on this host"),
    (0, "vllm_service_tensor_parallel_size must be a positive number of GPUs"),
    ("abc", "argument 'vllm_service_tensor_parallel_size' is of type str and we were unable to convert to int"),
])
def test_tensor_parallel_refusals(tp, needle):
    problems = run(vllm_service_tensor_parallel_size=tp)["problems"]
    assert any(p.startswith(needle) for p in problems), problems


def test_tensor_parallel_sizes_of_the_profile():
    p = dict(profile("minimax_m25"), tensor_parallel_sizes=[4, 8], min_gpu_memory_gb=100)
    assert run(prof=p, vllm_service_tensor_parallel_size=2)["problems"] == [
        "vllm_service_tensor_parallel_size 2 is not one of the sizes profile minimax-m2.5-fp8 supports "
        "(tensor_parallel_sizes: 4, 8)."]


def test_driver_branch_against_compute_capability():
    # One mistake, one message (the Blackwell rule and the compute capability rule once both told it).
    assert run("nvidia_driver", nvidia_driver_branch=560)["problems"] == [
        "nvidia_driver_branch 560 cannot drive compute capability 12.0 (Blackwell (CUDA 12.8) needs branch 570 or "
        "newer, open kernel modules). Set nvidia_driver_branch to 570 or later (580 is the default)."]
    old = copy.deepcopy(facts("rtxpro6000-x8-2numa"))
    old["driver_version"] = "550.54.15"
    assert any(p.startswith("the loaded driver 550.54.15 (branch 550) cannot drive compute capability 12.0")
               for p in run("nvidia_driver", gpus=old, nvidia_driver_install_packages=False)["problems"])
    assert run("nvidia_driver", gpus=old)["problems"] == []  # this run installs 580


def test_nvfp4_needs_blackwell():
    problems = run(gpus=facts("l40s-x8-2switch-2numa"), vllm_service_profile="glm5")["problems"]
    assert any(p.startswith("profile glm-5-nvfp4 needs compute capability 10.0 or newer") for p in problems)


def test_disk():
    assert pf.check_disk("/w", 595 * GB, 0, 100 * GB, "/")["problems"] == [
        "disk: /w (filesystem at /) has 100.0 GB free, but the weights need 624.8 GB more (0.0 GB of 595.0 GB already "
        "there, plus 5% headroom). Free space there, or put the weights on a larger filesystem (vllm_hf_home / the "
        "profile's source)."]
    assert pf.check_disk("/w", 595 * GB, 595 * GB, 0)["problems"] == []  # already there
    assert pf.check_disk("/w", 595 * GB, 500 * GB, 100 * GB)["problems"] == []  # a resumed download: the rest counts


@pytest.mark.parametrize("w,place", [
    ({"override": "/srv/w", "model_path": "/x"}, "/srv/w"),
    ({"model_path": "/staged"}, "/staged"),
    ({"source": "http", "dest": "/mirror"}, "/mirror"),
    ({"source": "local", "local_path": "/local"}, "/local"),
    ({"profile_source": "/abs/model"}, "/abs/model"),
    ({"profile_source": "org/name", "hf_home": "/hf"}, "/hf/hub/models--org--name"),
    ({}, ""),
])
def test_the_weights_place(w, place):
    assert pf.weights_place(w) == place


@pytest.mark.parametrize("mode,source,starts,checked", [
    ("auto", "hf", False, True), ("auto", "local", True, False), ("auto", "none", True, True),
    ("auto", "none", False, False), ("never", "hf", True, False), ("always", "local", False, True),
])
def test_the_disk_is_checked_when_this_run_fetches_the_weights(mode, source, starts, checked):
    assert pf.disk_check_decision(mode, source, starts)[0] is checked


def test_p2p_unsupported_is_a_warning_only():
    small = dict(profile("minimax_m25"), min_gpu_memory_gb=50)
    assert run(gpus=facts("rtx4090-x4-p2p-unsupported"), prof=small, vllm_service_tensor_parallel_size=4)["problems"] == []
    report = run("pcie_host", gpus=facts("rtx4090-x4-p2p-unsupported"))
    assert report["problems"] == [] and len(report["warnings"]) == 1
    for needle in ("P2P:", "ACS", "IOMMU", "nvidia-smi topo -p2p r", "lspci -vvv | grep ACSCtl"):
        assert needle in report["warnings"][0]


def test_pcie_host_findings_are_one_warning_a_kind_with_their_remedy(seed_host_facts):
    report = run("pcie_host", gpus=seed_host_facts)
    assert [w.split(":")[0] for w in report["warnings"]] == [
        "PCIe host iommu", "PCIe host acs", "PCIe host hmm", "PCIe host pcie_port_pm"]
    acs = report["warnings"][1]
    assert "The same on 7 more: bridge 0000:20:01.1" in acs and acs.count("remedy:") == 1
    assert "the moeops.inference.pcie_host role does that at every boot with pcie_host_clear_acs: true" in acs
    assert "remedy: options nvidia_uvm uvm_disable_hmm=1" in report["warnings"][2]
    assert report["problems"] == []


def _line_breaking_values(opt, breaker):
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
    """Generated from the argument specs: every option whose type can carry a string, of every role, is refused by the
    role's plan when a string in it (a dict's key or value, a list's item) spans lines; the value is never echoed."""
    covered = []
    for role in ROLES:
        for name, opt in sorted(spec(role).items()):
            for value, place in _line_breaking_values(opt, breaker):
                values = dict(role_inputs(role), **{name: value})
                result = plan_role(role, spec(role), values, sorted(values), spec_roles(),
                                   {"gpus": facts("rtxpro6000-x8-2numa"), "facts": DEBIAN})
                wanted = [p for p in result["problems"]
                          if p.startswith("%s: %s%s" % (role, name, place)) and ("contains " + what) in p]
                assert wanted, (role, name, value, result["problems"])
                assert "ExecStartPre" not in " ".join(result["problems"]), result["problems"]
                covered.append((role, name))
    assert len(set(covered)) >= 94, sorted(set(covered))


def test_line_safety_names_the_place_and_keeps_clean_values():
    assert inputs.line_safety_problems("v", {"A": ["x", {"B": "y\r\nz"}], "C": "fine"}) == [
        "v.A[1].B contains a newline (\\n) and a carriage return (\\r): no value may span lines "
        "(systemd reads each line as a directive)"]
    assert inputs.line_safety_problems("v", {"A": "LL", "B": ["Ring", 8, None, True]}) == []


def test_every_problem_of_a_role_is_reported_at_once():
    problems = run(vllm_service_tensor_parallel_size=3, vllm_service_port=70000,
                   vllm_service_extra_args=["--host", "0.0.0.0"])["problems"]
    assert any("vllm_service_port must be a TCP port" in p for p in problems)
    assert any("vllm_service_extra_args[0] --host: set vllm_service_host instead" in p for p in problems)


# --- what tests/integration/60-bad-inputs.sh found after issue 26 (one plan per role) -------------------------------

class _AnsibleTaggedInt(int):
    """Stands for ansible-core 2.19's tagged int: what a role sees for `NCCL_PROTO: 1` from an inventory."""


def test_a_number_in_an_env_mapping_is_named_by_its_yaml_type_not_ansibles_class():
    assert inputs.env_mapping("vllm_service_environment", {"CUDA_DEVICE_MAX_CONNECTIONS": _AnsibleTaggedInt(1)},
                              allow_null=False) == [
        'vllm_service_environment.CUDA_DEVICE_MAX_CONNECTIONS must be a string (quote it in YAML: "1"), got int 1']
    assert [inputs.type_name(x) for x in (True, _AnsibleTaggedInt(1), 1.5, "x", {}, [])] == [
        "bool", "int", "float", "str", "dict", "list"]


def test_ansibles_own_conversion_message_names_the_yaml_type_not_ansibles_class():
    """A list where a mapping belongs, as an inventory gives it (ansible-core 2.19 tags it: _AnsibleTaggedList):
    Ansible's own "cannot be converted to a dict" message names `list`, as every other message does."""
    from ansible._internal._datatag._tags import Origin  # what the inventory's loader puts on every value

    tagged = Origin(description="inventory").tag(["NCCL_PROTO=LL"])
    assert type(tagged).__name__ == "_AnsibleTaggedList"
    problems = run(vllm_service_nccl_overrides=tagged,
                   vllm_service_extra_args=Origin(description="inventory").tag({"--enforce-eager": None}))["problems"]
    assert ("argument 'vllm_service_nccl_overrides' is of type list and we were unable to convert to dict: "
            "list cannot be converted to a dict") in problems
    assert ("argument 'vllm_service_extra_args' is of type dict and we were unable to convert to list: "
            "dict cannot be converted to a list") in problems
    assert "_Ansible" not in " ".join(problems) and "<class" not in " ".join(problems)


def test_the_front_tls_files_are_two_problems_each_named_by_the_role():
    files = {"/etc/moeops-no-such.crt": {"exists": False},
             "/etc/hostname": {"exists": True, "isreg": True, "uid": 0, "pw_name": "root", "mode": "0644"}}
    values = dict(role_inputs("vllm_service"), vllm_service_env_file="/etc/vllm/vllm.env",
                  vllm_service_api_key_file="/etc/vllm/vllm.api-key", vllm_service_host="0.0.0.0",
                  vllm_service_front_tls_cert="/etc/moeops-no-such.crt", vllm_service_front_tls_key="/etc/hostname")
    ctx = {"gpus": facts("rtxpro6000-x8-2numa"), "facts": DEBIAN, "front_tls_files": files}
    assert plan_role("vllm_service", spec("vllm_service"), values, sorted(values), spec_roles(), ctx)["problems"] == [
        "vllm_service: vllm_service_front_tls_cert /etc/moeops-no-such.crt does not exist on the node",
        "vllm_service: vllm_service_front_tls_key /etc/hostname must be owned by root with no group or other access "
        "(chown root; chmod 0600): it is owned by root with mode 0644"]


def test_a_refused_input_of_preflights_own_leaves_every_role_planned():
    values = dict(role_inputs("preflight"), vllm_hf_home="~/hf", preflight_roles=["vllm", "no_such_role", "vllm_service"])
    result = plan_role("preflight", spec("preflight"), values, sorted(values), spec_roles(), {})
    assert result["problems"] == [
        "preflight: vllm_hf_home must be an absolute path, got '~/hf'",
        "preflight: preflight_roles: 'no_such_role' is no role of moeops.inference with an argument spec (roles: %s)"
        % ", ".join(spec_roles())]
    assert result["plan"] == {"roles": ["vllm", "vllm_service"]}
    # A refused preflight_roles itself: the spec's default roles are planned, the value named once.
    values = dict(role_inputs("preflight"), preflight_roles=["vllm", "x\nExecStartPre=/bin/id"])
    result = plan_role("preflight", spec("preflight"), values, sorted(values), spec_roles(), {})
    assert [p.split(" contains ")[0] for p in result["problems"]] == ["preflight: preflight_roles[1]"]
    assert result["plan"]["roles"] == list(spec("preflight")["preflight_roles"]["default"])
