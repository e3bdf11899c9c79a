# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight: every reason a host cannot take a model, found before anything changes.

Each check is a pure function returning problems (the run must stop) and
warnings (it may go on); `run_preflight` runs all of them, so one report holds
every problem, not just the first.  Every message says what is wrong, names the
variable or fact it comes from, and says what to do.  The only reads of the
node (free space, weights already on disk, their config.json) are the small
helpers at the end, kept apart so the checks stay pure.
"""

from __future__ import annotations

import json
import os
import re
from difflib import get_close_matches
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile
from ansible_collections.moeops.inference.plugins.module_utils._facts import pcie_host
from ansible_collections.moeops.inference.plugins.module_utils._common import role_inputs
from ansible_collections.moeops.inference.plugins.module_utils._policy.nccl_policy import p2p_level

Result = Dict[str, List[str]]

SUPPORTED_DISTROS: Dict[str, Tuple[str, ...]] = {"Ubuntu": ("22.04", "24.04"), "Debian": ("12", "13")}
GB = 10 ** 9
MIB = 2 ** 20
# How far the GPU-memory advice looks for a tensor-parallel size the model can be split over.
MAX_TENSOR_PARALLEL = 512
# Free space asked for beyond the bytes still to download: partial files and temporary copies.
DISK_HEADROOM = 0.05
# preflight_disk_check: auto decides from what this run does; always and never force it.
DISK_CHECK_MODES = ("auto", "always", "never")
# Where the model_weights role puts a mirror's files when model_weights_dest is empty (+ the model's name).
STAGED_WEIGHTS_DIR = "/var/cache/vllm/models/"

# Oldest driver branch for each compute capability: the first CUDA release that supports the
# architecture (CUDA release notes) and the driver it needs.  Blackwell (10.x, 12.x) arrived with
# CUDA 12.8 and driver 570, on the open kernel modules only.
MIN_DRIVER_BRANCH: Tuple[Tuple[Tuple[int, int], int, str], ...] = (
    ((12, 0), 570, "Blackwell (CUDA 12.8)"),
    ((10, 0), 570, "Blackwell (CUDA 12.8)"),
    ((9, 0), 520, "Hopper (CUDA 11.8)"),
    ((8, 9), 520, "Ada Lovelace (CUDA 11.8)"),
    ((8, 6), 455, "Ampere (CUDA 11.1)"),
    ((8, 0), 450, "Ampere (CUDA 11.0)"),
    ((7, 0), 396, "Volta/Turing (CUDA 9.x/10.0)"),
)


def _result(problems: Optional[List[str]] = None, warnings: Optional[List[str]] = None) -> Result:
    return {"problems": list(problems or []), "warnings": list(warnings or [])}


def _cc(cc: Any) -> Optional[Tuple[int, int]]:
    major, _dot, minor = str(cc).partition(".")
    try:
        return int(major), int(minor or 0)
    except ValueError:
        return None


def check_distro(distribution: str, version: str, major_version: str, os_family: str = "") -> Result:
    """Ubuntu 22.04/24.04 and Debian 12/13; RHEL-family refused clearly."""
    wanted = SUPPORTED_DISTROS.get(distribution)
    got = "%s %s" % (distribution, version)
    if wanted is None:
        if os_family == "RedHat":
            return _result(["distribution %s (RHEL family) is not supported yet: the driver and service roles use apt "
                            "and Debian/Ubuntu packaging. Use Ubuntu 22.04/24.04 or Debian 12/13." % got])
        return _result(["distribution %s is not supported: use Ubuntu 22.04/24.04 or Debian 12/13." % got])
    have = version if distribution == "Ubuntu" else major_version
    if have not in wanted:
        return _result(["distribution %s is not supported: %s %s are." % (got, distribution, " and ".join(wanted))])
    return _result()


def check_gpus(facts: Mapping[str, Any], allow_mixed: bool, required: bool) -> Result:
    """GPUs found, all of one model unless the profile allows mixing."""
    count = int(facts.get("count") or 0)
    if count == 0:
        reasons = "; ".join(str(u.get("reason")) for u in facts.get("unavailable") or [] if isinstance(u, Mapping))
        msg = "no NVIDIA GPU could be read (backend %s%s)" % (
            facts.get("backend", "none"), ": " + reasons if reasons else "")
        if required:
            return _result([msg + ". Check that the driver is loaded (nvidia-smi), or set gpu_facts_snapshot for a "
                                  "simulated node."])
        return _result(warnings=[msg + "; the GPU checks (memory, tensor parallel, driver, P2P) are skipped. "
                                       "Normal on a bare box before the driver is installed: run again afterwards."])
    names = sorted({str(g.get("name")) for g in facts.get("gpus") or []})
    if len(names) > 1 and not allow_mixed:
        per = ", ".join("%s: %d" % (n, sum(1 for g in facts["gpus"] if g.get("name") == n)) for n in names)
        return _result(["GPUs of different models on one host (%s): tensor parallel runs at the pace of the slowest "
                        "and smallest. Serve on GPUs of one model (CUDA_VISIBLE_DEVICES in vllm_service_environment), "
                        "or set allow_mixed_gpus: true in the model profile." % per])
    return _result()


def check_compute_capability(facts: Mapping[str, Any], min_cc: Optional[str], profile_name: str) -> Result:
    """Weights that need a newer architecture (NVFP4 needs Blackwell)."""
    want = _cc(min_cc) if min_cc else None
    if not want:
        return _result()
    low = sorted({str(g.get("compute_capability")) for g in facts.get("gpus") or []
                  if _cc(g.get("compute_capability")) is not None and _cc(g.get("compute_capability")) < want})
    if low:
        return _result(["profile %s needs compute capability %s or newer (min_compute_capability), this host has %s: "
                        "pick a profile whose weights run on these GPUs." % (profile_name, min_cc, ", ".join(low))])
    return _result()


def check_memory(facts: Mapping[str, Any], tensor_parallel_size: int, gpu_memory_utilization: float,
                 min_gpu_memory_gb: float, profile_name: str,
                 tensor_parallel_allowed: Optional[Callable[[int], List[str]]] = None) -> Result:
    """GPU memory of the GPUs vLLM uses (tensor-parallel size of them; the smallest counts, vLLM
    sizes every rank alike), at gpu_memory_utilization, against the profile's minimum.
    tensor_parallel_allowed(n) gives why the model cannot run at tensor parallel n ([] when it can),
    so that the advice names a GPU count the model can actually be split over."""
    gpus = facts.get("gpus") or []
    mems = [g.get("memory_total_mib") for g in gpus if isinstance(g.get("memory_total_mib"), int)]
    if not mems or tensor_parallel_size < 1 or tensor_parallel_size > len(mems):
        return _result()  # unknowable, or the tensor-parallel check reports it
    per_gpu = min(mems) * MIB
    usable = per_gpu * tensor_parallel_size * gpu_memory_utilization
    need = min_gpu_memory_gb * GB
    if usable < need:
        holds = int(-(-need // (per_gpu * gpu_memory_utilization)))
        whys = tensor_parallel_allowed or (lambda n: [])
        # The first size from `holds` up that the model can be split over (vLLM shards heads evenly).
        size = next((n for n in range(holds, max(holds, MAX_TENSOR_PARALLEL) + 1) if not whys(n)), None)
        if size is None:
            advice = ("%d such GPUs would hold it, but no tensor-parallel size from %d up suits the model (at %d it %s): "
                      "use a smaller model/quantization." % (holds, holds, holds, " and ".join(whys(holds))))
        elif size == holds:
            advice = "Use at least %d such GPUs (tensor parallel), or a smaller model/quantization." % holds
        else:
            advice = ("Use at least %d such GPUs (tensor parallel %d: %d would hold it, but tensor parallel %d %s), "
                      "or a smaller model/quantization." % (size, size, holds, holds, " and ".join(whys(holds))))
        return _result([
            "GPU memory: %d x %.1f GB at gpu_memory_utilization %.2f gives %.0f GB, but profile %s needs at least "
            "%.0f GB (min_gpu_memory_gb). %s"
            % (tensor_parallel_size, per_gpu / GB, gpu_memory_utilization, usable / GB, profile_name,
               min_gpu_memory_gb, advice)])
    return _result()


def _head_refusals(tp: int, dims: Mapping[str, Any], profile: Mapping[str, Any]) -> List[str]:
    """vLLM's head rules at tensor parallel `tp`, where the profile applies them."""
    if not profile.get("tensor_parallel_divides_attention_heads", True):
        return []
    return vllm_tensor_parallel_problems(tp, dims.get("num_attention_heads"), dims.get("num_key_value_heads"))


def _outside_profile_sizes(tp: int, profile: Mapping[str, Any]) -> bool:
    sizes = profile.get("tensor_parallel_sizes") or []
    return bool(sizes) and tp not in sizes


def tensor_parallel_refusals(tp: int, dims: Mapping[str, Any], profile: Mapping[str, Any]) -> List[str]:
    """Why the model cannot run at tensor parallel `tp` ([] when it can), regardless of the host:
    vLLM's head rules (where the profile applies them) and the profile's tensor_parallel_sizes."""
    whys = _head_refusals(tp, dims, profile)
    if _outside_profile_sizes(tp, profile):
        whys.append("is not one of the profile's tensor_parallel_sizes (%s)"
                    % ", ".join(map(str, profile["tensor_parallel_sizes"])))
    return whys


def vllm_tensor_parallel_problems(tp: int, heads: Optional[int], kv_heads: Optional[int]) -> List[str]:
    """What vLLM itself refuses: the attention heads must split evenly across the ranks
    (vllm/config/model.py, verify_with_parallel_config); key/value heads are split or replicated
    evenly (QKVParallelLinear in vllm/model_executor/layers/linear.py asserts it at load)."""
    problems = []
    if heads and heads % tp:
        problems.append("does not divide the model's %d attention heads" % heads)
    if kv_heads and (kv_heads % tp if kv_heads >= tp else tp % kv_heads):
        problems.append("cannot split or replicate its %d key/value heads evenly" % kv_heads)
    return problems


def check_tensor_parallel(tp: Any, gpu_count: int, dims: Mapping[str, Any], profile: Mapping[str, Any],
                          var: str = "vllm_service_tensor_parallel_size") -> Result:
    """Divides the heads (where the profile says so), not above the GPU count, one vLLM supports."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        return _result(["%s: must be a positive integer, got %r" % (var, tp)])
    problems = []
    if gpu_count and tp > gpu_count:
        problems.append("%s %d is larger than the %d GPU(s) on this host: use at most %d." % (var, tp, gpu_count, gpu_count))
    whys = _head_refusals(tp, dims, profile)
    if whys:
        fits = [str(d) for d in range(1, max(gpu_count, 1) + 1) if not _head_refusals(d, dims, profile)]
        problems.append("%s %d %s (head counts from %s); vLLM shards heads evenly and refuses it. Use one of %s."
                        % (var, tp, " and ".join(whys), dims.get("sources", {}).get("num_attention_heads"),
                           ", ".join(fits) or "1"))
    if _outside_profile_sizes(tp, profile):
        problems.append("%s %d is not one of the sizes profile %s supports (tensor_parallel_sizes: %s)."
                        % (var, tp, profile.get("name"), ", ".join(map(str, profile["tensor_parallel_sizes"]))))
    return _result(problems)


def driver_branch(version: Any) -> Optional[int]:
    m = re.match(r"^\s*(\d+)", str(version or ""))
    return int(m.group(1)) if m else None


def min_driver_branch(cc: Any) -> Optional[Tuple[int, str]]:
    t = _cc(cc)
    if t is None:
        return None
    for floor, branch, family in MIN_DRIVER_BRANCH:
        if t >= floor:
            return branch, family
    return None


def check_driver(facts: Mapping[str, Any], planned_branch: Optional[int], installs_driver: bool) -> Result:
    """The driver branch supports every GPU's compute capability: the branch the nvidia_driver role
    will install, and the loaded driver where the role will not replace it."""
    needs = [(str(g.get("compute_capability")), min_driver_branch(g.get("compute_capability")))
             for g in facts.get("gpus") or []]
    needs = [(cc, n) for cc, n in needs if n]
    if not needs:
        return _result()
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
    return _result(problems)


def check_disk(path: str, weights_bytes: int, present_bytes: int, free_bytes: Optional[int],
               mount: Optional[str] = None) -> Result:
    """Free space where the weights will live, unless they are already there."""
    remaining = max(0, weights_bytes - present_bytes)
    if remaining == 0 or free_bytes is None:
        return _result()
    need = int(remaining * (1 + DISK_HEADROOM))
    if free_bytes < need:
        return _result([
            "disk: %s%s has %.1f GB free, but the weights need %.1f GB more (%.1f GB of %.1f GB already there, plus %d%% "
            "headroom). Free space there, or put the weights on a larger filesystem (vllm_hf_home / the profile's source)."
            % (path, " (filesystem at %s)" % mount if mount else "", free_bytes / GB, need / GB, present_bytes / GB,
               weights_bytes / GB, int(DISK_HEADROOM * 100))])
    return _result()


def check_p2p(facts: Mapping[str, Any]) -> Result:
    """A warning, never a failure, when NVML says P2P is unsupported between GPUs; the NCCL policy's
    wording, which names the likely causes (ACS, IOMMU) and how to check."""
    if int(facts.get("count") or 0) < 2:
        return _result()
    return _result(warnings=["P2P: " + w for w in p2p_level(facts)["warnings"]])


def check_pcie_host(findings: Sequence[Mapping[str, str]]) -> Result:
    """The PCIe host findings (pcie_host.facts_findings): a warning each, a problem for a blocking one, with its
    reason and remedy."""
    said = {"warning": [], "blocking": []}  # type: Dict[str, List[str]]
    for f in findings:
        if f["result"] in said:
            remedy = "; remedy: " + f["remedy"] if f.get("remedy") else ""
            said[f["result"]].append("PCIe host %s: %s%s" % (f["check"], f["reason"], remedy))
    return _result(said["blocking"], said["warning"])


# --- role inputs -----------------------------------------------------------------------------------

def check_role_inputs(role: str, spec: Mapping[str, Any], values: Mapping[str, Any]) -> Result:
    """One role's inputs: its argument spec and every rule of role_inputs (the roles' input rules live there)."""
    return _result(role_inputs.role_input_problems(role, spec, values))


def check_unknown_variables(specs: Mapping[str, Mapping[str, Any]], names: Sequence[str],
                            known_other: Sequence[str] = ()) -> Result:
    """Role-prefixed variables that no role knows: usually a typo, silently ignored otherwise."""
    options = sorted({o for spec in specs.values() for o in spec})
    warnings = []
    for name in sorted(set(names) - set(options) - set(known_other)):
        role = max((r for r in specs if name.startswith(r + "_")), key=len, default=None)
        if role is None:
            continue
        close = get_close_matches(name, list(specs[role]), n=1)
        warnings.append("%s is set but is not an option of role %s%s; it has no effect."
                        % (name, role, " (did you mean %s?)" % close[0] if close else ""))
    return _result(warnings=warnings)


# --- what this run will do, decided from the roles' variables --------------------------------------
# `specs` is role name to its argument spec options (the checked roles); `variables` is variable name to
# value, as the preflight role sends them (every variable with a checked role's prefix, secrets left out).

def role_value(specs: Mapping[str, Mapping[str, Any]], variables: Mapping[str, Any], role: str, name: str,
               fallback: Any = None) -> Any:
    """The value a role's option will have in this run: the variable when it is set, else the default of
    the option in the role's argument spec (when the role is checked), else `fallback`."""
    if name in variables:
        return variables[name]
    option = (specs.get(role) or {}).get(name)
    if isinstance(option, Mapping) and "default" in option:
        return option["default"]
    return fallback


def _flag(value: Any) -> bool:
    """Ansible's `| bool`: true, "yes", "on", 1 and the like are true; anything else is false."""
    return boolean(value, strict=False)


def _text(value: Any) -> str:
    """A string value, else "" (a value of the wrong type is the role-input check's to report)."""
    return value if isinstance(value, str) else ""


def planned_driver_branch(specs: Mapping[str, Mapping[str, Any]], variables: Mapping[str, Any]) -> Optional[int]:
    """The driver branch this run would install: nvidia_driver_branch (else its spec default) when the
    nvidia_driver role is checked; None when it is not, or when the value is not a branch number (the
    role-input check names that)."""
    if "nvidia_driver" not in specs:
        return None
    branch = role_value(specs, variables, "nvidia_driver", "nvidia_driver_branch")
    if isinstance(branch, bool):
        return None
    if isinstance(branch, int):
        return branch
    return int(branch.strip()) if isinstance(branch, str) and branch.strip().isdigit() else None


def installs_driver(specs: Mapping[str, Mapping[str, Any]], variables: Mapping[str, Any]) -> bool:
    """Whether this run installs the driver (so a too-old loaded driver will be replaced): the nvidia_driver
    role is checked and nvidia_driver_install_packages is true (its default)."""
    return "nvidia_driver" in specs and _flag(role_value(specs, variables, "nvidia_driver",
                                                         "nvidia_driver_install_packages", True))


def gpus_from_hardware(facts: Mapping[str, Any]) -> bool:
    """gpu_facts' own `from_hardware`; for facts from before it carried one, the backend rule."""
    return gpu_topology.reported_from_hardware(facts)


def disk_check_decision(mode: str, weights_source: Any, service_start: Any, from_hardware: bool) -> bool:
    """Whether to check the free space for the weights.  `auto` checks when this run fetches them: the
    model_weights role stages them (any source but none; a local source is used where it is, so nothing
    needs room for it), or the service starts (vllm_service_start always, or auto on GPUs read from
    hardware), since vLLM downloads a repository id at start.  `always` and `never` force it."""
    if mode == "always":
        return True
    if mode != "auto":
        return False
    source = "none" if weights_source is None else weights_source
    start = "auto" if service_start is None else service_start
    if source == "local":
        return False
    return source != "none" or start == "always" or (start == "auto" and from_hardware)


def weights_path(override: str, specs: Mapping[str, Mapping[str, Any]], variables: Mapping[str, Any],
                 profile: Any) -> str:
    """Where the weights will be, when this run says so: the explicit preflight_weights_path, else
    vllm_service_model_path, else for an http/rsync mirror model_weights_dest or
    /var/cache/vllm/models/<model_weights_name or the profile's name>, else model_weights_local_path for a
    local source; "" when none of them says (the caller then takes the profile's source)."""
    if _text(override):
        return override
    model_path = _text(role_value(specs, variables, "vllm_service", "vllm_service_model_path"))
    if model_path:
        return model_path
    source = role_value(specs, variables, "model_weights", "model_weights_source", "none")
    if source in ("http", "rsync"):
        name = (_text(role_value(specs, variables, "model_weights", "model_weights_name", ""))
                or (_text(profile.get("name")) if isinstance(profile, Mapping) else ""))
        return _text(role_value(specs, variables, "model_weights", "model_weights_dest", "")) or STAGED_WEIGHTS_DIR + name
    if source == "local":
        return _text(role_value(specs, variables, "model_weights", "model_weights_local_path", ""))
    return ""


def decide(specs: Mapping[str, Mapping[str, Any]], variables: Mapping[str, Any], gpu_facts: Mapping[str, Any],
           profile: Any, disk_check: str = "auto", weights_override: str = "",
           hf_home: str = "/var/cache/vllm/huggingface") -> Dict[str, Any]:
    """Everything preflight decides from the roles' variables: driver_branch (None: no driver role),
    installs_driver, check_disk, and weights_path (the rule of `weights_path`, else the profile's absolute
    source or the Hugging Face cache's directory for its repository under `hf_home`; "" without a profile)."""
    path = weights_path(weights_override, specs, variables, profile)
    source = profile.get("source") if isinstance(profile, Mapping) else None
    if not path and isinstance(source, str) and source:
        path = weights_location(source, hf_home)
    # A path that spans lines is already refused by its variable's name: it is no place to read or measure.
    unusable = bool(role_inputs.line_safety_problems("weights path", path))
    return {
        "driver_branch": planned_driver_branch(specs, variables),
        "installs_driver": installs_driver(specs, variables),
        "check_disk": disk_check_decision(
            disk_check, role_value(specs, variables, "model_weights", "model_weights_source", "none"),
            role_value(specs, variables, "vllm_service", "vllm_service_start", "auto"), gpus_from_hardware(gpu_facts))
        and not unusable,
        "weights_path": "" if unusable else path,
    }


# --- the whole run ---------------------------------------------------------------------------------

def _number(value: Any) -> Optional[float]:
    """A float from a number or numeric string; None otherwise (the role-input check reports it)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _merge(into: Result, part: Result) -> None:
    into["problems"].extend(part["problems"])
    into["warnings"].extend(part["warnings"])


def run_preflight(inputs: Mapping[str, Any]) -> Dict[str, Any]:
    """All checks.  `inputs` keys: distro (distribution, version, major_version, os_family), gpu_facts,
    gpus_required, profile, profile_var, profile_error, tensor_parallel_size (None: the policy's),
    gpu_memory_utilization (None: the profile's), extra_args, driver_branch, installs_driver, weights
    (path, present_bytes, free_bytes, mount, config), check_disk (default true), disk_check (the mode, for the
    message when the disk is not checked), role_specs, role_values, variable_names, known_other_variables.
    driver_branch, installs_driver and check_disk are what `decide` works out.  Returns problems, warnings
    and what was checked."""
    out: Result = _result()
    checked: Dict[str, Any] = {}
    distro = inputs.get("distro") or {}
    if distro:
        _merge(out, check_distro(distro.get("distribution", ""), str(distro.get("version", "")),
                                 str(distro.get("major_version", "")), distro.get("os_family", "")))
        checked["distro"] = "%s %s" % (distro.get("distribution"), distro.get("version"))

    specs = inputs.get("role_specs") or {}
    values = inputs.get("role_values") or {}
    for role in sorted(specs):
        _merge(out, check_role_inputs(role, specs[role], values.get(role) or {}))
    _merge(out, check_unknown_variables(specs, inputs.get("variable_names") or [], inputs.get("known_other_variables") or []))
    checked["roles"] = sorted(specs)

    if inputs.get("profile_error"):
        out["problems"].append(inputs["profile_error"])
    profile = inputs.get("profile")
    profile_problems = [] if profile is None else model_profile.validate_profile(profile, inputs.get("profile_var") or
                                                                                 "vllm_service_profile")
    out["problems"].extend(profile_problems)
    profile_ok = profile is not None and not profile_problems

    facts = inputs.get("gpu_facts") or {}
    count = int(facts.get("count") or 0)
    _merge(out, check_gpus(facts, bool(profile_ok and profile.get("allow_mixed_gpus")), bool(inputs.get("gpus_required"))))
    checked["gpus"] = count

    if profile_ok and count:
        name = profile["name"]
        weights = inputs.get("weights") or {}
        dims = model_profile.model_dimensions(profile, weights.get("config"))
        checked["dimensions"] = dims
        tp = inputs.get("tensor_parallel_size")
        if tp is None:
            tp = 1
            while tp * 2 <= count:
                tp *= 2
        try:
            tp = int(tp) if not isinstance(tp, bool) else tp
        except (TypeError, ValueError):
            pass  # the role-input check names it
        checked["tensor_parallel_size"] = tp
        _merge(out, check_tensor_parallel(tp, count, dims, profile))
        given = inputs.get("gpu_memory_utilization")
        gmu = float(profile["gpu_memory_utilization"]) if given is None else _number(given)
        # An utilisation or size out of range is the role-input check's problem (it names the variable); the
        # memory advice computed from it would only mislead ("use at least -8 GPUs").
        if isinstance(tp, int) and not isinstance(tp, bool) and tp >= 1 and gmu is not None and 0 < gmu <= 1:
            _merge(out, check_memory(facts, tp, gmu, float(profile["min_gpu_memory_gb"]), name,
                                     lambda n: tensor_parallel_refusals(n, dims, profile)))
        _merge(out, check_compute_capability(facts, profile.get("min_compute_capability"), name))
        ccs = model_profile.compute_capabilities(facts)
        extra = inputs.get("extra_args")
        extra = [a for a in extra if isinstance(a, str)] if isinstance(extra, list) else []
        out["problems"].extend(model_profile.constraint_conflicts(profile, ccs, extra))
        checked["constraints"] = model_profile.effective_settings(profile, ccs)["applied"]
    if count:
        branch = inputs.get("driver_branch")
        _merge(out, check_driver(facts, int(branch) if isinstance(branch, int) or str(branch).isdigit() else None,
                                 bool(inputs.get("installs_driver"))))
        _merge(out, check_p2p(facts))
        findings = pcie_host.facts_findings(facts)
        _merge(out, check_pcie_host(findings))
        if isinstance(facts.get("host"), Mapping):
            checked["pcie_host"] = findings
    if profile_ok:
        weights = inputs.get("weights") or {}
        if weights.get("path") and not inputs.get("check_disk", True):
            checked["weights"] = {"path": weights["path"],
                                  "disk": "not checked: preflight_disk_check is never"
                                  if inputs.get("disk_check") == "never" else
                                  "not checked: nothing fetches the weights in this run "
                                  "(no staging, and the service does not start here)"}
        elif weights.get("path"):
            _merge(out, check_disk(weights["path"], int(float(profile["weights_size_gb"]) * GB),
                                   int(weights.get("present_bytes") or 0), weights.get("free_bytes"), weights.get("mount")))
            checked["weights"] = {"path": weights["path"], "present_bytes": weights.get("present_bytes") or 0,
                                  "free_bytes": weights.get("free_bytes")}
    return {"problems": out["problems"], "warnings": out["warnings"], "checked": checked}


# --- reads of the node -----------------------------------------------------------------------------

def weights_location(source: str, hf_home: str, model_path: str = "") -> str:
    """Where the weights are or will be: an explicit path, the profile's absolute source, or the
    Hugging Face cache's directory for the repo (HF_HOME/hub/models--org--name)."""
    if model_path:
        return model_path
    if source.startswith("/"):
        return source
    return os.path.join(hf_home, "hub", "models--" + source.replace("/", "--"))


def existing_ancestor(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def read_weights_dir(path: str) -> Dict[str, Any]:
    """Bytes of regular files under `path` (the HF cache's snapshot links are not counted twice),
    free bytes on its filesystem, the mount point, and a config.json found there (or None)."""
    present = 0
    config = None
    config_path = None
    if os.path.isdir(path):
        for root, _dirs, files in os.walk(path):
            for f in files:
                p = os.path.join(root, f)
                if os.path.islink(p):
                    if f == "config.json" and config_path is None:
                        config_path = p
                    continue
                try:
                    present += os.lstat(p).st_size
                except OSError:
                    continue
                if f == "config.json" and config_path is None:
                    config_path = p
    if config_path:
        try:
            with open(config_path) as fh:
                config = json.load(fh)
        except (OSError, ValueError):
            config = None
    where = existing_ancestor(path)
    st = os.statvfs(where)
    mount = where
    while not os.path.ismount(mount):
        mount = os.path.dirname(mount)
    return {"path": path, "present_bytes": present, "free_bytes": st.f_bavail * st.f_frsize, "mount": mount,
            "config": config if isinstance(config, dict) else None, "config_path": config_path}
