# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Ray to install beside a given vLLM.

vLLM releases have declared Ray in different ways: some list it in their
wheel's Requires-Dist (e.g. ``ray[cgraph]>=2.48.0``), vLLM 0.33.0 does not
declare it at all ("vLLM does not depend on Ray, so there is no pin to carry
this", vllm/distributed/weight_transfer/sharded_rdt_common.py).  The role reads
the installed vLLM's Requires-Dist and passes it here with its own pin: the pin
is used when it satisfies what vLLM declares; an exact ``==`` from vLLM wins;
a pin outside vLLM's range is an error.  Pure: no packaging import, so it runs
wherever the controller's Ansible runs.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

_REQ = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[(?P<extras>[^\]]*)\])?\s*(?P<spec>[^;]*)(?:;(?P<marker>.*))?$")
_CLAUSE = re.compile(r"^\s*(===|==|!=|~=|>=|<=|>|<)\s*([0-9][0-9A-Za-z.*+!-]*)\s*$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def release(version: str) -> Tuple[int, ...]:
    """The numeric release part of a version: "2.60.0" -> (2, 60, 0); "2.49.0rc1" -> (2, 49, 0)."""
    match = re.match(r"^\s*v?(?:\d+!)?(\d+(?:\.\d+)*)", version)
    if not match:
        raise ValueError("not a version: %r" % version)
    parts = [int(p) for p in match.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _satisfies(version: str, op: str, want: str) -> bool:
    if want.endswith(".*"):
        prefix = release(want[:-2])
        have = release(version) + (0,) * len(prefix)
        inside = have[:len(prefix)] == prefix
        return inside if op == "==" else not inside
    v, w = release(version), release(want)
    if op in ("==", "==="):
        return v == w
    if op == "!=":
        return v != w
    if op == ">=":
        return v >= w
    if op == "<=":
        return v <= w
    if op == ">":
        return v > w
    if op == "<":
        return v < w
    # ~=X.Y.Z means >=X.Y.Z, ==X.Y.*: compare the written parts, trailing zeros included.
    written = [int(p) for p in re.match(r"^\s*v?(?:\d+!)?(\d+(?:\.\d+)*)", want).group(1).split(".")]
    prefix = tuple(written[:-1] or written)
    have = tuple(int(p) for p in re.match(r"^\s*v?(?:\d+!)?(\d+(?:\.\d+)*)", version).group(1).split(".")) + (0,) * len(prefix)
    return v >= w and have[:len(prefix)] == prefix


def ray_requirements(requires: Optional[List[str]]) -> List[Dict[str, Any]]:
    """vLLM's Requires-Dist entries that name ray, parsed."""
    found = []
    for line in requires or []:
        match = _REQ.match(line or "")
        if not match or _canonical(match.group("name")) != "ray":
            continue
        spec = match.group("spec").strip().strip("()")
        clauses = []
        for part in [p for p in spec.split(",") if p.strip()]:
            clause = _CLAUSE.match(part)
            if not clause:
                raise ValueError("cannot read the ray requirement %r" % line)
            clauses.append((clause.group(1), clause.group(2)))
        found.append({
            "requirement": line.strip(),
            "extras": [e.strip() for e in (match.group("extras") or "").split(",") if e.strip()],
            "clauses": clauses,
            "marker": (match.group("marker") or "").strip(),
        })
    return found


def ray_version_plan(requires: Optional[List[str]], pinned: str, vllm_version: str = "") -> Dict[str, Any]:
    """{'version', 'source', 'reason', 'declared': [requirement strings], 'errors': [..]}."""
    errors: List[str] = []
    declared = ray_requirements(requires)
    what = "vLLM %s" % vllm_version if vllm_version else "the installed vLLM"
    exact = [v for r in declared for op, v in r["clauses"] if op in ("==", "===") and not v.endswith(".*")]
    if exact:
        version, source = exact[0], "vllm_metadata"
        reason = "%s pins %s" % (what, declared[0]["requirement"])
    elif declared:
        version, source = pinned, "role_pin"
        reason = "%s declares %s; the role's pin %s satisfies it" % (
            what, " and ".join(r["requirement"] for r in declared), pinned)
    else:
        version, source = pinned, "role_pin"
        reason = ("%s declares no Ray requirement (vLLM treats Ray as optional); the role's pin %s is the "
                  "version this collection is tested with" % (what, pinned))
    if not version:
        errors.append("no Ray version: %s declares none and ray_cluster_ray_version is empty" % what)
    else:
        for req in declared:
            for op, want in req["clauses"]:
                if not _satisfies(version, op, want):
                    errors.append("Ray %s does not satisfy %s's requirement %s" % (version, what, req["requirement"]))
    return {
        "version": version,
        "source": source,
        "reason": reason,
        "declared": [r["requirement"] for r in declared],
        "extras": sorted(set(e for r in declared for e in r["extras"])),
        "errors": errors,
    }
