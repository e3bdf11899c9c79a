# -*- coding: utf-8 -*-
"""The role_argument_spec lookup: a role's entry-point options, read from the collection's own roles."""
from __future__ import annotations

import os

import pytest
import yaml
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import lookup_loader
from ansible.template import Templar, trust_as_template

from ansible_collections.moeops.inference.plugins.lookup import role_argument_spec as plugin
from conftest import REPO, SPEC_ROLES, role_spec


@pytest.fixture
def lookup():
    return lookup_loader.get("moeops.inference.role_argument_spec", loader=DataLoader())


def render(expr):
    return Templar(loader=DataLoader(), variables={}).template(trust_as_template(expr))


def test_roles_dir_is_the_collections_roles():
    assert os.path.realpath(plugin.ROLES_DIR) == os.path.realpath(os.path.join(REPO, "roles"))
    assert plugin.spec_roles(plugin.ROLES_DIR) == SPEC_ROLES


@pytest.mark.parametrize("role", SPEC_ROLES)
def test_main_options_of_every_role(lookup, role):
    assert lookup.run([role], variables={}) == [role_spec(role)]


def test_fully_qualified_name_and_several_roles(lookup):
    options = lookup.run(["moeops.inference.vllm_service", "vllm"], variables={})
    assert options == [role_spec("vllm_service"), role_spec("vllm")]


def test_other_entry_point(lookup):
    with open(os.path.join(REPO, "roles", "vllm_service", "meta", "argument_specs.yml")) as f:
        specs = yaml.safe_load(f)["argument_specs"]
    assert lookup.run(["vllm_service"], variables={}, entry_point="desired") == [specs["desired"]["options"]]


def test_through_the_template_engine():
    assert render("{{ lookup('moeops.inference.role_argument_spec', 'vllm_service', entry_point='main') }}") \
        == role_spec("vllm_service")
    assert render("{{ lookup('moeops.inference.role_argument_spec', 'vllm_service').vllm_service_port.default }}") \
        == role_spec("vllm_service")["vllm_service_port"]["default"]
    assert render("{{ query('moeops.inference.role_argument_spec', 'vllm', 'vllm_service') | length }}") == 2


@pytest.mark.parametrize("role", ["nope", "../vllm_service", "vllm_service/meta", "other.collection.vllm", 3])
def test_unknown_role(lookup, role):
    with pytest.raises(AnsibleLookupError) as err:
        lookup.run([role], variables={})
    assert str(err.value) == ("moeops.inference.role_argument_spec: moeops.inference has no role %r with an argument "
                              "spec (meta/argument_specs.yml); roles with one: %s" % (role, ", ".join(SPEC_ROLES)))


def test_unknown_entry_point(lookup):
    with pytest.raises(AnsibleLookupError) as err:
        lookup.run(["vllm_service"], variables={}, entry_point="no_such_entry")
    path = os.path.join(plugin.ROLES_DIR, "vllm_service", "meta", "argument_specs.yml")
    with open(path) as f:
        entry_points = sorted(yaml.safe_load(f)["argument_specs"])
    assert "main" in entry_points and "desired" in entry_points
    assert str(err.value) == ("moeops.inference.role_argument_spec: role vllm_service (%s) has no entry point "
                              "'no_such_entry'; its entry points: %s" % (path, ", ".join(entry_points)))


def _roles(tmp_path, text):
    meta = tmp_path / "roles" / "r" / "meta"
    meta.mkdir(parents=True)
    (meta / "argument_specs.yml").write_text(text)
    return str(tmp_path / "roles"), str(meta / "argument_specs.yml")


def test_entry_point_without_options_gives_an_empty_mapping(tmp_path):
    roles, _path = _roles(tmp_path, "argument_specs:\n  main:\n    short_description: nothing to set\n")
    assert plugin.role_options("r", "main", roles) == {}


@pytest.mark.parametrize("text, words", [
    ("argument_specs: [main\n", "is not valid YAML at line 2, column 1: "),
    ("- main\n", "has no argument_specs mapping"),
    ("argument_specs:\n  main:\n    options: [a, b]\n", "the options of entry point main are a list, not a mapping"),
])
def test_broken_spec_file(tmp_path, text, words):
    roles, path = _roles(tmp_path, text)
    with pytest.raises(AnsibleLookupError) as err:
        plugin.role_options("r", "main", roles)
    assert str(err.value).startswith("moeops.inference.role_argument_spec: role r (%s)" % path)
    assert words in str(err.value)


def test_no_roles_at_all(tmp_path):
    with pytest.raises(AnsibleLookupError, match=r"roles with one: none$"):
        plugin.role_options("r", "main", str(tmp_path / "roles"))
