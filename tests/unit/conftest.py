# -*- coding: utf-8 -*-
from __future__ import annotations

import glob
import json
import os

import pytest

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "gpu")


def load_json(*parts):
    with open(os.path.join(FIXTURES, *parts)) as f:
        return json.load(f)


def constructed_names():
    return sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(FIXTURES, "constructed", "*.json")))


def real_snapshot_names():
    return sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(FIXTURES, "real", "*.snapshot.json")))


@pytest.fixture
def h200_capture():
    return load_json("real", "h200-x1-vm.json")
