# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model profiles: their schema, the compute-capability constraints they carry,
the model dimensions (config.json first, the profile as fallback) and the
`vllm serve` arguments built from them.

Pure functions over plain data, used by the vllm_service role's plan
(_roles/vllm_service).  Private to the collection.  docs/model-profiles.md
documents the schema for people writing a profile.

The collection ships profiles as `profiles/<name>.yml`, each file the profile
mapping itself.  For the `moeops.inference.model_profile` lookup, `profile_path`
turns a name or an absolute path into a file, `load_profile_text` turns a file's
text into a checked profile, `known_profiles` lists the shipped names and
`load_profile` does all of it (the only function here that reads a file); each
raises ProfileError with a message for the user.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs, systemd_unit

# vLLM's --kv-cache-dtype choices (vllm/config/cache.py CacheDType) that a profile may ask for.
KV_CACHE_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
# vLLM's --chat-template-content-format choices.
CHAT_TEMPLATE_CONTENT_FORMATS = ("auto", "string", "openai")

_STR = (str,)
_INT = (int,)
_NUM = (int, float)
_BOOL = (bool,)

# key: (accepted types, required, what it is).  Booleans are refused where a number is
# expected (YAML `true` is not a size).
PROFILE_KEYS: Dict[str, Tuple[Tuple[type, ...], bool, str]] = {
    "name": (_STR, True, "profile name, for reports and the unit's comment"),
    "source": (_STR, True, "Hugging Face repo id (org/name) or an absolute path on the node"),
    "revision": (_STR, False, "Hugging Face revision (commit, tag or branch) the weights are pinned to"),
    "served_name": (_STR, True, "name clients ask for (--served-model-name)"),
    "quantization": (_STR, True, "what the weights are (descriptive; vLLM reads the method from config.json)"),
    "trust_remote_code": (_BOOL, False, "pass --trust-remote-code"),
    "tool_call_parser": (_STR, False, "--tool-call-parser (with --enable-auto-tool-choice)"),
    "reasoning_parser": (_STR, False, "--reasoning-parser"),
    "chat_template": (_STR, False, "--chat-template: an absolute path on the node or a template string"),
    "chat_template_content_format": (_STR, False, "--chat-template-content-format: auto, string or openai"),
    "default_chat_template_kwargs": ((dict,), False, "--default-chat-template-kwargs, given as a mapping"),
    "kv_cache_dtype": (_STR, False, "--kv-cache-dtype; auto (the default) is the model's dtype"),
    "max_model_len": (_INT, True, "--max-model-len"),
    "gpu_memory_utilization": (_NUM, True, "--gpu-memory-utilization, 0 to 1"),
    "weights_size_gb": (_NUM, True, "size of the weights on disk, GB (10^9 bytes)"),
    "min_gpu_memory_gb": (_NUM, True, "GPU memory (GB, 10^9 bytes) the model needs at gpu_memory_utilization"),
    "hidden_size": (_INT, True, "hidden size (all-reduce message size); config.json wins when present"),
    "num_attention_heads": (_INT, True, "attention heads; config.json wins when present"),
    "num_key_value_heads": (_INT, False, "key/value heads; config.json wins when present"),
    "tensor_parallel_divides_attention_heads": (_BOOL, False, "the tensor-parallel size must divide the heads "
                                                "(default true: vLLM shards heads evenly)"),
    "tensor_parallel_sizes": ((list,), False, "the only tensor-parallel sizes allowed (empty: any vLLM accepts)"),
    "min_compute_capability": (_STR, False, "lowest compute capability the weights run on, e.g. 10.0 for NVFP4"),
    "allow_mixed_gpus": (_BOOL, False, "allow GPUs of different models (default false)"),
    "compute_capability_constraints": ((list,), False, "settings forced on given compute capabilities"),
    "extra_args": ((list,), False, "further vllm serve arguments the recipe asks for (strings)"),
    "description": (_STR, False, "one line for summaries and reports, e.g. that the model is a test model"),
    "canary": ((dict,), False, "the question the deploy asks after /health, and the answer it expects "
                               "(prompt, max_tokens, expect, chat_template_kwargs)"),
    "attention_type": (_STR, False, "attention as vLLM picks a backend for it: sparse_mla, mla or gqa (engine check)"),
    "attention_head_size": (_INT, False, "the head size vLLM's attention layer passes to the backend selector: "
                                         "kv_lora_rank + qk_rope_head_dim for MLA, head_dim for GQA; config.json "
                                         "wins when present (engine check)"),
    "num_routed_experts": (_INT, False, "routed experts per MoE layer; config.json wins when present (engine check)"),
    "quantization_method": (_STR, False, "the quantization method as vLLM names it, e.g. modelopt_fp4, "
                                         "compressed-tensors, fp8 (engine check)"),
    "moe_intermediate_size": (_INT, False, "each routed expert's intermediate size, as vLLM's fused MoE layer takes "
                                           "it (the weight-shape rules)"),
    "weight_block_size": ((list,), False, "block-FP8 weights: the [block_n, block_k] of config.json's "
                                          "quantization_config.weight_block_size (the weight-shape rules)"),
    "quantization_group_size": (_INT, False, "group-quantized weights (INT4, NVFP4): the routed experts' group size "
                                             "(the weight-shape rules)"),
}

CANARY_KEYS: Dict[str, Tuple[Tuple[type, ...], bool]] = {
    "prompt": (_STR, True),
    "max_tokens": (_INT, False),
    "expect": (_STR, False),
    "chat_template_kwargs": ((dict,), False),
}
# The canary of a profile that names none: a plain question, judged for garbage only (no expectation).
DEFAULT_CANARY: Dict[str, Any] = {"prompt": "What is 6 times 7? Answer with the number only.", "max_tokens": 32,
                                  "expect": "", "chat_template_kwargs": {}}

CONSTRAINT_KEYS: Dict[str, Tuple[Tuple[type, ...], bool]] = {
    "compute_capabilities": ((list,), True),
    "reason": (_STR, True),
    "kv_cache_dtype": (_STR, False),
    "disable_custom_all_reduce": (_BOOL, False),
    "extra_args": ((list,), False),
}


def _type_ok(value: Any, types: Tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _type_names(types: Tuple[type, ...]) -> str:
    names = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "mapping", list: "list"}
    return " or ".join(sorted({names.get(t, t.__name__) for t in types}))


def _cc_tuple(cc: Any) -> Optional[Tuple[int, int]]:
    try:
        major, _dot, minor = str(cc).partition(".")
        return int(major), int(minor or 0)
    except ValueError:
        return None


def line_break_problems(var: str, key: Any, value: Any) -> List[str]:
    """A line break in a profile's key or anywhere in its value (a mapping's keys and values, a list's items, at any
    depth), each named by its place (`vllm_service_profile.served_name`, `...extra_args[2]`, `...canary.prompt`) and
    by what it holds; the text itself is never shown."""
    found: List[str] = []

    def walk(place: str, item: Any) -> None:
        if isinstance(item, str):
            what = [name for char, name in inputs.LINE_BREAKERS.items() if char in item]
            if what:
                found.append("%s contains %s" % (place, " and ".join(what)))
        elif isinstance(item, Mapping):
            for k, v in item.items():
                if isinstance(k, str) and any(c in k for c in systemd_unit.LINE_BREAKS):
                    found.append("%s has a key that spans lines (not shown)" % place)
                    continue
                walk("%s.%s" % (place, k), v)
        elif isinstance(item, (list, tuple)):
            for index, one in enumerate(item):
                walk("%s[%d]" % (place, index), one)

    if isinstance(key, str) and any(c in key for c in systemd_unit.LINE_BREAKS):
        found.append("%s has a key that spans lines (not shown)" % var)
    else:
        walk("%s.%s" % (var, key), value)
    return ["%s: every string of a profile is one line (profile strings reach the unit's arguments and comments, "
            "where a line break would start a directive; a multi-line chat template goes in a file on the node, "
            "named by its absolute path)" % f for f in found]


def _described(value: Any) -> str:
    """A value as a message shows it: its type, and the value itself only when it is one short line (a file's other
    lines are never echoed)."""
    if value is None or isinstance(value, (bool, int, float)):
        return "%s %r" % (type(value).__name__, value)
    if isinstance(value, str):
        if len(value) <= 60 and not any(c in value for c in systemd_unit.LINE_BREAKS):
            return "str %r" % value
        return "a string of %d characters" % len(value)
    if isinstance(value, Mapping):
        return "a mapping of %d key(s)" % len(value)
    if isinstance(value, (list, tuple)):
        return "a list of %d item(s)" % len(value)
    return "a %s" % type(value).__name__


def validate_profile(profile: Any, var: str = "vllm_service_profile") -> List[str]:
    """Every problem with a profile, each message naming `var.key`; [] when it is sound."""
    if not isinstance(profile, Mapping) or not profile:
        return ["%s: expected a model profile (a mapping, such as the moeops.inference.model_profile lookup "
                "returns), got %s"
                % (var, "an empty mapping" if isinstance(profile, Mapping) else type(profile).__name__)]
    problems: List[str] = []
    # A line break anywhere (a key, a value, an item, at any depth) is refused first, named by its place and never
    # echoed: the profile's strings reach the unit's argv and comments, where it would start a directive of the
    # file's choosing. Such a key gets that one message.
    broken = {key for key in profile if line_break_problems(var, key, profile[key])}
    for key in sorted(profile, key=str):
        problems += line_break_problems(var, key, profile[key])
    for key in sorted(set(profile) - set(PROFILE_KEYS) - broken, key=str):  # key=str: YAML allows keys such as 1
        problems.append("%s.%s: not a profile key (known keys: %s); see docs/model-profiles.md"
                        % (var, key, ", ".join(sorted(PROFILE_KEYS))))
    for key, (types, required, what) in PROFILE_KEYS.items():
        if key not in profile or profile[key] is None:
            if required:
                problems.append("%s.%s: required (%s)" % (var, key, what))
            continue
        if key not in broken and not _type_ok(profile[key], types):
            problems.append("%s.%s: must be a %s, got %s"
                            % (var, key, _type_names(types), _described(profile[key])))
    ok = dict((k, v) for k, v in profile.items()
              if k in PROFILE_KEYS and k not in broken and v is not None and _type_ok(v, PROFILE_KEYS[k][0]))
    source = ok.get("source")
    if source is not None and not (source.startswith("/") or (source.count("/") == 1 and all(source.split("/")))):
        problems.append("%s.source: %r is neither a Hugging Face repo id (org/name) nor an absolute path" % (var, source))
    if "gpu_memory_utilization" in ok and not 0 < float(ok["gpu_memory_utilization"]) <= 1:
        problems.append("%s.gpu_memory_utilization: must be above 0 and at most 1, got %s"
                        % (var, ok["gpu_memory_utilization"]))
    for key in ("max_model_len", "weights_size_gb", "min_gpu_memory_gb", "hidden_size", "num_attention_heads",
                "num_key_value_heads", "attention_head_size", "num_routed_experts", "moe_intermediate_size",
                "quantization_group_size"):
        if key in ok and ok[key] <= 0:
            problems.append("%s.%s: must be above 0, got %s" % (var, key, ok[key]))
    if ok.get("kv_cache_dtype", "auto") not in KV_CACHE_DTYPES:
        problems.append("%s.kv_cache_dtype: %r is not one of vLLM's %s"
                        % (var, ok["kv_cache_dtype"], ", ".join(KV_CACHE_DTYPES)))
    if ok.get("chat_template_content_format", "auto") not in CHAT_TEMPLATE_CONTENT_FORMATS:
        problems.append("%s.chat_template_content_format: %r is not one of %s"
                        % (var, ok["chat_template_content_format"], ", ".join(CHAT_TEMPLATE_CONTENT_FORMATS)))
    profile = ok
    for key in ("extra_args",):
        if any(not isinstance(a, str) for a in profile.get(key) or []):
            problems.append("%s.%s: every element must be a string (quote numbers in YAML)" % (var, key))
    block = profile.get("weight_block_size")
    if block is not None and (len(block) != 2 or any(isinstance(b, bool) or not isinstance(b, int) or b < 1
                                                     for b in block)):
        problems.append("%s.weight_block_size: must be two positive integers [block_n, block_k]" % var)
    sizes = profile.get("tensor_parallel_sizes") or []
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        problems.append("%s.tensor_parallel_sizes: every element must be a positive integer" % var)
    if "min_compute_capability" in profile and _cc_tuple(profile["min_compute_capability"]) is None:
        problems.append("%s.min_compute_capability: %r is not a compute capability such as 10.0"
                        % (var, profile["min_compute_capability"]))
    for n, constraint in enumerate(profile.get("compute_capability_constraints") or []):
        where = "%s.compute_capability_constraints[%d]" % (var, n)
        if not isinstance(constraint, Mapping):
            problems.append("%s: must be a mapping" % where)
            continue
        for key in sorted(set(constraint) - set(CONSTRAINT_KEYS)):
            problems.append("%s.%s: not a constraint key (known: %s)" % (where, key, ", ".join(sorted(CONSTRAINT_KEYS))))
        for key, (types, required) in CONSTRAINT_KEYS.items():
            if key not in constraint:
                if required:
                    problems.append("%s.%s: required" % (where, key))
            elif not _type_ok(constraint[key], types):
                problems.append("%s.%s: must be a %s" % (where, key, _type_names(types)))
        ccs = constraint.get("compute_capabilities")
        if isinstance(ccs, list) and (not ccs or any(not isinstance(c, str) or _cc_tuple(c) is None for c in ccs)):
            problems.append("%s.compute_capabilities: a non-empty list of strings such as \"12.0\"" % where)
        if constraint.get("kv_cache_dtype", "auto") not in KV_CACHE_DTYPES:
            problems.append("%s.kv_cache_dtype: %r is not one of vLLM's %s"
                            % (where, constraint["kv_cache_dtype"], ", ".join(KV_CACHE_DTYPES)))
    problems += _canary_problems(profile.get("canary"), "%s.canary" % var)
    return problems


def _canary_problems(canary: Any, where: str) -> List[str]:
    if canary is None:
        return []
    problems = ["%s.%s: not a canary key (known: %s)" % (where, key, ", ".join(sorted(CANARY_KEYS)))
                for key in sorted(set(canary) - set(CANARY_KEYS), key=str)]
    for key, (types, required) in CANARY_KEYS.items():
        if key not in canary or canary[key] is None:
            if required:
                problems.append("%s.%s: required" % (where, key))
        elif not _type_ok(canary[key], types):
            problems.append("%s.%s: must be a %s" % (where, key, _type_names(types)))
    if isinstance(canary.get("max_tokens"), int) and not 1 <= canary["max_tokens"] <= 4096:
        problems.append("%s.max_tokens: must be 1 to 4096, got %s" % (where, canary["max_tokens"]))
    if isinstance(canary.get("expect"), str):
        try:
            re.compile(canary["expect"])
        except re.error as exc:
            problems.append("%s.expect: not a regular expression: %s" % (where, exc))
    return problems


def canary(profile: Mapping[str, Any]) -> Dict[str, Any]:
    """The profile's canary with the defaults filled in (DEFAULT_CANARY where the profile names none)."""
    out = dict(DEFAULT_CANARY)
    out.update({k: v for k, v in (profile.get("canary") or {}).items() if v is not None})
    return out


# The variable that names a profile in the roles; every loading error starts with it.
PROFILE_VAR = "vllm_service_profile"
# A shipped profile's name: the base name of profiles/<name>.yml.
PROFILE_NAME = re.compile(r"^[a-z0-9_]+$")
# The wrapper key of the profile files of old (playbooks/models/<model>.yml, loaded with include_vars).
_OLD_WRAPPER = "vllm_model_profile"


class ProfileError(ValueError):
    """A profile that cannot be found, read or used; the message starts with the variable that named it."""


def known_profiles(profiles_dir: str) -> List[str]:
    """The names of the profiles shipped in `profiles_dir` (<name>.yml files), sorted; [] without the directory."""
    try:
        entries = os.listdir(profiles_dir)
    except OSError:
        return []
    return sorted(entry[:-4] for entry in entries
                  if entry.endswith(".yml") and PROFILE_NAME.match(entry[:-4])
                  and os.path.isfile(os.path.join(profiles_dir, entry)))


def _short(data: Any, limit: int = 60) -> str:
    text = repr(data)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _kind(value: Any) -> str:
    """What a value is, in YAML's words, with an article; Ansible's tagged and lazy subclasses of the builtin
    types (_AnsibleTaggedInt, _AnsibleLazyTemplateList, ...) read as their base type."""
    for types, kind in ((bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"),
                        (Mapping, "a mapping"), ((list, tuple), "a list")):
        if isinstance(value, types):
            return kind
    return "a %s" % type(value).__name__


def _got(value: Any) -> str:
    return "null" if value is None else "%s (%s)" % (_kind(value), _short(value))


def _accepted(profiles_dir: str) -> str:
    known = known_profiles(profiles_dir)
    return ("the name of a profile shipped with the collection (%s) or the absolute path of a profile file on "
            "the controller" % (", ".join(known) if known else "none found in %s" % profiles_dir))


def not_set(profiles_dir: str, var: str = PROFILE_VAR) -> str:
    """The refusal of an unset or empty profile: the collection has no default model (a typo'd variable name once
    left the default in place, and the play planned a 595 GB model nobody asked for)."""
    return ("%s: not set, and moeops.inference deploys no model by default; set %s (in the inventory, or "
            "-e %s=NAME) to %s" % (var, var, var, _accepted(profiles_dir)))


def unset(value: Any) -> bool:
    """Null, empty or blank: no profile named."""
    return value is None or (isinstance(value, str) and not value.strip())


def unset_problems(value: Any, profiles_dir: str, var: str = PROFILE_VAR) -> List[str]:
    """The input rule of the roles that load the profile: told with their other input problems (a misspelt
    vllm_service_profle beside it), not only once the plan loads the profile."""
    return [not_set(profiles_dir, var)] if unset(value) else []


def profile_origin(value: Any) -> str:
    """Where the profile in use came from, for the outcome line, the summary and the settings report: a shipped
    profile by its name and file, or the user's own file by its path."""
    text = str(value)
    if os.path.isabs(text):
        return "%s (your file)" % text
    return "%s (profiles/%s.yml, shipped with the collection)" % (text, text)


def profile_path(value: Any, profiles_dir: str, var: str = PROFILE_VAR) -> str:
    """The file a profile name or absolute path stands for.

    A name (lower case letters, digits and _) is `<profiles_dir>/<name>.yml` and must exist there; an absolute
    path is returned as it is (load_profile reports a missing file).  Nothing (null or empty) is refused with the
    choices: there is no default profile.  Anything else raises ProfileError.
    """
    if unset(value):
        raise ProfileError(not_set(profiles_dir, var))
    if not isinstance(value, str):
        raise ProfileError("%s: expected %s, got %s" % (var, _accepted(profiles_dir), _got(value)))
    if any(c in value for c in systemd_unit.LINE_BREAKS):  # not echoed: the input rules name it (the broken part)
        raise ProfileError("%s: a profile name or path cannot span lines; expected %s" % (var, _accepted(profiles_dir)))
    if os.path.isabs(value):
        return value
    if PROFILE_NAME.match(value):
        path = os.path.join(profiles_dir, value + ".yml")
        if os.path.isfile(path):
            return path
        known = known_profiles(profiles_dir)
        raise ProfileError("%s: unknown model profile %r; known profiles: %s; the absolute path of a profile file "
                           "on the controller works too" % (var, value, ", ".join(known) if known else "none"))
    raise ProfileError("%s: %r is not a profile name or an absolute path; expected %s (a relative path is not "
                       "accepted: write it as an absolute path)" % (var, value, _accepted(profiles_dir)))


def load_profile_text(text: str, origin: str, var: str = PROFILE_VAR) -> Dict[str, Any]:
    """The profile in a file's text (`origin` names the file in messages): YAML holding one mapping that
    validate_profile accepts.  Values are plain data, never templates."""
    import yaml  # PyYAML: always there on the controller (ansible-core needs it); imported here so that
    # module_utils importers on managed nodes, which never load profiles, do not need it.

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = " at line %d, column %d" % (mark.line + 1, mark.column + 1) if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
        raise ProfileError("%s: %s is not valid YAML%s: %s" % (var, origin, where, problem))
    if data is None:
        raise ProfileError("%s: %s is empty; expected a model profile (a mapping of the keys in "
                           "docs/model-profiles.md)" % (var, origin))
    if not isinstance(data, dict):
        # What the file holds, never its text: a file given by mistake (an env file, a key) is not echoed.
        raise ProfileError("%s: %s holds %s, not a mapping; expected a model profile (a mapping of the keys in "
                           "docs/model-profiles.md)" % (var, origin, _kind(data)))
    if list(data) == [_OLD_WRAPPER] and isinstance(data[_OLD_WRAPPER], dict):
        raise ProfileError("%s: %s holds its profile under %s:, the vars-file form of old; remove that key and "
                           "dedent the rest so that the file is the profile mapping itself" % (var, origin, _OLD_WRAPPER))
    problems = validate_profile(data, var)
    if problems:
        raise ProfileError("%s: %s is not a valid model profile: %s" % (var, origin, "; ".join(problems)))
    return data


def load_profile(value: Any, profiles_dir: str, var: str = PROFILE_VAR) -> Dict[str, Any]:
    """The profile that `value` (a shipped profile's name or an absolute path) stands for, read and checked."""
    path = profile_path(value, profiles_dir, var)
    origin = path if os.path.isabs(str(value)) else "profile %s (%s)" % (value, path)
    if not os.path.exists(path):
        raise ProfileError("%s: the profile file %s does not exist" % (var, path))
    if os.path.isdir(path):
        raise ProfileError("%s: %s is a directory, not a profile file" % (var, path))
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ProfileError("%s: cannot read the profile file %s: %s" % (var, path, exc.strerror or exc))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError("%s: %s is not UTF-8 text (byte %d): not a profile file" % (var, origin, exc.start))
    return load_profile_text(text, origin, var)


def compute_capabilities(facts: Optional[Mapping[str, Any]]) -> List[str]:
    """The distinct compute capabilities in the GPU facts, sorted."""
    return sorted({str(g.get("compute_capability")) for g in (facts or {}).get("gpus") or []
                   if g.get("compute_capability")})


def applicable_constraints(profile: Mapping[str, Any], ccs: Sequence[str]) -> List[Dict[str, Any]]:
    """The profile's constraints that apply to GPUs of these compute capabilities."""
    return [dict(c) for c in profile.get("compute_capability_constraints") or []
            if set(c.get("compute_capabilities") or []) & set(ccs)]


def effective_settings(profile: Mapping[str, Any], ccs: Sequence[str]) -> Dict[str, Any]:
    """kv_cache_dtype, disable_custom_all_reduce and extra_args once the constraints for `ccs`
    are applied, with the reason for each forced value."""
    settings: Dict[str, Any] = {
        "kv_cache_dtype": profile.get("kv_cache_dtype") or "auto",
        "disable_custom_all_reduce": False,
        "extra_args": list(profile.get("extra_args") or []),
        "applied": [],
    }
    for c in applicable_constraints(profile, ccs):
        forced = []
        if c.get("kv_cache_dtype"):
            settings["kv_cache_dtype"] = c["kv_cache_dtype"]
            # auto is no flag at all: vLLM's choice for the model on these GPUs (a profile's other dtype is undone).
            forced.append("--kv-cache-dtype %s" % c["kv_cache_dtype"] if c["kv_cache_dtype"] != "auto"
                          else "the KV cache dtype left to vLLM (auto)")
        if c.get("disable_custom_all_reduce"):
            settings["disable_custom_all_reduce"] = True
            forced.append("--disable-custom-all-reduce")
        if c.get("extra_args"):
            settings["extra_args"] += list(c["extra_args"])
            forced.append(" ".join(c["extra_args"]))
        settings["applied"].append("compute capability %s: %s (%s)"
                                   % ("/".join(sorted(set(c["compute_capabilities"]) & set(ccs))),
                                      ", ".join(forced) or "nothing forced", c["reason"]))
    return settings


def _from_config(config: Optional[Mapping[str, Any]], key: str) -> Any:
    """A key of config.json, looked up at the top level, then in text_config (multimodal models such
    as Kimi-K2.5 keep the language model's dimensions there)."""
    if not isinstance(config, Mapping):
        return None
    if isinstance(config.get(key), int) and not isinstance(config.get(key), bool):
        return config[key]
    text = config.get("text_config")
    if isinstance(text, Mapping) and isinstance(text.get(key), int) and not isinstance(text.get(key), bool):
        return text[key]
    return None


# Each dimension and the config.json keys that give it.  The key/value head count has several
# names, read in vLLM's order (vllm/config/model.py, get_total_num_kv_heads).
CONFIG_DIMENSION_KEYS: Dict[str, Tuple[str, ...]] = {
    "hidden_size": ("hidden_size",),
    "num_attention_heads": ("num_attention_heads",),
    "num_key_value_heads": ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"),
}


def model_dimensions(profile: Mapping[str, Any], config: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """hidden_size, num_attention_heads, num_key_value_heads: from the downloaded config.json where it
    has them, else from the profile; `sources` says which for each.  A config.json that gives the
    attention heads but no key/value head count has as many key/value heads as attention heads, as
    vLLM reads it; the profile's count does not apply to those weights."""
    out: Dict[str, Any] = {"sources": {}}
    for key, names in CONFIG_DIMENSION_KEYS.items():
        value = next((v for v in (_from_config(config, name) for name in names) if v is not None), None)
        if value is None and key == "num_key_value_heads" and out["sources"]["num_attention_heads"] == "config.json":
            value = out["num_attention_heads"]  # no key/value head count: multi-head attention, as vLLM reads it
        if value is not None:
            out[key], out["sources"][key] = value, "config.json"
        elif profile.get(key) is not None:
            out[key], out["sources"][key] = profile[key], "profile"
        else:
            out[key], out["sources"][key] = None, "unknown"
    return out


def _option_value(args: Sequence[str], option: str) -> Optional[str]:
    for i, arg in enumerate(args):
        if arg == option and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None


def constraint_conflicts(profile: Mapping[str, Any], ccs: Sequence[str], extra_args: Sequence[str],
                         var: str = "vllm_service_extra_args") -> List[str]:
    """Problems where extra arguments undo what a compute-capability constraint forces."""
    problems = []
    for c in applicable_constraints(profile, ccs):
        wanted = c.get("kv_cache_dtype")
        given = _option_value(extra_args, "--kv-cache-dtype")
        if wanted and given is not None and given != wanted:
            problems.append(
                "%s: --kv-cache-dtype %s contradicts profile %s on compute capability %s, which must keep "
                "--kv-cache-dtype %s: %s" % (var, given, profile.get("name"), "/".join(c["compute_capabilities"]),
                                             wanted, c["reason"]))
    return problems


def last_option_value(args: Sequence[str], option: str) -> Optional[str]:
    """The value of the last `option` in `args` (vLLM's argparse keeps the last one), or None."""
    found = None
    for i, arg in enumerate(args):
        if arg == option and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(option + "="):
            found = arg.split("=", 1)[1]
    return found


def kv_cache_dtype_in_effect(profile: Mapping[str, Any], ccs: Sequence[str],
                             extra_args: Sequence[str] = ()) -> Tuple[str, str]:
    """(KV cache dtype, the key that sets it) as serve_args' command line gives it to vLLM on GPUs of `ccs`: the
    profile's kv_cache_dtype, then an applicable constraint's, the profile's extra_args, an applicable constraint's
    extra_args, then `extra_args` (vllm_service_extra_args), each later one winning as in vLLM's argparse."""
    dtype, key = profile.get("kv_cache_dtype") or "auto", "kv_cache_dtype"
    constraints = list(enumerate(profile.get("compute_capability_constraints") or []))
    for n, c in constraints:
        if set(c.get("compute_capabilities") or []) & set(ccs) and c.get("kv_cache_dtype"):
            dtype, key = c["kv_cache_dtype"], "compute_capability_constraints[%d].kv_cache_dtype" % n
    given = last_option_value(profile.get("extra_args") or [], "--kv-cache-dtype")
    if given is not None:
        dtype, key = given, "extra_args"
    for n, c in constraints:
        given = last_option_value(c.get("extra_args") or [], "--kv-cache-dtype")
        if set(c.get("compute_capabilities") or []) & set(ccs) and given is not None:
            dtype, key = given, "compute_capability_constraints[%d].extra_args" % n
    given = last_option_value(extra_args, "--kv-cache-dtype")
    if given is not None:
        dtype, key = given, "vllm_service_extra_args"
    return dtype, key


def serve_args(profile: Mapping[str, Any], tensor_parallel_size: int, host: str, port: int,
               max_model_len: Optional[int] = None, gpu_memory_utilization: Optional[float] = None,
               extra_args: Optional[Sequence[str]] = None, model: Optional[str] = None,
               ccs: Sequence[str] = (), expert_parallel: bool = False, numa_bind_off: bool = False) -> List[str]:
    """`vllm serve` arguments (after the executable) for the profile on GPUs of compute capabilities `ccs`.

    `model` replaces the profile's source (a staged local copy); the inventory's max_model_len,
    gpu_memory_utilization and extra_args win over the profile's; the compute-capability constraints are
    applied last so that nothing but an explicit extra argument can undo them (preflight refuses that).
    `expert_parallel` adds --enable-expert-parallel (the weight-shape policy's layout); `numa_bind_off` adds
    --no-numa-bind before every extra argument, so that a --numa-bind among them still wins.
    """
    settings = effective_settings(profile, ccs)
    args = ["serve", model or profile["source"],
            "--served-model-name", profile["served_name"],
            "--tensor-parallel-size", str(int(tensor_parallel_size))]
    if expert_parallel:
        args.append("--enable-expert-parallel")
    if numa_bind_off:
        args.append("--no-numa-bind")
    args += ["--max-model-len", str(int(max_model_len or profile["max_model_len"])),
             "--gpu-memory-utilization", str(gpu_memory_utilization or profile["gpu_memory_utilization"])]
    if profile.get("revision") and not model:
        args += ["--revision", profile["revision"]]
    if profile.get("trust_remote_code"):
        args.append("--trust-remote-code")
    if profile.get("tool_call_parser"):
        args += ["--enable-auto-tool-choice", "--tool-call-parser", profile["tool_call_parser"]]
    if profile.get("reasoning_parser"):
        args += ["--reasoning-parser", profile["reasoning_parser"]]
    if profile.get("chat_template"):
        args += ["--chat-template", profile["chat_template"]]
    if profile.get("chat_template_content_format") not in (None, "auto"):
        args += ["--chat-template-content-format", profile["chat_template_content_format"]]
    if profile.get("default_chat_template_kwargs"):
        args += ["--default-chat-template-kwargs",
                 json.dumps(profile["default_chat_template_kwargs"], sort_keys=True, separators=(",", ":"))]
    if settings["kv_cache_dtype"] != "auto":
        args += ["--kv-cache-dtype", settings["kv_cache_dtype"]]
    if settings["disable_custom_all_reduce"]:
        args.append("--disable-custom-all-reduce")
    args += settings["extra_args"]
    args += ["--host", str(host), "--port", str(int(port))]
    args += list(extra_args or [])
    return args
