# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight role's own rules: its inputs, the distribution, and room for the weights. Private to the collection.

Every other rule a deploy checks first is its role's own (module_utils/_roles/<role>.py): the preflight role runs
each role's plan with all of its rules (the role_plan action) and reports them together, then these host checks on
the node (the preflight module: the only reads of the node are the helpers at the end, so the checks stay pure).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._common import specs

Result = Dict[str, List[str]]
KNOWN_OTHER = ("preflight_report",)
# The roles to plan are worked out even when one of preflight's own inputs is refused (vllm_hf_home '~/hf'): every
# role's problems are still reported with it, not after it is fixed.
PLAN_DESPITE_PROBLEMS = True
SUPPORTED_DISTROS: Dict[str, Tuple[str, ...]] = {"Ubuntu": ("22.04", "24.04"), "Debian": ("12", "13")}
GB = 10 ** 9
# Free space asked for beyond the bytes still to download: partial files and temporary copies.
DISK_HEADROOM = 0.05


def _result(problems: Optional[List[str]] = None, warnings: Optional[List[str]] = None) -> Result:
    return {"problems": list(problems or []), "warnings": list(warnings or [])}


def input_problems(v: Mapping[str, Any]) -> List[str]:
    known = specs.spec_roles()
    unknown = [r for r in v.get("preflight_roles") or [] if specs.short_name(r) not in known]
    return (["preflight_roles: %s %s no role of moeops.inference with an argument spec (roles: %s)"
             % (", ".join(map(repr, unknown)), "is" if len(unknown) == 1 else "are", ", ".join(known))]
            if unknown else [])


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """The roles to plan: those of preflight_roles that exist (input_problems names any other)."""
    known = specs.spec_roles()
    roles = [specs.short_name(r) for r in v.get("preflight_roles") or [] if isinstance(r, str)]
    return {"plan": {"roles": [r for r in roles if r in known]}, "outcome": ""}


def weights_place(w: Mapping[str, Any]) -> str:
    """Where the weights are or will be, from what the roles will do (`w`): preflight_weights_path; else the staged copy
    the service loads (vllm_service_model_path); else the model_weights role's place (a mirror's destination, a local
    path); else the profile's absolute source, or the Hugging Face cache's directory for its repository."""
    if w.get("override"):
        return w["override"]
    if w.get("model_path"):
        return w["model_path"]
    if w.get("source") in ("http", "rsync") and w.get("dest"):
        return w["dest"]
    if w.get("source") == "local" and w.get("local_path"):
        return w["local_path"]
    source = w.get("profile_source") or ""
    return weights_location(source, w.get("hf_home") or "/var/cache/vllm/huggingface") if source else ""


def disk_check_decision(mode: str, weights_source: str, service_starts: bool) -> Tuple[bool, str]:
    """(check the free space, why not): auto checks it when this run fetches the weights - the model_weights role
    stages them (a local source is used where it is), or the service starts and vLLM downloads them itself."""
    if mode == "never":
        return False, "not checked: preflight_disk_check is never"
    if mode == "always" or (weights_source not in ("none", "local")) or (weights_source == "none" and service_starts):
        return True, ""
    return False, "not checked: nothing fetches the weights in this run (no staging, and the service does not start here)"


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
