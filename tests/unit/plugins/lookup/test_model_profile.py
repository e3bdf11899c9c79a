# -*- coding: utf-8 -*-
"""The model_profile lookup: shipped profiles by name, profile files by absolute path, an error for anything
else, and profile values that are never rendered as templates (a real ansible-playbook run)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import lookup_loader
from ansible.template import Templar, trust_as_template

from ansible_collections.moeops.inference.plugins.lookup import model_profile as plugin
from ansible_collections.moeops.inference.plugins.module_utils._policy import model_profile as mp
from conftest import PROFILES, REPO, shipped_profile

SHIPPED = ["glm5", "kimi_k25", "minimax_m25"]
TINY = {"name": "tiny", "source": "org/tiny", "served_name": "tiny", "quantization": "bf16", "max_model_len": 4096,
        "gpu_memory_utilization": 0.5, "weights_size_gb": 1, "min_gpu_memory_gb": 2, "hidden_size": 64,
        "num_attention_heads": 4}
TINY_TEXT = "".join("%s: %s\n" % (k, json.dumps(v)) for k, v in TINY.items())


@pytest.fixture
def lookup():
    """The plugin as Ansible loads it, by its fully qualified name."""
    return lookup_loader.get("moeops.inference.model_profile", loader=DataLoader())


def render(expr, variables=None):
    return Templar(loader=DataLoader(), variables=variables or {}).template(trust_as_template(expr))


def test_profiles_dir_is_the_collections_profiles():
    assert os.path.realpath(plugin.PROFILES_DIR) == os.path.realpath(PROFILES)
    assert os.path.realpath(plugin.COLLECTION_ROOT) == os.path.realpath(REPO)


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_profile_loads_and_validates(lookup, name):
    [loaded] = lookup.run([name], variables={})
    assert loaded == shipped_profile(name)
    assert mp.validate_profile(loaded, "vllm_service_profile") == []


def test_one_profile_per_term(lookup):
    assert [p["name"] for p in lookup.run(SHIPPED, variables={})] == ["glm-5-nvfp4", "kimi-k2.5-int4", "minimax-m2.5-fp8"]
    assert lookup.run([], variables={}) == []


def test_lookup_gives_the_mapping_and_query_a_list():
    assert render("{{ lookup('moeops.inference.model_profile', 'glm5') }}") == shipped_profile("glm5")
    assert render("{{ lookup('moeops.inference.model_profile', 'glm5', wantlist=true) }}") == [shipped_profile("glm5")]
    assert render("{{ query('moeops.inference.model_profile', 'glm5', 'kimi_k25') | map(attribute='served_name') }}") \
        == ["glm-5", "kimi-k2.5"]
    assert render("{{ lookup('moeops.inference.model_profile', p).max_model_len }}", {"p": "minimax_m25"}) == 196608


def test_absolute_path(lookup, tmp_path):
    path = tmp_path / "mine.yml"
    path.write_text("---\n# my model\n" + TINY_TEXT)
    assert lookup.run([str(path)], variables={}) == [TINY]


def _error(lookup, term):
    with pytest.raises(AnsibleLookupError) as err:
        lookup.run([term], variables={})
    return str(err.value)


ACCEPTED = ("the name of a profile shipped with the collection (glm5, kimi_k25, minimax_m25) or the absolute path "
            "of a profile file on the controller")


def test_unknown_name(lookup):
    assert _error(lookup, "llama4") == ("vllm_service_profile: unknown model profile 'llama4'; known profiles: glm5, "
                                        "kimi_k25, minimax_m25; the absolute path of a profile file on the controller "
                                        "works too")


@pytest.mark.parametrize("term", ["profiles/glm5.yml", "glm5.yml", "Kimi-K2.5"])
def test_relative_path_or_other_string(lookup, term):
    assert _error(lookup, term) == ("vllm_service_profile: %r is not a profile name or an absolute path; expected %s "
                                    "(a relative path is not accepted: write it as an absolute path)" % (term, ACCEPTED))


@pytest.mark.parametrize("term, shown", [(25, "an integer (25)"), (["glm5"], "a list (['glm5'])")])
def test_not_a_string(lookup, term, shown):
    assert _error(lookup, term) == "vllm_service_profile: expected %s, got %s" % (ACCEPTED, shown)


@pytest.mark.parametrize("term", [None, ""])
def test_nothing_named_is_refused_with_the_shipped_profiles(lookup, term):
    """There is no default profile: a playbook that passes `vllm_service_profile | default(none)` (nccl_tune.yml) gets
    the roles' own refusal."""
    assert _error(lookup, term) == ("vllm_service_profile: not set, and moeops.inference deploys no model by default; "
                                    "set vllm_service_profile (in the inventory, or -e vllm_service_profile=NAME) to %s"
                                    % ACCEPTED)


def test_missing_file_and_directory(lookup, tmp_path):
    assert _error(lookup, str(tmp_path / "nope.yml")) == (
        "vllm_service_profile: the profile file %s does not exist" % (tmp_path / "nope.yml"))
    assert _error(lookup, str(tmp_path)) == "vllm_service_profile: %s is a directory, not a profile file" % tmp_path


def test_unreadable_file(lookup, tmp_path, refuse_open):
    path = tmp_path / "locked.yml"
    path.write_text(TINY_TEXT)
    refuse_open(path)
    assert _error(lookup, str(path)) == "vllm_service_profile: cannot read the profile file %s: Permission denied" % path


def test_not_yaml(lookup, tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("name: tiny\nsource: \"org/tiny\n")
    assert _error(lookup, str(path)) == (
        "vllm_service_profile: %s is not valid YAML at line 3, column 1: found unexpected end of stream" % path)


@pytest.mark.parametrize("text, got", [
    ("- glm5\n", "holds a list, not a mapping"),
    ("glm5\n", "holds a string, not a mapping"),
    ("3.5\n", "holds a float, not a mapping"),
    ("true\n", "holds a boolean, not a mapping"),
])
def test_yaml_that_is_not_a_mapping(lookup, tmp_path, text, got):
    path = tmp_path / "x.yml"
    path.write_text(text)
    assert _error(lookup, str(path)) == ("vllm_service_profile: %s %s; expected a model profile (a mapping of the keys "
                                         "in docs/model-profiles.md)" % (path, got))


def test_empty_file(lookup, tmp_path):
    path = tmp_path / "empty.yml"
    path.write_text("---\n")
    assert _error(lookup, str(path)) == ("vllm_service_profile: %s is empty; expected a model profile (a mapping of the "
                                         "keys in docs/model-profiles.md)" % path)


def test_old_wrapped_profile_file(lookup, tmp_path):
    """A profile file of old (a vars file for include_vars) is named as such."""
    path = tmp_path / "old.yml"
    path.write_text("vllm_model_profile:\n" + "".join("  " + line + "\n" for line in TINY_TEXT.splitlines()))
    assert _error(lookup, str(path)) == (
        "vllm_service_profile: %s holds its profile under vllm_model_profile:, the vars-file form of old; remove that "
        "key and dedent the rest so that the file is the profile mapping itself" % path)


def test_invalid_profile_lists_its_problems(lookup, tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text(TINY_TEXT.replace("max_model_len: 4096", "max_model_len: 0").replace("quantization", "quant"))
    message = _error(lookup, str(path))
    assert message.startswith("vllm_service_profile: %s is not a valid model profile: " % path)
    assert "vllm_service_profile.quant: not a profile key" in message
    assert "vllm_service_profile.quantization: required" in message
    assert "vllm_service_profile.max_model_len: must be above 0, got 0" in message


def test_error_through_the_template_engine():
    with pytest.raises(Exception) as err:
        render("{{ lookup('moeops.inference.model_profile', 'llama4') }}")
    assert "vllm_service_profile: unknown model profile 'llama4'" in str(err.value)


PLAYBOOK = """\
- name: Load profiles with the lookup
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
    profile: "{{ lookup('moeops.inference.model_profile', profile_file) }}"
    indirect_name: "{{ profile.name }}"
  tasks:
    - name: Keep it as a fact
      ansible.builtin.set_fact:
        fact_profile: "{{ profile }}"
    - name: Write what the lookup gave
      ansible.builtin.copy:
        dest: "{{ out }}"
        mode: "0644"
        content: "{{ result | to_json }}"
      vars:
        result:
          profile: "{{ profile }}"
          indirect_name: "{{ indirect_name }}"
          fact_profile: "{{ fact_profile }}"
          queried: "{{ query('moeops.inference.model_profile', profile_file, 'glm5') }}"
          glm5_name: "{{ lookup('moeops.inference.model_profile', 'glm5').name }}"
          message: "served as {{ profile.served_name }}"
"""


def test_profile_values_are_never_templated_in_a_real_playbook_run(tmp_path):
    """ansible-core 2.19+ (data tagging) trusts no string a lookup returns as a template: a profile holding
    templates comes back as their text, through variables, facts and string concatenation alike."""
    marker = tmp_path / "rendered"
    pipe = "{{ lookup('pipe', 'touch %s') }}" % marker
    profile = dict(TINY, name=pipe, served_name="{{ 'EVAL' ~ 'UATED' }}", quantization="{% raw %}x{% endraw %}",
                   extra_args=["{{ lookup('env', 'HOME') }}"])
    profile_file = tmp_path / "templated.yml"
    profile_file.write_text("".join("%s: %s\n" % (k, json.dumps(v)) for k, v in profile.items()))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    out = tmp_path / "out.json"
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_HOME=str(tmp_path / "home"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), ANSIBLE_NOCOLOR="1")
    env.pop("PYTHONPATH", None)
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    run = subprocess.run([playbook, "-i", "localhost,", "play.yml", "-e", "profile_file=%s" % profile_file,
                          "-e", "out=%s" % out], cwd=str(tmp_path), env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(out.read_text())
    assert result["profile"] == profile
    assert result["fact_profile"] == profile
    assert result["queried"] == [profile, shipped_profile("glm5")]
    assert result["indirect_name"] == pipe
    assert result["message"] == "served as {{ 'EVAL' ~ 'UATED' }}"
    assert result["glm5_name"] == "glm-5-nvfp4"
    assert not marker.exists()
