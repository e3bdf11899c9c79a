# -*- coding: utf-8 -*-
"""The nvidia_driver role's decisions, rendered with Ansible's own templating
for distributions the test nodes cannot be (Ubuntu) and for the refusals."""
from __future__ import annotations

import pytest
import role_templating

UBUNTU_NOBLE = {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
                "distribution_release": "noble", "architecture": "x86_64", "kernel": "6.8.0-45-generic",
                "virtualization_role": "host", "virtualization_type": "kvm"}
DEBIAN_BOOKWORM = {"distribution": "Debian", "distribution_version": "12.8", "distribution_major_version": "12",
                   "distribution_release": "bookworm", "architecture": "x86_64", "kernel": "6.1.0-28-amd64",
                   "virtualization_role": "guest", "virtualization_type": "podman"}
BLACKWELL = {"count": 8, "gpus": [{"compute_capability": "12.0"}] * 8}
HOPPER = {"count": 1, "gpus": [{"compute_capability": "9.0"}]}


def render(expr, facts, **overrides):
    variables = role_templating.role_vars("nvidia_driver", ansible_facts=facts,
                                          nvidia_driver_gpu_facts=overrides.pop("gpus", BLACKWELL), **overrides)
    return role_templating.render(expr, variables)


def test_ubuntu_uses_its_archive_and_the_signed_modules_for_the_running_kernel():
    assert render("{{ _nvidia_driver_source }}", UBUNTU_NOBLE) == "ubuntu_archive"
    assert render("{{ _nvidia_driver_packages }}", UBUNTU_NOBLE) == [
        "nvidia-driver-580-open", "linux-modules-nvidia-580-open-6.8.0-45-generic"]
    assert render("{{ _nvidia_driver_container | bool }}", UBUNTU_NOBLE) is False


def test_debian_uses_nvidias_repository():
    assert render("{{ _nvidia_driver_source }}", DEBIAN_BOOKWORM) == "cuda_repo"
    assert render("{{ nvidia_driver_cuda_repo_url }}", DEBIAN_BOOKWORM) == \
        "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
    assert render("{{ _nvidia_driver_container | bool }}", DEBIAN_BOOKWORM) is True


def test_ubuntu_repo_path_for_the_cuda_source():
    assert render("{{ nvidia_driver_cuda_repo_url }}", UBUNTU_NOBLE, nvidia_driver_source="cuda_repo") == \
        "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"


@pytest.mark.parametrize("gpus,blackwell", [(BLACKWELL, True), (HOPPER, False), ({}, False)])
def test_blackwell_detection(gpus, blackwell):
    assert render("{{ _nvidia_driver_blackwell | bool }}", UBUNTU_NOBLE, gpus=gpus) is blackwell


def test_debian_archive_ceiling():
    assert render("{{ _nvidia_driver_archive_max_branch[ansible_facts.distribution_release] }}", DEBIAN_BOOKWORM) == 535
