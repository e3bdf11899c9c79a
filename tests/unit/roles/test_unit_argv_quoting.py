# -*- coding: utf-8 -*-
"""Every argv word of every unit the roles write is one word in systemd's quoting, whatever it holds, and the typed
options are the plan's converted values (issue 28, classes 1, 5 and 6): the Ray unit, nvidia-persistenced's drop-in,
the vLLM unit. Each is rendered with Ansible's own templating from the role's plan, then its Exec lines are split as
systemd splits them. A value that spans lines can never reach a comment either: the template fails instead."""
from __future__ import annotations

import os
import re
import shlex

import pytest
import role_templating

from ansible.errors import AnsibleError
from ansible_collections.moeops.inference.plugins.module_utils._facts import gpu_topology as topo
from conftest import load_json, role_result

ROLES = role_templating.ROLES
HOSTILE = "10.0.0.1 --dashboard-host 0.0.0.0"  # what a scope id or a host once carried into Ray's argv


def render(role, template, variables):
    with open(os.path.join(ROLES, role, "templates", template)) as f:
        return role_templating.render(f.read(), variables)


def exec_words(text, directive):
    """The argv of `directive` (ExecStart=...), continuation lines joined, split as systemd reads its quoting (double
    quotes with backslash escapes; `$$` and `%%` are systemd's own escapes, kept)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    lines = [line[len(directive) + 1:] for line in joined.splitlines() if line.startswith(directive + "=")]
    assert lines, "%s not in %s" % (directive, text)
    return shlex.split(lines[-1], posix=True)


def gpus():
    return topo.from_snapshot(load_json("constructed", "rtxpro6000-x8-2numa.json"), "rtxpro6000-x8-2numa")


def ray_unit(head=True, raw=None, **over):
    """The Ray unit from the plan of `over`; `raw`: values the template then sees in place of the planned ones (values
    the input rules refuse, to prove that the template alone still keeps them one word each)."""
    members = ["node-a", "node-b"]
    values = dict(ray_cluster_head_host="node-a", ray_cluster_head_address="node-a", ray_cluster_node_address="10.0.0.1",
                  ray_cluster_retired=[], ray_cluster_num_gpus=8)
    values.update(over)
    result = role_result("ray_cluster", {"members": members, "host": "node-a" if head else "node-b"}, **values)
    assert not result["problems"], result["problems"]
    values.update(raw or {})
    variables = role_templating.role_vars("ray_cluster")
    variables.update(values)
    variables.update(ansible_managed="Ansible managed", _ray_cluster=result, ansible_facts={"nvidia_gpu": gpus()},
                     _ray_cluster_ray_pick={"version": "2.60.0", "reason": "vLLM 0.33.0 asks for ray>=2.48"},
                     _ray_cluster_gpu_policy={"settings": {}}, _ray_cluster_net_policy={"settings": {}},
                     _ray_cluster_env={"VLLM_HOST_IP": values["ray_cluster_node_address"]})
    return result, render("ray_cluster", "ray.service.j2", variables)


@pytest.mark.parametrize("head", [True, False])
def test_every_word_of_rays_argv_is_one_word_whatever_it_holds(head):
    # The input rules refuse such values first (inputs.host); the unit must still never split them.
    _result, text = ray_unit(head, raw=dict(ray_cluster_node_address=HOSTILE, ray_cluster_dashboard_host=HOSTILE,
                                            ray_cluster_temp_dir="/var/lib/vllm/ray tmp"))
    argv = exec_words(text, "ExecStart")
    assert argv[:2] == ["/opt/vllm/engine/bin/ray", "start"]
    assert argv[argv.index("--node-ip-address") + 1] == HOSTILE
    assert argv[argv.index("--temp-dir") + 1] == "/var/lib/vllm/ray tmp"
    assert argv.count("--dashboard-host") == (1 if head else 0)
    if head:
        assert argv[argv.index("--dashboard-host") + 1] == HOSTILE
    else:
        pre = exec_words(text, "ExecStartPre")
        assert pre[0] == "/opt/vllm/engine/bin/python" and pre[1] == "-c" and pre[3:] == ["node-a", "6379"]


@pytest.mark.parametrize("word", ["false", "no", "0", "off"])
def test_rays_typed_options_are_the_converted_values(word):
    """-e ray_cluster_dashboard_enabled=false is the string 'false' (true to Jinja): the unit reads the plan's value."""
    result, text = ray_unit(True, ray_cluster_dashboard_enabled=word, ray_cluster_gcs_port="6390",
                            ray_cluster_join_timeout="100")
    assert result["values"]["ray_cluster_dashboard_enabled"] is False
    argv = exec_words(text, "ExecStart")
    assert argv[argv.index("--include-dashboard") + 1] == "false" and "--dashboard-host" not in argv
    assert argv[argv.index("--port") + 1] == "6390"
    assert "TimeoutStartSec=160" in text.splitlines()


def persistenced_dropin(**over):
    values = dict(over)
    result = role_result("nvidia_persistenced", {"gpus": gpus()}, **values)
    variables = role_templating.role_vars("nvidia_persistenced")
    variables.update(values)
    variables.update(ansible_managed="Ansible managed", _nvidia_persistenced=result)
    return result, render("nvidia_persistenced", "override.conf.j2", variables)


@pytest.mark.parametrize("word", ["false", "no", "0", "off"])
def test_persistenced_verbose_is_the_converted_value(word):
    result, text = persistenced_dropin(nvidia_persistenced_verbose=word)
    assert result["values"]["nvidia_persistenced_verbose"] is False
    assert exec_words(text, "ExecStart") == ["/usr/bin/nvidia-persistenced", "--user", "nvidia-persistenced",
                                             "--persistence-mode"]


def test_persistenced_user_is_one_word():
    # An account name the input rules refuse (inputs.account) still cannot add an argument here.
    result, text = persistenced_dropin(nvidia_persistenced_verbose="true")
    assert exec_words(text, "ExecStart")[-1] == "--verbose"
    result["values"]["nvidia_persistenced_user"] = "x --no-persistence-mode"
    variables = role_templating.role_vars("nvidia_persistenced")
    variables.update(ansible_managed="Ansible managed", _nvidia_persistenced=result)
    argv = exec_words(render("nvidia_persistenced", "override.conf.j2", variables), "ExecStart")
    assert argv[1:3] == ["--user", "x --no-persistence-mode"]


def vllm_unit(profile_name="tiny", venv="/opt/vllm venv"):
    profile = {"name": "tiny", "source": "example-org/tiny", "served_name": "tiny", "max_model_len": 4096,
               "gpu_memory_utilization": 0.9, "weights_size_gb": 1, "quantization": "bf16", "min_gpu_memory_gb": 1,
               "hidden_size": 1024, "num_attention_heads": 16}
    result = role_result("vllm_service", {"gpus": gpus(), "profile": profile})
    assert not result["problems"], result["problems"]
    result["plan"]["profile"] = dict(profile, name=profile_name)
    # Past the plan (which refuses whitespace in vllm_venv), to prove the template quotes the executable itself.
    result["plan"]["executable"] = venv + "/bin/vllm"  # past the loader, to prove the template's own guard
    variables = role_templating.role_vars("vllm_service")
    variables.update(ansible_managed="Ansible managed", _vllm_service=result, vllm_venv=venv,
                     ansible_facts={"nvidia_gpu": gpus()})
    return render("vllm_service", "vllm.service.j2", variables)


def test_vllms_executable_is_one_word():
    assert exec_words(vllm_unit(venv="/opt/vllm venv"), "ExecStart")[:2] == ["/opt/vllm venv/bin/vllm", "serve"]


def test_the_unit_runs_the_venv_the_link_points_at_never_the_link():
    """vllm_venv is the vllm role's link to the engine of the pins; the unit runs the venv the check read behind it,
    so that moving the link (a new engine built beside the serving one) changes nothing that runs."""
    profile = {"name": "tiny", "source": "example-org/tiny", "served_name": "tiny", "max_model_len": 4096,
               "gpu_memory_utilization": 0.9, "weights_size_gb": 1, "quantization": "bf16", "min_gpu_memory_gb": 1,
               "hidden_size": 1024, "num_attention_heads": 16}
    engine = "/opt/vllm/venvs/0.33.0-cuda-0123456789ab"
    result = role_result("vllm_service", {"gpus": gpus(), "profile": profile, "engine_venv": engine})
    assert (result["plan"]["executable"], result["plan"]["engine_venv"]) == (engine + "/bin/vllm", engine)
    variables = role_templating.role_vars("vllm_service")
    variables.update(ansible_managed="Ansible managed", _vllm_service=result, ansible_facts={"nvidia_gpu": gpus()})
    assert exec_words(render("vllm_service", "vllm.service.j2", variables), "ExecStart")[:2] == [engine + "/bin/vllm", "serve"]
    # No link (a venv given as a directory, or a fresh node in check mode): the path as given.
    assert role_result("vllm_service", {"gpus": gpus(), "profile": profile})["plan"]["executable"] == "/opt/vllm/engine/bin/vllm"


def test_the_vllm_unit_is_ordered_after_persistenced_but_never_starts_it():
    """Whether nvidia-persistenced runs is the nvidia_persistenced role's choice (nvidia_persistenced_start): a Wants=
    would start it at every vLLM start even with "never", and on a host with no GPU its failed start held vLLM's start
    for systemd's stop timeout (90 s, seen on a simulated node)."""
    unit = [line for line in vllm_unit().splitlines() if not line.startswith("#")]
    assert "After=network-online.target nvidia-persistenced.service" in unit
    assert [line for line in unit if line.startswith(("Wants=", "Requires=", "BindsTo=", "Requisite="))
            and "nvidia-persistenced" in line] == []


def test_the_vllm_unit_is_restarted_whatever_the_exit_status():
    """Issue 41: a request vLLM cannot survive killed its EngineCore, and its API server then exited with status 0;
    Restart=on-failure never restarted it. A stop by systemctl is never restarted (systemd.service(5)), and
    StartLimitBurst still bounds a model that cannot load."""
    unit = [line for line in vllm_unit().splitlines() if not line.startswith("#")]
    assert [line for line in unit if line.startswith("Restart=")] == ["Restart=always"]
    assert "StartLimitBurst=3" in unit


@pytest.mark.parametrize("breaker", ["\n", "\r", "\0"])
def test_a_line_break_never_reaches_the_units_header_comment(breaker):
    """Class 1: a profile name once wrote `[Service]` and `ExecStartPre=` lines into the header comment. The loader
    refuses it (test_model_profile.py); past it, the template fails rather than write the directive."""
    with pytest.raises((AnsibleError, ValueError), match="line break"):
        vllm_unit(profile_name="tiny" + breaker + "[Service]" + breaker + "ExecStartPre=/bin/sh -c id")
    text = vllm_unit(profile_name="tiny 50% [x]")
    assert "# Model profile tiny 50% [x]; GPUs 8x" in text.splitlines()


# --- every Exec line of every unit template: nothing interpolated bare -----------------------------------------------

# What an Exec line may interpolate: a value through systemd_escape(exec_arg=true, quote=true) (or the Ray unit's macro
# `w`, which is that), the vLLM unit's argument lines (built with it above them), or a choice between literal words.
EXEC_SAFE = (re.compile(r"systemd_escape\(exec_arg=true, quote=true\)\s*$"), re.compile(r"^\s*w\("),
             re.compile(r"^\s*(ns\.lines\[[^\]]*\]\s*\|\s*join\(' '\)|line)\s*$"),
             re.compile(r"^\s*'[^']*'\s+if\s+[\w.]+\s+else\s+'[^']*'\s*$"))
# Units of the API front and the Ray firewall, whose work of issue 28 owns them: their Exec lines interpolate constants
# of the role (a path under /etc/vllm named after the validated unit name, the ruleset's fixed path).
EXEC_EXEMPT = ("roles/vllm_service/templates/front.service.j2", "roles/ray_cluster/templates/ray-firewall.service.j2")


def exec_lines(text):
    """Every Exec*= directive of a template, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", re.sub(r"\{#.*?#\}", "", text, flags=re.S))
    return [line for line in joined.splitlines() if re.match(r"^Exec[A-Za-z]*=", line)]


def test_every_exec_line_of_every_unit_quotes_what_it_interpolates():
    root = os.path.dirname(ROLES)
    checked, bare = 0, []
    for path in sorted(glob_templates(root)):
        rel = os.path.relpath(path, root)
        if rel in EXEC_EXEMPT:
            continue
        with open(path) as f:
            for line in exec_lines(f.read()):
                for expr in re.findall(r"\{\{(.*?)\}\}", line):
                    checked += 1
                    if not any(p.search(expr) for p in EXEC_SAFE):
                        bare.append("%s: {{%s}}" % (rel, expr))
    assert bare == [] and checked >= 10, bare


def glob_templates(root):
    import glob
    return glob.glob(os.path.join(root, "roles", "*", "templates", "*.j2"))
