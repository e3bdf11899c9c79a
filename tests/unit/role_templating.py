# -*- coding: utf-8 -*-
"""Render a role's own defaults and vars with Ansible's templating, for unit tests of role decisions."""
from __future__ import annotations

import os

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")


def trusted(value):
    """Role files are trusted templates, as Ansible treats them when it loads a role."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value


def role_vars(role, **overrides):
    """The role's defaults/main.yml and vars/main.yml (in Ansible's order), then the overrides."""
    data = {}
    for part in ("defaults", "vars"):
        path = os.path.join(ROLES, role, part, "main.yml")
        if os.path.exists(path):  # vars/ holds constants only, and a role may have none
            with open(path) as f:
                data.update(trusted(yaml.safe_load(f) or {}))
    data.update(overrides)
    return data


def render(expr, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expr))


def render_file(path, variables):
    """A role's template file as the template module and lookup render it: backslashes in the template's own string
    literals (wordwrap's '\\n# ') are not escaped, which Templar.template does for inline expressions."""
    with open(path) as f:
        text = f.read()
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(text), escape_backslashes=False)
