# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the nvidia_driver role decides from the host's facts, the GPUs and its inputs, in one pure function.

`driver_plan(facts, gpu_facts, branch, source[, cuda_repo_url, cuda_keyring_url])` returns the source the driver comes from (`auto`
resolved), the packages it installs, NVIDIA's CUDA repository for the distribution and architecture
(and its cuda-keyring package), the highest branch Debian's own archive carries, whether the GPUs are
Blackwell and whether the node is a container.  No I/O, no Ansible templating: the nvidia_driver_plan
filter calls it, and unit tests call it directly.

It refuses nothing: the role's check entry point asserts on the result (a branch too old for
Blackwell, a source that cannot carry the branch, an unsupported distribution), with its own messages,
and the inputs are validated there too, so a wrong input here yields a plan that the checks refuse.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

# Highest branch each distribution archive carries (Debian: bookworm 535, trixie 550).
ARCHIVE_MAX_BRANCH: Dict[str, int] = {
    "bookworm": 535,
    "trixie": 550,
}
# Any other release: 550 at most.
ARCHIVE_MAX_BRANCH_DEFAULT = 550

# Compute capabilities 10.x-12.x are Blackwell: open kernel modules, branch 570+.
BLACKWELL_MAJORS = (10, 12)

# Packages each source installs; Ubuntu's are the prebuilt, signed modules for the running kernel (Secure Boot).
# {branch} and {kernel} are the driver branch and the running kernel (ansible_facts.kernel).
PACKAGES_BY_SOURCE: Dict[str, Tuple[str, ...]] = {
    "ubuntu_archive": ("nvidia-driver-{branch}-open", "linux-modules-nvidia-{branch}-open-{kernel}"),
    "cuda_repo": ("nvidia-open",),
    "mirror": ("nvidia-open",),
    "debian_archive": ("nvidia-open-kernel-dkms", "nvidia-driver"),
}

# Source auto: Ubuntu's own archive on Ubuntu, NVIDIA's CUDA repository anywhere else (Debian).
AUTO_SOURCE_UBUNTU = "ubuntu_archive"
AUTO_SOURCE_OTHER = "cuda_repo"

# NVIDIA's CUDA repository, one per <distro><version>/<arch>/ (such as debian12/x86_64/, ubuntu2404/sbsa/).
CUDA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos/"
# NVIDIA's arm64 server repository is named sbsa (Server Base System Architecture), not aarch64.
REPO_ARCH: Dict[str, str] = {"aarch64": "sbsa"}
# cuda-keyring: NVIDIA's package that installs the repository's signing key, in the repository itself.
CUDA_KEYRING_PACKAGE = "cuda-keyring_1.1-1_all.deb"

# virtualization_type values (with virtualization_role guest) of a container: the host's kernel owns the module.
CONTAINER_TYPES = ("container", "docker", "podman", "lxc", "systemd-nspawn", "containerd", "openvz")

KEYS = ("archive_ceiling", "blackwell", "compute_capabilities", "repo_distro", "repo_arch", "repo_url",
        "keyring_url", "source", "packages", "container")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _major(capability: str) -> int:
    """The major version of a compute capability such as '12.0': the text before its first dot, as an int
    the way Jinja's int filter reads it (0 when it is not a number)."""
    head = capability.split(".", 1)[0]
    try:
        return int(head)
    except ValueError:
        try:
            return int(float(head))
        except (ValueError, OverflowError):
            return 0


def _capability_key(capability: str) -> Tuple[Tuple[int, ...], str]:
    """Sort compute capabilities as versions (9.0 before 10.0), unparsable ones last by text."""
    parts = capability.split(".")
    if all(p.isdigit() for p in parts):
        return (0,) + tuple(int(p) for p in parts), capability
    return (1,), capability


def compute_capabilities(gpu_facts: Optional[Mapping[str, Any]]) -> List[str]:
    """The GPUs' compute capabilities (the strings among gpus[].compute_capability), unique, sorted as versions."""
    gpus = (gpu_facts or {}).get("gpus") or []
    found = {g.get("compute_capability") for g in gpus if isinstance(g, Mapping)}
    return sorted((c for c in found if isinstance(c, str)), key=_capability_key)


def is_blackwell(capabilities: List[str]) -> bool:
    """Any compute capability whose major version is 10 to 12."""
    low, high = BLACKWELL_MAJORS
    return any(low <= _major(c) <= high for c in capabilities)


def archive_ceiling(release: Any) -> int:
    """The highest branch Debian's own archive carries on this release."""
    return ARCHIVE_MAX_BRANCH.get(_text(release), ARCHIVE_MAX_BRANCH_DEFAULT)


def repo_distro(facts: Mapping[str, Any]) -> str:
    """NVIDIA's name for the distribution: debian12 (Debian's major version), ubuntu2404 (Ubuntu's version)."""
    distribution = _text(facts.get("distribution"))
    if distribution == "Debian":
        version = _text(facts.get("distribution_major_version"))
    else:
        version = _text(facts.get("distribution_version")).replace(".", "")
    return distribution.lower() + version


def repo_arch(facts: Mapping[str, Any]) -> str:
    """NVIDIA's name for the architecture: sbsa for aarch64, else the architecture itself (x86_64)."""
    architecture = _text(facts.get("architecture"))
    return REPO_ARCH.get(architecture, architecture)


def resolve_source(facts: Mapping[str, Any], source: Any) -> Any:
    """The source, with auto resolved: ubuntu_archive on Ubuntu, cuda_repo otherwise."""
    if source != "auto":
        return source
    return AUTO_SOURCE_UBUNTU if facts.get("distribution") == "Ubuntu" else AUTO_SOURCE_OTHER


def packages(source: Any, branch: Union[int, str], kernel: Any) -> List[str]:
    """The packages the source installs; none for a source the role does not know (its check refuses it)."""
    names = PACKAGES_BY_SOURCE.get(source, ()) if isinstance(source, str) else ()
    return [n.format(branch=_text(branch), kernel=_text(kernel)) for n in names]


def is_container(facts: Mapping[str, Any]) -> bool:
    """A container guest: the host's kernel owns the NVIDIA module."""
    return (_text(facts.get("virtualization_role")) == "guest"
            and _text(facts.get("virtualization_type")) in CONTAINER_TYPES)


def driver_plan(facts: Mapping[str, Any], gpu_facts: Optional[Mapping[str, Any]], branch: Union[int, str],
                source: str, cuda_repo_url: Optional[str] = "", cuda_keyring_url: Optional[str] = "") -> Dict[str, Any]:
    """Everything the nvidia_driver role derives, from `facts` (ansible_facts), `gpu_facts`
    (ansible_facts.nvidia_gpu; None or {} when no GPU was read), the driver `branch` and `source`
    (nvidia_driver_branch, nvidia_driver_source) and, optionally, the role's repository and keyring URLs
    (nvidia_driver_cuda_repo_url, nvidia_driver_cuda_keyring_url; empty means NVIDIA's for this host)."""
    if not isinstance(facts, Mapping):
        raise TypeError("expects ansible_facts (a mapping), got %s" % type(facts).__name__)
    if gpu_facts is not None and not isinstance(gpu_facts, Mapping):
        raise TypeError("expects the nvidia_gpu facts from moeops.inference.gpu_facts (a mapping), got %s"
                        % type(gpu_facts).__name__)
    distro, arch = repo_distro(facts), repo_arch(facts)
    repo_url = _text(cuda_repo_url) or "%s%s/%s/" % (CUDA_REPO_BASE, distro, arch)
    resolved = resolve_source(facts, source)
    capabilities = compute_capabilities(gpu_facts)
    return {
        "archive_ceiling": archive_ceiling(facts.get("distribution_release")),
        "blackwell": is_blackwell(capabilities),
        "compute_capabilities": capabilities,
        "repo_distro": distro,
        "repo_arch": arch,
        "repo_url": repo_url,
        "keyring_url": _text(cuda_keyring_url) or repo_url + CUDA_KEYRING_PACKAGE,
        "source": resolved,
        "packages": packages(resolved, branch, facts.get("kernel")),
        "container": is_container(facts),
    }
