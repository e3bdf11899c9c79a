# -*- coding: utf-8 -*-
"""preflight: when the free-space check runs, rendered with Ansible's own templating from the role's files."""
from __future__ import annotations

import pytest

import role_templating


def check_disk(**overrides):
    data = role_templating.role_vars("preflight", **overrides)
    return role_templating.render("{{ _preflight_check_disk | bool }}", data)


SIMULATED = {"backend": "snapshot"}
REAL = {"backend": "nvml"}


@pytest.mark.parametrize("source, gpus, expected", [
    ("hf", SIMULATED, True),       # the role downloads them
    ("http", SIMULATED, True),
    ("rsync", SIMULATED, True),
    ("local", SIMULATED, False),   # used where they are: nothing needs room
    ("local", REAL, False),        # ... and vLLM loads that directory, not a repo id
    ("none", SIMULATED, False),    # a simulated node never starts vLLM, so nothing downloads
    ("none", REAL, True),          # vLLM downloads the repo id when the service starts
])
def test_auto_checks_the_disk_only_when_this_run_fetches_weights(source, gpus, expected):
    assert check_disk(model_weights_source=source, preflight_gpu_facts=gpus) is expected


def test_always_and_never_win():
    assert check_disk(model_weights_source="local", preflight_gpu_facts=SIMULATED, preflight_disk_check="always")
    assert not check_disk(model_weights_source="hf", preflight_gpu_facts=REAL, preflight_disk_check="never")
