# -*- coding: utf-8 -*-
"""A role's plan through the role_plan action's code (module_utils/_common/plan.py): every rule of the role, the
values converted by their declared types, removed and misspelt names, and what a role alone refuses."""
from __future__ import annotations

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._common.plan import owner, plan_role
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from conftest import load_json, role_inputs, role_spec


def rtxpro_x8():
    return topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "rtxpro6000-x8-2numa")


def run(role, over=None, names=(), ctx=None, unknown_names=None):
    values = dict(role_inputs(role), **(over or {}))
    if role == "vllm_service":
        values.update(vllm_service_env_file="/etc/vllm/vllm.env", vllm_service_api_key_file="/etc/vllm/vllm.api-key")
    return plan_role(role, role_spec(role), values, sorted(set(values) | set(names)), spec_roles(),
                     ctx if ctx is not None else {"gpus": rtxpro_x8()}, unknown_names=unknown_names)


DEBIAN = {"distribution": "Debian", "distribution_version": "12", "distribution_release": "bookworm",
          "architecture": "x86_64"}


def test_every_role_plans_with_its_defaults():
    for role in spec_roles():
        result = run(role, ctx={"gpus": rtxpro_x8(), "facts": DEBIAN, "cmdline": ""})
        assert result["problems"] == [], (role, result["problems"])


@pytest.mark.parametrize("raw,converted", [("false", False), ("no", False), ("0", False), ("off", False),
                                           ("true", True), ("yes", True)])
def test_booleans_from_the_command_line_are_converted_not_taken_as_true(raw, converted):
    """-e pcie_host_iommu_passthrough=false is the string "false", which Jinja takes as true: the plan converts it."""
    result = run("pcie_host", {"pcie_host_iommu_passthrough": raw}, ctx={"cmdline": ""})
    assert result["values"]["pcie_host_iommu_passthrough"] is converted
    assert result["plan"]["kernel_args"] == (["iommu=pt"] if converted else [])


def test_tensor_parallel_3_for_minimax_is_refused_by_vllm_service_alone():
    result = run("vllm_service", {"vllm_service_profile": "minimax_m25", "vllm_service_tensor_parallel_size": 3})
    assert any("vllm_service_tensor_parallel_size 3" in p and "8 key/value heads" in p for p in result["problems"]), \
        result["problems"]


REFUSED_TAIL = ("refused, as it would have no effect (moeops_unknown_names: warn makes this a warning, for an "
                "inventory shared with other tools)")


def test_a_misspelt_variable_is_refused_with_the_closest_option():
    result = run("vllm_service", names=["vllm_service_tensor_paralel_size"])
    assert result["problems"] == ["vllm_service: vllm_service_tensor_paralel_size is set but is not an option of role "
                                  "vllm_service (did you mean vllm_service_tensor_parallel_size?); " + REFUSED_TAIL]
    assert result["warnings"] == [] and result["plan"] is None
    # vllm_ is the vllm role's prefix, but vllm_service_ names are vllm_service's: nothing from vllm.
    assert run("vllm", names=["vllm_service_tensor_paralel_size"])["problems"] == []
    assert owner("vllm_service_x", spec_roles()) == "vllm_service" and owner("vllm_x", spec_roles()) == "vllm"
    # One with no close option is refused all the same, without a guess.
    far = "vllm_service_xyzzyxyzzyxyzzyxyzzy9876543210"
    assert run("vllm_service", names=[far])["problems"] == [
        "vllm_service: %s is set but is not an option of role vllm_service; %s" % (far, REFUSED_TAIL)]


def test_the_newcomers_typo_is_refused_and_so_is_the_missing_profile():
    """vllm_service_profle: minimax_m25 once left the default in place and planned Kimi-K2.5 (595 GB): now the typo is
    refused naming vllm_service_profile, and the profile's absence is refused with the shipped profiles, together."""
    result = run("vllm_service", {"vllm_service_profile": None, "vllm_service_profle": "minimax_m25"},
                 names=["vllm_service_profle"])
    assert result["problems"] == [
        "vllm_service: vllm_service_profle is set but is not an option of role vllm_service (did you mean "
        "vllm_service_profile?); " + REFUSED_TAIL,
        "vllm_service: vllm_service_profile: not set, and moeops.inference deploys no model by default; set "
        "vllm_service_profile (in the inventory, or -e vllm_service_profile=NAME) to the name of a profile shipped with "
        "the collection (glm5, kimi_k25, minimax_m25) or the absolute path of a profile file on the controller"]
    assert result["plan"] is None and result["outcome"] == ""
    # model_weights refuses the missing profile too (the preflight tells it once, as vllm_service's); the typo is
    # vllm_service's name, so only vllm_service refuses it.
    weights = run("model_weights", {"vllm_service_profile": None}, names=["vllm_service_profle"])
    assert weights["problems"] == [result["problems"][1].replace("vllm_service: ", "model_weights: ", 1)]


def test_moeops_unknown_names_warn_turns_the_refusal_back_into_a_warning():
    """For an inventory shared with other tools: the same message, as a warning, and the plan goes on."""
    result = run("vllm_service", names=["vllm_service_tensor_paralel_size"], unknown_names="warn")
    assert result["problems"] == [] and result["plan"] is not None
    assert result["warnings"] == ["vllm_service: vllm_service_tensor_paralel_size is set but is not an option of role "
                                  "vllm_service (did you mean vllm_service_tensor_parallel_size?); it has no effect"]
    assert run("vllm_service", names=["vllm_service_tensor_paralel_size"], unknown_names="refuse")["problems"]


@pytest.mark.parametrize("value", ["sometimes", "", "Warn", True, ["warn"]])
def test_moeops_unknown_names_takes_refuse_or_warn_only(value):
    result = run("vllm_service", names=["vllm_service_tensor_paralel_size"], unknown_names=value)
    assert result["problems"][0] == "vllm_service: moeops_unknown_names must be refuse or warn, got %r" % (value,)
    # A value that is neither refuses, as unset does.
    assert "did you mean vllm_service_tensor_parallel_size?); refused" in result["problems"][1]


def test_the_collections_own_results_are_not_refused():
    """Facts and registered results the collection itself sets with a role's prefix (KNOWN_OTHER) are no typo."""
    known = {"vllm_service": ["vllm_service_summary", "vllm_service_desired", "vllm_service_canary_result",
                              "vllm_service_p2p_gate_result"],
             "model_weights": ["model_weights_path", "model_weights_config", "model_weights_summary"],
             "preflight": ["preflight_report"], "monitoring": ["monitoring_summary"],
             "pcie_host": ["pcie_host_summary"], "ray_cluster": ["ray_cluster_summary"]}
    ctx = {"gpus": rtxpro_x8(), "facts": DEBIAN, "cmdline": ""}
    for role, names in known.items():
        assert run(role, names=names, ctx=ctx)["problems"] == [], role


def test_a_removed_name_is_refused_naming_its_replacement():
    result = run("vllm_service", names=["moeops_model"])
    assert "vllm_service: moeops_model was removed from moeops.inference; set vllm_service_profile instead" in \
        result["problems"][0]
    assert run("gpu_facts", names=["gpu_topology_backend"])["problems"][0].startswith(
        "gpu_facts: gpu_topology_backend was removed from moeops.inference; set gpu_facts_backend instead")
    # Each removed name belongs to one role: a deploy's preflight reports it once.
    ctx = {"gpus": rtxpro_x8(), "cmdline": "", "facts": DEBIAN}
    assert [r for r in spec_roles() if run(r, names=["moeops_model"], ctx=ctx)["problems"]] == ["vllm_service"]


def test_no_gpu_read_is_refused_unless_the_user_said_they_are_not_required():
    none = topo.no_gpu_facts("no driver loaded")
    refused = run("vllm_service", ctx={"gpus": none})
    assert any(p.startswith("vllm_service: no NVIDIA GPU could be read") and "gpu_facts_required" in p
               for p in refused["problems"]), refused["problems"]
    warned = run("vllm_service", {"gpu_facts_required": False}, ctx={"gpus": none})
    assert warned["problems"] == [] and warned["plan"]["install"] is False
    assert any("WARNING" in w and "no vLLM unit is written" in w for w in warned["warnings"])
    # The CPU build needs none.
    assert run("vllm_service", {"vllm_engine": "cpu", "vllm_service_tensor_parallel_size": 1},
               ctx={"gpus": none})["plan"]["install"] is True
    # A read-only report (the settings playbook's desired entry point) says so instead, unless they are required.
    report = run("vllm_service", ctx={"gpus": none, "report": True})
    assert report["problems"] == [] and any("no NVIDIA GPU could be read" in w for w in report["warnings"])
    assert run("vllm_service", {"gpu_facts_required": True}, ctx={"gpus": none, "report": True})["problems"]


def test_a_secret_is_never_quoted():
    result = run("vllm_service", {"vllm_service_api_key": "sk-secret value"})
    assert result["problems"] and all("sk-secret" not in p for p in result["problems"])
    assert any("vllm_service_api_key must not contain whitespace" in p for p in result["problems"])
