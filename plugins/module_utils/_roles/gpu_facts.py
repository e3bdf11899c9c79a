# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_facts role's rules. Private to the collection: the role_plan action (module_utils/_common/plan.py) applies them to the role's
converted values."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

KNOWN_OTHER = ()


def input_problems(v: Mapping[str, Any]) -> List[str]:
    if v.get("gpu_facts_backend") == "snapshot" and not v.get("gpu_facts_snapshot"):
        return ["gpu_facts_backend snapshot needs gpu_facts_snapshot (the absolute path of a snapshot file on the node)"]
    return []


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    """Nothing to derive: the module reads the GPUs with these values."""
    return {"plan": {}, "outcome": ""}
