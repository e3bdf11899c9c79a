# -*- coding: utf-8 -*-
"""driver_plan: the nvidia_driver role's decisions from the facts, the GPUs and its inputs, for distributions
the test nodes cannot be (Ubuntu, aarch64) and for what the role's checks refuse.

GPU facts: the REAL H200 capture (tests/fixtures/gpu/real/h200-x1-device.nvml.snapshot.json, compute capability
9.0) for a GPU that is not Blackwell; the CONSTRUCTED 8-GPU RTX PRO 6000 double (compute capability 12.0) for
Blackwell, for which no capture exists."""
from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from ansible_collections.moeops.inference.plugins.module_utils._roles import nvidia_driver as nd
from ansible_collections.moeops.inference.plugins.module_utils._common.plan import plan_role
from ansible_collections.moeops.inference.plugins.module_utils._common.specs import spec_roles
from conftest import REPO, load_json, role_defaults, role_spec

UBUNTU_NOBLE = {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
                "distribution_release": "noble", "architecture": "x86_64", "kernel": "6.8.0-45-generic",
                "virtualization_role": "host", "virtualization_type": "kvm"}
DEBIAN_BOOKWORM = {"distribution": "Debian", "distribution_version": "12.8", "distribution_major_version": "12",
                   "distribution_release": "bookworm", "architecture": "x86_64", "kernel": "6.1.0-28-amd64",
                   "virtualization_role": "guest", "virtualization_type": "podman"}
DEBIAN_TRIXIE_ARM = dict(DEBIAN_BOOKWORM, distribution_version="13.1", distribution_major_version="13",
                         distribution_release="trixie", architecture="aarch64", kernel="6.12.48+deb13-arm64",
                         virtualization_role="host", virtualization_type="")
BLACKWELL = {"count": 8, "gpus": [{"compute_capability": "12.0"}] * 8}
HOPPER = {"count": 1, "gpus": [{"compute_capability": "9.0"}]}
NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos/"


def plan(facts, gpus=None, branch=580, source="auto", **urls):
    """The plan for `facts`, on the 8 Blackwell GPUs unless `gpus` is given."""
    return nd.driver_plan(facts, BLACKWELL if gpus is None else gpus, branch, source, **urls)


def test_the_plan_has_exactly_its_keys():
    assert set(plan(UBUNTU_NOBLE)) == set(nd.KEYS) == {
        "archive_ceiling", "blackwell", "compute_capabilities", "repo_distro", "repo_arch", "repo_url",
        "keyring_url", "source", "packages", "container"}


def test_ubuntu_uses_its_archive_and_the_signed_modules_for_the_running_kernel():
    p = plan(UBUNTU_NOBLE)
    assert p["source"] == "ubuntu_archive"
    assert p["packages"] == ["nvidia-driver-580-open", "linux-modules-nvidia-580-open-6.8.0-45-generic"]
    assert p["container"] is False


def test_the_branch_may_be_a_string():
    assert plan(UBUNTU_NOBLE, branch="570")["packages"] == [
        "nvidia-driver-570-open", "linux-modules-nvidia-570-open-6.8.0-45-generic"]


def test_debian_uses_nvidias_repository():
    p = plan(DEBIAN_BOOKWORM)
    assert p["source"] == "cuda_repo"
    assert p["packages"] == ["nvidia-open"]
    assert (p["repo_distro"], p["repo_arch"]) == ("debian12", "x86_64")
    assert p["repo_url"] == NVIDIA + "debian12/x86_64/"
    assert p["keyring_url"] == NVIDIA + "debian12/x86_64/cuda-keyring_1.1-1_all.deb"
    assert p["container"] is True


def test_ubuntu_repo_path_for_the_cuda_source():
    p = plan(UBUNTU_NOBLE, source="cuda_repo")
    assert p["source"] == "cuda_repo"
    assert p["packages"] == ["nvidia-open"]
    assert p["repo_distro"] == "ubuntu2404"
    assert p["repo_url"] == NVIDIA + "ubuntu2404/x86_64/"
    assert p["keyring_url"] == NVIDIA + "ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb"


def test_aarch64_is_nvidias_sbsa_repository():
    p = plan(DEBIAN_TRIXIE_ARM)
    assert (p["repo_distro"], p["repo_arch"]) == ("debian13", "sbsa")
    assert p["repo_url"] == NVIDIA + "debian13/sbsa/"
    assert p["container"] is False


def test_a_given_repository_carries_the_keyring_a_given_keyring_wins():
    mirror = "http://mirror.lab.example/nvidia/cuda/debian12/x86_64/"
    p = plan(DEBIAN_BOOKWORM, cuda_repo_url=mirror)
    assert p["repo_url"] == mirror
    assert p["keyring_url"] == mirror + "cuda-keyring_1.1-1_all.deb"
    p = plan(DEBIAN_BOOKWORM, cuda_repo_url=mirror, cuda_keyring_url="http://keys.lab.example/cuda-keyring.deb")
    assert (p["repo_url"], p["keyring_url"]) == (mirror, "http://keys.lab.example/cuda-keyring.deb")
    # Empty (the role's default) or null means NVIDIA's.
    assert plan(DEBIAN_BOOKWORM, cuda_repo_url=None, cuda_keyring_url="")["repo_url"] == NVIDIA + "debian12/x86_64/"


@pytest.mark.parametrize("source,packages", [
    ("ubuntu_archive", ["nvidia-driver-535-open", "linux-modules-nvidia-535-open-6.1.0-28-amd64"]),
    ("cuda_repo", ["nvidia-open"]),
    ("mirror", ["nvidia-open"]),
    ("debian_archive", ["nvidia-open-kernel-dkms", "nvidia-driver"]),
    ("ppa", []),  # not a source: the role's input check refuses it, the plan does not fail first
])
def test_packages_per_source(source, packages):
    p = plan(DEBIAN_BOOKWORM, branch=535, source=source)
    assert p["source"] == source
    assert p["packages"] == packages


@pytest.mark.parametrize("gpus,blackwell", [(BLACKWELL, True), (HOPPER, False), ({}, False)])
def test_blackwell_detection(gpus, blackwell):
    assert plan(UBUNTU_NOBLE, gpus=gpus)["blackwell"] is blackwell


@pytest.mark.parametrize("capability,blackwell", [
    ("9.0", False), ("10.0", True), ("10.3", True), ("11.0", True), ("12.0", True), ("12.1", True), ("13.0", False),
    ("8.9", False), ("unknown", False), ("", False)])
def test_blackwell_is_compute_capability_major_10_to_12(capability, blackwell):
    assert plan(UBUNTU_NOBLE, gpus={"count": 1, "gpus": [{"compute_capability": capability}]})["blackwell"] is blackwell


def test_blackwell_on_any_gpu_and_only_string_capabilities_count():
    mixed = {"count": 3, "gpus": [{"compute_capability": "9.0"}, {"compute_capability": "12.0"}, {"name": "x"}]}
    assert plan(UBUNTU_NOBLE, gpus=mixed)["blackwell"] is True
    assert plan(UBUNTU_NOBLE, gpus={"count": 1, "gpus": [{"compute_capability": 12.0}]})["blackwell"] is False
    assert nd.driver_plan(UBUNTU_NOBLE, None, 580, "auto")["blackwell"] is False
    assert plan(UBUNTU_NOBLE, gpus={"count": 0, "gpus": None})["blackwell"] is False


def test_the_real_h200_capture_is_not_blackwell():
    facts = topo.from_snapshot(load_json("real", "h200-x1-device.nvml.snapshot.json"), "h200-x1-device")
    p = plan(UBUNTU_NOBLE, gpus=facts)
    assert p["compute_capabilities"] == ["9.0"]
    assert p["blackwell"] is False


def test_the_constructed_blackwell_double_is_blackwell():
    facts = topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "seed")
    p = plan(UBUNTU_NOBLE, gpus=facts)
    assert p["compute_capabilities"] == ["12.0"]
    assert p["blackwell"] is True


def test_compute_capabilities_are_unique_strings_sorted_as_versions():
    gpus = {"count": 5, "gpus": [{"compute_capability": c} for c in ("12.0", "9.0", "10.0", "9.0", "8.6")]}
    assert plan(UBUNTU_NOBLE, gpus=gpus)["compute_capabilities"] == ["8.6", "9.0", "10.0", "12.0"]
    assert plan(UBUNTU_NOBLE, gpus={})["compute_capabilities"] == []


def test_debian_archive_ceiling():
    assert nd.ARCHIVE_MAX_BRANCH["bookworm"] == 535
    assert plan(DEBIAN_BOOKWORM)["archive_ceiling"] == 535
    assert plan(DEBIAN_TRIXIE_ARM)["archive_ceiling"] == 550
    assert plan(UBUNTU_NOBLE)["archive_ceiling"] == 550 == nd.ARCHIVE_MAX_BRANCH_DEFAULT
    assert plan(dict(DEBIAN_BOOKWORM, distribution_release="forky"))["archive_ceiling"] == 550


@pytest.mark.parametrize("vtype", ["container", "docker", "podman", "lxc", "systemd-nspawn", "containerd", "openvz"])
def test_a_container_is_a_guest_of_a_container_type(vtype):
    assert plan(dict(UBUNTU_NOBLE, virtualization_role="guest", virtualization_type=vtype))["container"] is True
    assert plan(dict(UBUNTU_NOBLE, virtualization_role="host", virtualization_type=vtype))["container"] is False


def test_a_vm_guest_or_missing_virtualization_facts_is_not_a_container():
    assert plan(dict(UBUNTU_NOBLE, virtualization_role="guest", virtualization_type="kvm"))["container"] is False
    bare = {k: v for k, v in UBUNTU_NOBLE.items() if not k.startswith("virtualization_")}
    assert plan(bare)["container"] is False


def test_an_explicit_source_is_kept_on_any_distribution():
    assert plan(UBUNTU_NOBLE, source="mirror")["source"] == "mirror"
    assert plan(DEBIAN_BOOKWORM, source="ubuntu_archive")["source"] == "ubuntu_archive"  # the check refuses it
    assert plan(dict(UBUNTU_NOBLE, distribution="Rocky"))["source"] == "cuda_repo"


def test_facts_that_are_not_a_mapping_fail():
    with pytest.raises(TypeError, match="ansible_facts"):
        nd.driver_plan("Ubuntu", {}, 580, "auto")
    with pytest.raises(TypeError, match="nvidia_gpu"):
        nd.driver_plan(UBUNTU_NOBLE, ["12.0"], 580, "auto")


# The role's own step: the role_plan action's code with the role's defaults, as tasks/check.yml runs it.
def role_plan(facts, gpus=None, **overrides):
    values = dict(role_defaults("nvidia_driver"), **overrides)
    result = plan_role("nvidia_driver", role_spec("nvidia_driver"), values, sorted(values), spec_roles(),
                       {"facts": facts, "gpus": BLACKWELL if gpus is None else gpus})
    assert result["problems"] == [], result["problems"]
    return result["plan"]


def test_the_roles_plan_with_its_defaults():
    assert role_plan(DEBIAN_BOOKWORM) == plan(DEBIAN_BOOKWORM)
    p = role_plan(UBUNTU_NOBLE, HOPPER, nvidia_driver_source="cuda_repo", nvidia_driver_branch="575")
    assert p == plan(UBUNTU_NOBLE, HOPPER, 575, "cuda_repo")
    assert p["repo_url"] == NVIDIA + "ubuntu2404/x86_64/"


def test_the_roles_plan_takes_the_repository_and_keyring_inputs():
    p = role_plan(DEBIAN_BOOKWORM, nvidia_driver_cuda_repo_url="http://mirror.lab.example/cuda/")
    assert (p["repo_url"], p["keyring_url"]) == ("http://mirror.lab.example/cuda/",
                                                 "http://mirror.lab.example/cuda/cuda-keyring_1.1-1_all.deb")


def test_the_roles_plan_without_gpu_facts():
    p = role_plan(UBUNTU_NOBLE, {})
    assert (p["blackwell"], p["compute_capabilities"]) == (False, [])


def test_the_roles_rules_refuse_an_old_branch_for_blackwell_and_debians_archive_for_580():
    values = dict(role_defaults("nvidia_driver"), nvidia_driver_branch=550)
    result = plan_role("nvidia_driver", role_spec("nvidia_driver"), values, sorted(values), spec_roles(),
                       {"facts": DEBIAN_BOOKWORM, "gpus": BLACKWELL})
    told = [p for p in result["problems"] if p.startswith("nvidia_driver: nvidia_driver_branch 550 cannot drive")]
    assert told == ["nvidia_driver: nvidia_driver_branch 550 cannot drive compute capability 12.0 (Blackwell (CUDA 12.8) "
                    "needs branch 570 or newer, open kernel modules). Set nvidia_driver_branch to 570 or later (580 is "
                    "the default)."], result["problems"]
    values = dict(role_defaults("nvidia_driver"), nvidia_driver_source="debian_archive")
    result = plan_role("nvidia_driver", role_spec("nvidia_driver"), values, sorted(values), spec_roles(),
                       {"facts": DEBIAN_BOOKWORM, "gpus": BLACKWELL})
    assert any("Debian's archive stops at 535 on bookworm" in p for p in result["problems"]), result["problems"]


def test_the_roles_vars_hold_constants_only():
    with open(os.path.join(REPO, "roles", "nvidia_driver", "vars", "main.yml")) as f:
        constants = yaml.safe_load(f) or {}
    assert [k for k, v in constants.items() if "{{" in repr(v)] == []
    with open(os.path.join(REPO, "roles", "nvidia_driver", "defaults", "main.yml")) as f:
        defaults = yaml.safe_load(f)
    assert (defaults["nvidia_driver_cuda_repo_url"], defaults["nvidia_driver_cuda_keyring_url"]) == ("", "")
