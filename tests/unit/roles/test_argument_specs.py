# -*- coding: utf-8 -*-
"""Every role's defaults and meta/argument_specs.yml agree (as prometheus.prometheus keeps them),
every option is typed and described, and docs/role-variables.md is generated from the specs."""
from __future__ import annotations

import glob
import importlib.util
import os

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))
TYPES = {"str", "int", "float", "bool", "list", "dict", "path", "raw"}


def load(role, *parts):
    with open(os.path.join(ROOT, "roles", role, *parts)) as f:
        return yaml.safe_load(f) or {}


def options(role):
    return load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]


def templated(value):
    return isinstance(value, str) and "{{" in value


def test_every_role_has_specs_defaults_and_a_preflight():
    dirs = sorted(d for d in os.listdir(os.path.join(ROOT, "roles")) if os.path.isdir(os.path.join(ROOT, "roles", d)))
    assert ROLES == dirs
    for role in ROLES:
        assert os.path.isfile(os.path.join(ROOT, "roles", role, "defaults", "main.yml")), role
        assert os.path.isfile(os.path.join(ROOT, "roles", role, "tasks", "preflight.yml")), role


@pytest.mark.parametrize("role", ROLES)
def test_every_default_has_a_spec_with_the_same_default(role):
    defaults, opts = load(role, "defaults", "main.yml"), options(role)
    for name, value in defaults.items():
        assert name in opts, "%s: default %s has no argument spec" % (role, name)
        if templated(value):
            # Computed at run time: the spec cannot state it, its description says how it is derived.
            assert "default" not in opts[name], "%s: %s is templated, the spec must not claim a default" % (role, name)
        else:
            assert opts[name].get("default") == value, "%s: %s defaults to %r, the spec says %r" % (
                role, name, value, opts[name].get("default"))


@pytest.mark.parametrize("role", ROLES)
def test_every_spec_option_is_defaulted_or_required(role):
    defaults, opts = load(role, "defaults", "main.yml"), options(role)
    for name, opt in opts.items():
        assert name.startswith(role + "_"), "%s: %s lacks the role prefix" % (role, name)
        if opt.get("required"):
            assert name not in defaults, "%s: %s is required, a default would hide a missing value" % (role, name)
        else:
            assert name in defaults, "%s: %s is neither defaulted in defaults/main.yml nor required" % (role, name)


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_typed_and_described(role):
    for name, opt in options(role).items():
        assert opt.get("type") in TYPES, "%s: %s has no valid type" % (role, name)
        assert opt.get("description"), "%s: %s has no description" % (role, name)
        if opt["type"] == "list":
            assert opt.get("elements"), "%s: list %s needs elements" % (role, name)
        for choice in opt.get("choices", []):
            assert "default" not in opt or opt["default"] in opt["choices"], (role, name, choice)


@pytest.mark.parametrize("role", ROLES)
def test_the_defaults_pass_their_own_spec(role):
    defaults, opts = load(role, "defaults", "main.yml"), options(role)
    values = {k: v for k, v in defaults.items() if not templated(v)}
    required = {k: None for k, o in opts.items() if o.get("required")}
    result = ArgumentSpecValidator(opts).validate(dict(values, **{k: {"stand-in": 1} for k in required}))
    assert result.error_messages == [], (role, result.error_messages)


def test_role_variables_doc_is_generated_from_the_specs():
    spec = importlib.util.spec_from_file_location("role_variables_doc", os.path.join(ROOT, "scripts", "role_variables_doc.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(os.path.join(ROOT, "docs", "role-variables.md")) as f:
        committed = f.read()
    assert committed == mod.render(), "docs/role-variables.md is out of date: run .venv/bin/python scripts/role_variables_doc.py"
    for role in ROLES:
        assert "## moeops.inference.%s" % role in committed
        for name in options(role):
            assert "| `%s` |" % name in committed
