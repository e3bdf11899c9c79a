# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model_weights role's rules and plan: the source's inputs, and what to stage where, from the model profile.
Private to the collection: the role_plan action (module_utils/_common/plan.py) applies them to the role's converted
values."""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs, specs, urls
from ansible_collections.moeops.inference.plugins.module_utils._common.plan import PlanError
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile

KNOWN_OTHER = ("model_weights_path", "model_weights_config", "model_weights_summary")
PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def input_problems(v: Mapping[str, Any]) -> List[str]:
    source = v.get("model_weights_source")
    problems = (model_profile.unset_problems(v.get("vllm_service_profile"), specs.PROFILES_DIR)
                + inputs.number_in("model_weights_download_timeout", v.get("model_weights_download_timeout"), 0,
                                   inputs.SYSTEMD_MAX_SECONDS, what="a positive number of seconds")
                + inputs.number_in("model_weights_poll_interval", v.get("model_weights_poll_interval"), 0, 86400,
                                   what="a positive number of seconds")
                + inputs.number_in("model_weights_max_workers", v.get("model_weights_max_workers"), 0, 1024,
                                   what="a positive number of parallel downloads"))
    if source == "local" and not v.get("model_weights_local_path"):
        problems.append("model_weights_source local needs model_weights_local_path (the absolute directory of the weights)")
    if source in ("http", "rsync") and not v.get("model_weights_mirror_url"):
        problems.append("model_weights_source %s needs model_weights_mirror_url" % source)
    url = v.get("model_weights_mirror_url")
    if source == "http" and isinstance(url, str) and url and not re.match(r"^https?://", url):
        problems.append("model_weights_source http needs an http:// or https:// model_weights_mirror_url, got %r" % url)
    if source == "rsync" and isinstance(url, str) and url and not re.match(r"^rsync://|^[^/:]+::", url):
        problems.append("model_weights_source rsync needs an rsync:// model_weights_mirror_url, got %r" % url)
    return problems + mirror_rules(v)[0]


# What a weights mirror is trusted with (inputs.secure_source).
MIRROR_TRUST = "vLLM loads the weights' files from it (a model with trust_remote_code imports its Python)"


def mirror_rules(v: Mapping[str, Any]) -> Tuple[List[str], List[str]]:
    """(problems, warnings) for where the weights come from (the mirror of sources http and rsync, a Hub mirror for
    hf): https only, unless vllm_allow_insecure_sources (then a warning every run). rsync's daemon protocol has no TLS
    at all, so an rsync mirror always needs the switch."""
    source = v.get("model_weights_source")
    name = {"http": "model_weights_mirror_url", "rsync": "model_weights_mirror_url", "hf": "model_weights_hf_endpoint"
            }.get(source)
    if not name:
        return [], []
    return inputs.secure_source(name, v.get(name), v.get(inputs.INSECURE_SWITCH), MIRROR_TRUST)


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """What to stage, and where: the staging name and repository default to the profile's name and source."""
    try:
        profile = model_profile.load_profile(v["vllm_service_profile"], specs.PROFILES_DIR)
    except model_profile.ProfileError as exc:
        raise PlanError([str(exc)])
    source = v["model_weights_source"]
    name = v["model_weights_name"] or profile["name"]
    repo_id = v["model_weights_repo_id"] or (profile["source"] if not profile["source"].startswith("/") else "")
    dest = v["model_weights_dest"] or "/var/cache/vllm/models/" + name
    problems = []
    if source != "none" and not PLAIN_NAME.match(name):
        problems.append("with a source, the staging name must be a plain name, got %r (from model_weights_name or the "
                        "profile's name)" % name)
    if source == "hf" and not REPO_ID.match(repo_id):
        problems.append("model_weights_source hf needs a repository as org/name, got %r (from model_weights_repo_id or "
                        "the profile's source)" % repo_id)
    if source in ("http", "rsync") and not dest.startswith("/"):
        problems.append("model_weights_source %s needs an absolute destination, got %r (model_weights_dest)"
                        % (source, dest))
    state = v["model_weights_state_dir"]
    location = {"hf": repo_id, "local": v["model_weights_local_path"]}.get(source, v["model_weights_mirror_url"])
    return {"problems": problems, "warnings": mirror_rules(v)[1], "plan": {
        "profile": profile, "name": name, "repo_id": repo_id, "dest": dest, "location": location,
        "location_shown": urls.mask_userinfo(location),
        "record": "%s/%s.json" % (state, name), "progress": "%s/%s.progress.json" % (state, name),
        "polls": int(math.ceil(v["model_weights_download_timeout"] / float(v["model_weights_poll_interval"]))) + 1},
        "outcome": ("model_weights: none staged (model_weights_source none): vLLM loads %s itself" % profile["source"]
                    if source == "none" else "model_weights: %s from %s %s" % (name, source, location))}
