# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the nvidia_driver role decides from the host's facts, the GPUs and its inputs, in one pure function.

`driver_plan(facts, gpu_facts, branch, source[, cuda_repo_url, cuda_keyring_url])` returns the source the driver comes from (`auto`
resolved), the packages it installs, NVIDIA's CUDA repository for the distribution and architecture
(and its cuda-keyring package), the highest branch Debian's own archive carries, whether the GPUs are
Blackwell and whether the node is a container.  No I/O, no Ansible templating: the nvidia_driver_plan
filter calls it, and unit tests call it directly.

`plan(v, ctx)` is the role's plan for the role_plan action: driver_plan, then the rules on it (a branch too old for
the GPUs, a source that cannot carry the branch, an unsupported distribution, a loaded driver this run leaves too
old). Private to the collection.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs

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


# --- the role's rules and plan (the role_plan action) -----------------------------------------------------------

KNOWN_OTHER = ()
# The oldest driver branch for each GPU generation (NVIDIA's CUDA release notes: the minimum driver of the CUDA
# version that added the architecture).
MIN_DRIVER_BRANCH: Tuple[Tuple[Tuple[int, int], int, str], ...] = (
    ((12, 0), 570, "Blackwell (CUDA 12.8)"),
    ((10, 0), 570, "Blackwell (CUDA 12.8)"),
    ((9, 0), 520, "Hopper (CUDA 11.8)"),
    ((8, 9), 520, "Ada Lovelace (CUDA 11.8)"),
    ((8, 6), 455, "Ampere (CUDA 11.1)"),
    ((8, 0), 450, "Ampere (CUDA 11.0)"),
    ((7, 0), 396, "Volta/Turing (CUDA 9.x/10.0)"),
)


def _cc_tuple(cc: Any) -> Optional[Tuple[int, int]]:
    try:
        major, _dot, minor = str(cc).partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return None


def driver_branch(version: Any) -> Optional[int]:
    m = re.match(r"^\s*(\d+)", str(version or ""))
    return int(m.group(1)) if m else None


def min_driver_branch(cc: Any) -> Optional[Tuple[int, str]]:
    t = _cc_tuple(cc)
    if t is None:
        return None
    for floor, branch, family in MIN_DRIVER_BRANCH:
        if t >= floor:
            return branch, family
    return None


def check_driver(facts: Mapping[str, Any], planned_branch: Optional[int], installs_driver: bool) -> List[str]:
    """The driver branch supports every GPU's compute capability: the branch the nvidia_driver role
    will install, and the loaded driver where the role will not replace it."""
    needs = [(str(g.get("compute_capability")), min_driver_branch(g.get("compute_capability")))
             for g in facts.get("gpus") or []]
    needs = [(cc, n) for cc, n in needs if n]
    if not needs:
        return []
    cc, (need, family) = max(needs, key=lambda x: x[1][0])
    problems = []
    if planned_branch is not None and planned_branch < need:
        problems.append("nvidia_driver_branch %d cannot drive compute capability %s (%s needs branch %d or newer%s). "
                        "Set nvidia_driver_branch to %d or later (580 is the default)."
                        % (planned_branch, cc, family, need, ", open kernel modules" if need >= 570 else "", need))
    loaded = driver_branch(facts.get("driver_version"))
    if loaded is not None and loaded < need and not (installs_driver and planned_branch is not None
                                                     and planned_branch >= need):
        problems.append("the loaded driver %s (branch %d) cannot drive compute capability %s (%s needs branch %d or "
                        "newer) and this run will not replace it: let the nvidia_driver role install branch %d+ "
                        "(nvidia_driver_install_packages: true), or upgrade the driver."
                        % (facts.get("driver_version"), loaded, cc, family, need, need))
    return problems


def input_problems(v: Mapping[str, Any]) -> List[str]:
    problems = inputs.matches("nvidia_driver_branch", None if v.get("nvidia_driver_branch") is None
                              else str(v.get("nvidia_driver_branch")), r"^[0-9]{3}$", "a driver branch such as 580")
    if v.get("nvidia_driver_source") == "mirror":
        url, keyring = v.get("nvidia_driver_mirror_url"), v.get("nvidia_driver_mirror_signed_by")
        if not (isinstance(url, str) and re.match(r"^(https?|file)://", url)):
            problems.append("nvidia_driver_source mirror needs nvidia_driver_mirror_url (an http, https or file URL), "
                            "got %r" % url)
        if not (isinstance(keyring, str) and keyring.startswith("/")):
            problems.append("nvidia_driver_source mirror needs nvidia_driver_mirror_signed_by (the absolute path of the "
                            "mirror's keyring), got %r" % keyring)
    return problems


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """The driver plan and its rules. `ctx`: facts (ansible_facts, with the distribution) and the GPU facts (gpus)."""
    facts, gpus = ctx.get("facts") or {}, ctx.get("gpus") or {}
    branch = int(v["nvidia_driver_branch"])
    result = driver_plan(facts, gpus, branch, v["nvidia_driver_source"], v["nvidia_driver_cuda_repo_url"],
                         v["nvidia_driver_cuda_keyring_url"])
    problems = []
    if facts.get("distribution") not in ("Debian", "Ubuntu") or (
            result["source"] == "ubuntu_archive" and facts.get("distribution") != "Ubuntu"):
        problems.append("nvidia_driver supports Debian 12/13 and Ubuntu 22.04/24.04 (this is %s %s); nvidia_driver_source "
                        "ubuntu_archive needs Ubuntu" % (facts.get("distribution"), facts.get("distribution_version")))
    driver = check_driver(gpus, branch, bool(v["nvidia_driver_install_packages"])) if int(gpus.get("count") or 0) else []
    # One message for one mistake: check_driver names the branch against the newest compute capability read (Blackwell
    # among them); this one is for Blackwell GPUs that it cannot place.
    if result["blackwell"] and branch < 570 and not any(p.startswith("nvidia_driver_branch ") for p in driver):
        problems.append("nvidia_driver_branch %d cannot drive the Blackwell GPUs on this host (compute capability %s): "
                        "Blackwell needs the open kernel modules of branch 570 or newer. Set nvidia_driver_branch to "
                        "570 or later (580 is the default)" % (branch, ", ".join(result["compute_capabilities"])))
    if result["source"] == "debian_archive" and branch > result["archive_ceiling"]:
        problems.append("nvidia_driver_source debian_archive cannot carry branch %d: Debian's archive stops at %d on %s "
                        "(550 at most on any release). Use nvidia_driver_source cuda_repo (NVIDIA's CUDA repository) or "
                        "a mirror of it" % (branch, result["archive_ceiling"], facts.get("distribution_release")))
    problems += driver
    return {"plan": result, "problems": problems,
            "outcome": "nvidia_driver: branch %d from %s (%s)%s" % (
                branch, result["source"], ", ".join(result["packages"]),
                "" if v["nvidia_driver_install_packages"] else "; packages not installed (nvidia_driver_install_packages false)")}
