# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' interfaces as their files state them: each role's meta/argument_specs.yml and defaults/main.yml.
Private to the collection.

Read on the controller from the collection itself, in a checkout and in an installed collection alike (the roles
directory is found from this file's place), by the role_plan action and the role_argument_spec lookup.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional

COLLECTION = "moeops.inference"
# plugins/module_utils/_common/<this file> is four levels below the collection's root.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES_DIR = os.path.join(COLLECTION_ROOT, "roles")
PROFILES_DIR = os.path.join(COLLECTION_ROOT, "profiles")
ROLE_NAME = re.compile(r"^[a-z0-9_]+$")
RUNTIME_FILE = os.path.join(COLLECTION_ROOT, "meta", "runtime.yml")


def collection_version() -> str:
    """This collection's version: the installed collection's MANIFEST.json, else the checkout's galaxy.yml."""
    import json
    manifest = os.path.join(COLLECTION_ROOT, "MANIFEST.json")
    if os.path.isfile(manifest):
        with open(manifest) as f:
            return str(json.load(f)["collection_info"]["version"])
    with open(os.path.join(COLLECTION_ROOT, "galaxy.yml")) as f:
        for line in f:
            found = re.match(r"^version:\s*['\"]?([^'\"\s#]+)", line)
            if found:
                return found.group(1)
    raise SpecError("no version in %s/galaxy.yml" % COLLECTION_ROOT)


# The newest ansible-core the collection is tested on (docs/ansible-versions.md); the oldest is meta/runtime.yml's.
NEWEST_TESTED = (2, 21)
SPEC_FILES = ("argument_specs.yml", "argument_specs.yaml")


class SpecError(ValueError):
    """A role, entry point or file that cannot be read; the message says which and what exists."""


def _spec_file(roles_dir: str, role: str) -> Optional[str]:
    for name in SPEC_FILES:
        path = os.path.join(roles_dir, role, "meta", name)
        if os.path.isfile(path):
            return path
    return None


def spec_roles(roles_dir: str = ROLES_DIR) -> List[str]:
    """The roles under `roles_dir` that have an argument spec file, sorted."""
    try:
        entries = os.listdir(roles_dir)
    except OSError:
        return []
    return sorted(r for r in entries if ROLE_NAME.match(r) and _spec_file(roles_dir, r))


def short_name(role: Any) -> Any:
    """`vllm_service` for `moeops.inference.vllm_service`; anything else as it is."""
    return role[len(COLLECTION) + 1:] if isinstance(role, str) and role.startswith(COLLECTION + ".") else role


def spec_path(role: Any, roles_dir: str = ROLES_DIR) -> str:
    """The meta/argument_specs.yml of `role` (short or fully qualified name)."""
    name = short_name(role)
    path = _spec_file(roles_dir, name) if isinstance(name, str) and ROLE_NAME.match(name) else None
    if path is None:
        raise SpecError("%s has no role %r with an argument spec (meta/argument_specs.yml); roles with one: %s"
                        % (COLLECTION, role, ", ".join(spec_roles(roles_dir)) or "none"))
    return path


def _load_yaml(path: str, origin: Optional[str] = None) -> Any:
    import yaml  # PyYAML: always on the controller (ansible-core needs it); only controller code calls this

    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError("cannot read %s: %s" % (path, exc))
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = " at line %d, column %d" % (mark.line + 1, mark.column + 1) if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
        raise SpecError("%s is not valid YAML%s: %s" % (origin or path, where, problem))


def entry_point_options(data: Any, origin: str, entry_point: Any) -> Dict[str, Any]:
    """The options of `entry_point` in a loaded argument spec file (`origin` names it in messages)."""
    specs = data.get("argument_specs") if isinstance(data, dict) else None
    if not isinstance(specs, dict):
        raise SpecError("%s has no argument_specs mapping" % origin)
    if not isinstance(entry_point, str) or entry_point not in specs:
        raise SpecError("%s has no entry point %r; its entry points: %s"
                        % (origin, entry_point, ", ".join(sorted(map(str, specs))) or "none"))
    spec = specs[entry_point]
    options = spec.get("options") if isinstance(spec, dict) else None
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise SpecError("%s: the options of entry point %s are a %s, not a mapping"
                        % (origin, entry_point, type(options).__name__))
    return options


def role_options(role: Any, entry_point: str = "main", roles_dir: str = ROLES_DIR) -> Dict[str, Any]:
    """The options of a role's entry point, read from its argument spec file."""
    path = spec_path(role, roles_dir)
    origin = "role %s (%s)" % (short_name(role), path)
    return entry_point_options(_load_yaml(path, origin), origin, entry_point)


def role_defaults(role: Any, roles_dir: str = ROLES_DIR) -> Dict[str, Any]:
    """The role's defaults/main.yml as written (templates untemplated); {} without one."""
    path = os.path.join(roles_dir, short_name(role), "defaults", "main.yml")
    if not os.path.isfile(path):
        return {}
    data = _load_yaml(path)
    return data if isinstance(data, dict) else {}


def _version(text: Any) -> tuple:
    """(2, 19, 0) for "2.19.0", "2.19.0rc1" or "2.19"; () for text without a leading number."""
    parts = []
    for part in str(text).strip().split("."):
        digits = re.match(r"^[0-9]+", part)
        if not digits:
            break
        parts.append(int(digits.group(0)))
        if digits.group(0) != part:
            break
    return tuple(parts)


def oldest_ansible(runtime_file: str = RUNTIME_FILE) -> str:
    """The oldest ansible-core the collection supports: meta/runtime.yml's requires_ansible (">=2.19.0")."""
    data = _load_yaml(runtime_file)
    wanted = str((data or {}).get("requires_ansible", "")) if isinstance(data, dict) else ""
    found = re.search(r">=\s*([0-9][0-9.]*)", wanted)
    if not found:
        raise SpecError("%s: requires_ansible %r has no lower bound (>=X.Y)" % (runtime_file, wanted))
    return found.group(1)


def ansible_version_problem(running: str, runtime_file: str = RUNTIME_FILE) -> str:
    """'' on a supported ansible-core, else the refusal: below the range, nothing else works as the roles expect (2.18
    templates a null as '', and the roles' checks would then refuse options nobody set)."""
    oldest = oldest_ansible(runtime_file)
    if _version(running)[:2] < _version(oldest)[:2]:
        return ("moeops.inference needs ansible-core %s to %d.%d (meta/runtime.yml: requires_ansible >=%s); this "
                "controller runs ansible-core %s, which is not supported: nothing was checked or changed. Upgrade "
                "the controller, e.g. pip install 'ansible-core>=%s,<%d.%d' (docs/ansible-versions.md)"
                % (".".join(oldest.split(".")[:2]), NEWEST_TESTED[0], NEWEST_TESTED[1], oldest, running,
                   ".".join(oldest.split(".")[:2]), NEWEST_TESTED[0], NEWEST_TESTED[1] + 1))
    return ""
