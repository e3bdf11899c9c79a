# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvidia_persistenced role's rules. Private to the collection: the role_plan action (module_utils/_common/plan.py) applies them to the role's
converted values."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ansible_collections.moeops.inference.plugins.module_utils._common import inputs


KNOWN_OTHER = ()


def input_problems(v: Mapping[str, Any]) -> List[str]:
    return (inputs.account("nvidia_persistenced_user", v.get("nvidia_persistenced_user"))
            + (["nvidia_persistenced_package must name a package"]
               if v.get("nvidia_persistenced_package") == "" else []))


def plan(v: Mapping[str, Any], ctx: Mapping[str, Any]) -> Dict[str, Any]:
    return {"plan": {}, "outcome": ""}
