# -*- coding: utf-8 -*-
"""The role_plan action itself (plugins/action/role_plan.py), run as Ansible runs it for a task: what its result
carries. A refusal fails with the message and the problems only (Ansible prints a failed result whole: the plan and
the inputs, 5 to 22 KB, buried the message); a plan that stands, or problems collected with fail_on_problems false
(the preflight role), return the plan, the converted inputs, the outcome and the names checked."""
from __future__ import annotations

import json

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.plugins.loader import connection_loader
from ansible.template import Templar

from ansible_collections.moeops.inference.plugins.action.role_plan import ActionModule
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from conftest import load_json, role_defaults

REFUSAL_KEYS = {"changed", "failed", "msg", "problems", "plan_warnings", "warnings"}
PLAN_KEYS = {"plan", "inputs", "outcome", "checked"}


def action(args, **host_vars):
    """The action's result for a task with `args`, on a host whose variables are vllm_service's defaults (the
    templated ones as the role renders them) and `host_vars`."""
    task_vars = dict(role_defaults("vllm_service"), vllm_service_env_file="/etc/vllm/vllm.env",
                     vllm_service_api_key_file="/etc/vllm/vllm.api-key", **host_vars)
    loader = DataLoader()
    task = Task.load({"action": "moeops.inference.role_plan", "args": args}, loader=loader)
    context = PlayContext()
    connection = connection_loader.get("ansible.builtin.local", context, None)  # never connects: the action has no need
    plugin = ActionModule(task, connection, context, loader, Templar(loader=loader, variables=task_vars), None)
    return plugin.run(task_vars=task_vars)


def vllm_service(**host_vars):
    gpus = topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "rtxpro6000-x8-2numa")
    fail = host_vars.pop("fail_on_problems", True)
    return action({"role": "vllm_service", "context": {"gpus": gpus}, "fail_on_problems": fail}, **host_vars)


# MiniMax-M2.5 on tensor parallel 3: refused by the heads rule and the memory rule, after the plan was worked out.
BAD = {"vllm_service_profile": "minimax_m25", "vllm_service_tensor_parallel_size": 3}


def test_a_refusal_carries_the_message_and_the_problems_not_the_plan():
    result = vllm_service(**BAD)
    assert result["failed"] is True and set(result) == REFUSAL_KEYS, sorted(result)
    assert len(result["problems"]) == 2, result["problems"]
    assert "vllm_service_tensor_parallel_size 3 cannot split or replicate its 8 key/value heads" in result["problems"][0]
    assert "needs at least 280 GB" in result["problems"][1]
    assert result["msg"] == "; ".join(result["problems"])
    # What Ansible prints is the message, the problems and little else: the plan alone was over 15 KB.
    assert len(json.dumps(result)) < len(result["msg"]) * 2 + 300, len(json.dumps(result))


def test_the_same_problems_collected_return_the_plan_and_the_inputs():
    """fail_on_problems false (the preflight role collects every role's problems): nothing fails, all is returned."""
    result = vllm_service(fail_on_problems=False, **BAD)
    assert not result.get("failed") and "msg" not in result
    assert PLAN_KEYS <= set(result), sorted(result)
    assert result["problems"] == vllm_service(**BAD)["problems"]
    assert result["inputs"]["vllm_service_tensor_parallel_size"] == 3 and result["plan"]


def test_a_plan_that_stands_returns_what_the_roles_tasks_read():
    result = vllm_service(vllm_service_profile="minimax_m25", vllm_service_tensor_parallel_size="8")
    assert not result.get("failed") and result["problems"] == []
    assert result["inputs"]["vllm_service_tensor_parallel_size"] == 8  # converted: -e gives the string
    assert result["plan"]["workload"]["lines"] and result["outcome"]
    assert "vllm_service_profile" in result["checked"] and result["checked"] == sorted(result["checked"])


def test_a_refused_secret_is_not_quoted_in_the_message():
    result = vllm_service(vllm_service_api_key="sk-not shown", **BAD)
    assert result["failed"] is True
    assert "vllm_service_api_key must not contain whitespace" in result["msg"]
    assert "not shown" not in json.dumps(result)


def test_an_unknown_role_is_refused_or_collected():
    refused = action({"role": "no_such_role"})
    assert refused["failed"] is True and set(refused) == REFUSAL_KEYS, sorted(refused)
    assert refused["msg"].startswith("moeops.inference.role_plan: ") and refused["problems"][0] in refused["msg"]
    collected = action({"role": "no_such_role", "fail_on_problems": False})
    assert not collected.get("failed") and collected["plan"] is None and collected["inputs"] == {}
    assert collected["problems"] == refused["problems"]
