"""No YAML file of the repository repeats a key in a mapping, counting the keys a merge (<<: *anchor) brings in.

ansible-core 2.21 warns "Found duplicate mapping key" for each one on every run (and uses the last value), so a
task that overrides a merged key beside `<<:` prints a warning to every user; PyYAML alone keeps quiet.
"""
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]


class DuplicateKey(Exception):
    pass


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a repeated key after the merges are flattened, as ansible-core's constructor does."""

    def construct_mapping(self, node, deep=False):
        self.flatten_mapping(node)
        seen = set()
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise DuplicateKey("%r at line %d" % (key, key_node.start_mark.line + 1))
            seen.add(key)
        return super().construct_mapping(node, deep)


# Ansible's own tags (!unsafe, !vault) read as plain values here.
_Loader.add_multi_constructor("!", lambda loader, suffix, node: loader.construct_scalar(node)
                              if isinstance(node, yaml.ScalarNode) else None)


def _yaml_files():
    out = subprocess.run(["git", "ls-files", "-z", "--", "*.yml", "*.yaml"], cwd=ROOT, check=True,
                         capture_output=True).stdout.decode()
    return sorted(p for p in out.split("\0") if p and (ROOT / p).is_file())


def test_the_loader_sees_a_key_repeated_beside_a_merge():
    text = "a: &x {k: 1, j: 2}\nb:\n  <<: *x\n  k: 3\n"
    with pytest.raises(DuplicateKey, match="'k' at line 4"):
        yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    assert yaml.load("a: &x {k: 1}\nb:\n  <<: *x\n  j: 3\n", Loader=_Loader)["b"] == {"k": 1, "j": 3}  # noqa: S506


def test_no_yaml_file_repeats_a_key():
    files = _yaml_files()
    assert len(files) > 100
    found = []
    for path in files:
        try:
            list(yaml.load_all((ROOT / path).read_text(encoding="utf-8"), Loader=_Loader))  # noqa: S506
        except DuplicateKey as exc:
            found.append("%s: %s" % (path, exc))
    assert not found, "repeated keys (ansible-core warns and keeps the last): %s" % "; ".join(found)


CONDITION_KEYS = ("that", "when", "failed_when", "changed_when", "until")


def _bare_conditions(data, found, path):
    """Conditions that YAML did not read as a string: an unquoted `: ` inside one makes it a mapping, which
    ansible-core 2.19+ refuses at run time ("Conditional expressions must be strings")."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key in CONDITION_KEYS:
                for item in value if isinstance(value, list) else [value]:
                    if not isinstance(item, (str, bool)):
                        found.append("%s: %s: %r" % (path, key, item))
            _bare_conditions(value, found, path)
    elif isinstance(data, list):
        for item in data:
            _bare_conditions(item, found, path)


def test_the_condition_check_sees_a_colon_in_an_unquoted_condition():
    found = []
    _bare_conditions(yaml.safe_load("- assert:\n    that:\n      - ('a: b') in x\n      - \"('a: b') in x\"\n"), found, "t")
    assert len(found) == 1 and "('a" in found[0]


def test_every_condition_is_a_string():
    found = []
    for path in _yaml_files():
        for doc in yaml.load_all((ROOT / path).read_text(encoding="utf-8"), Loader=_Loader):  # noqa: S506
            _bare_conditions(doc, found, path)
    assert not found, "conditions YAML reads as something else than a string (quote them): %s" % "; ".join(found)
