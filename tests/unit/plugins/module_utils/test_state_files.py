# -*- coding: utf-8 -*-
"""state_files: the JSON state files of nccl_tune, model_weights and gpu_facts, written once."""
from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._common import state_files as sf

DOC = {"b": [1, 2.5, None], "a": {"z": "ü", "y": True}}


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def text_of(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.fixture
def umask_077():
    old = os.umask(0o077)
    yield
    os.umask(old)


# ------------------------------------------------------------------ write

def test_write_creates_sorted_indented_text_with_newline_and_mode(tmp_path, umask_077):
    path = str(tmp_path / "r.json")
    assert sf.write_json(path, DOC) is True
    # nccl_tune's and gpu_facts' format; the umask does not narrow the mode.
    assert text_of(path) == json.dumps(DOC, indent=2, sort_keys=True) + "\n"
    assert text_of(path).index('"a"') < text_of(path).index('"b"')
    assert mode_of(path) == 0o644
    assert os.listdir(str(tmp_path)) == ["r.json"]


def test_write_in_model_weights_format_and_another_mode(tmp_path):
    path = str(tmp_path / "record.json")
    assert sf.write_json(path, DOC, 0o600, indent=1, newline=False) is True
    assert text_of(path) == json.dumps(DOC, indent=1, sort_keys=True)
    assert mode_of(path) == 0o600


def test_same_content_is_not_rewritten(tmp_path):
    path = str(tmp_path / "r.json")
    assert sf.write_json(path, DOC) is True
    os.chmod(path, 0o600)
    os.utime(path, (1000000000, 1000000000))
    before = os.stat(path)
    assert sf.write_json(path, json.loads(json.dumps(DOC))) is False
    after = os.stat(path)
    # Not touched at all: same inode, mtime and mode (the mode applies to what is written).
    assert (after.st_ino, after.st_mtime, mode_of(path)) == (before.st_ino, before.st_mtime, 0o600)
    assert sf.write_json(path, dict(DOC, c=1)) is True
    assert os.stat(path).st_ino != before.st_ino and mode_of(path) == 0o644
    assert json.loads(text_of(path))["c"] == 1


def test_same_document_in_another_format_is_not_rewritten(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{"a": {"y": true, "z": "\\u00fc"},\n"b": [1, 2.5, null]}')
    assert sf.write_json(str(path), DOC) is False
    assert sf.write_json(str(path), dict(DOC, b=[1, 2.5])) is True


def test_tuples_and_nan_compare_as_json(tmp_path):
    path = str(tmp_path / "r.json")
    doc = {"t": (1, 2), "n": float("nan")}
    assert sf.write_json(path, doc) is True
    assert sf.write_json(path, doc) is False


def test_ignored_keys_alone_are_no_change(tmp_path):
    """gpu_facts' dump: a new capture time alone is not a change; anything else is, and writes the new time too."""
    path = str(tmp_path / "snap.json")
    first = {"captured": {"at": "1"}, "gpus": [1]}
    assert sf.write_json(path, first, ignore_keys=("captured",)) is True
    assert sf.write_json(path, dict(first, captured={"at": "2"}), ignore_keys=("captured",)) is False
    assert json.loads(text_of(path))["captured"] == {"at": "1"}
    assert sf.write_json(path, {"gpus": [1]}, ignore_keys=("captured",)) is False
    assert sf.write_json(path, {"captured": {"at": "3"}, "gpus": [2]}, ignore_keys=("captured",)) is True
    assert json.loads(text_of(path)) == {"captured": {"at": "3"}, "gpus": [2]}
    # Without ignore_keys the time counts.
    assert sf.write_json(path, {"captured": {"at": "4"}, "gpus": [2]}) is True


def test_ignored_keys_with_a_file_that_is_not_an_object(tmp_path):
    path = tmp_path / "snap.json"
    path.write_text("[1, 2]")
    assert sf.write_json(str(path), {"captured": 1}, ignore_keys=("captured",)) is True
    assert json.loads(path.read_text()) == {"captured": 1}


@pytest.mark.parametrize("old", [None, "", "{not json", "\xff\xfe", "null"])
def test_missing_empty_broken_or_other_file_is_replaced(tmp_path, old):
    path = tmp_path / "r.json"
    if old is not None:
        path.write_bytes(old.encode("latin-1"))
    assert sf.write_json(str(path), DOC) is True
    assert json.loads(path.read_text()) == DOC


def test_null_document_to_a_missing_file_is_written(tmp_path):
    path = str(tmp_path / "r.json")
    assert sf.write_json(path, None) is True
    assert text_of(path) == "null\n"
    assert sf.write_json(path, None) is False


def test_check_mode_writes_nothing_and_says_whether_it_would(tmp_path):
    path = str(tmp_path / "r.json")
    assert sf.write_json(path, DOC, check_mode=True) is True
    assert os.listdir(str(tmp_path)) == []
    sf.write_json(path, DOC)
    assert sf.write_json(path, DOC, check_mode=True) is False
    assert sf.write_json(path, {"other": 1}, check_mode=True) is True
    assert json.loads(text_of(path)) == DOC


def test_replacement_is_atomic(tmp_path):
    """The new file is renamed over the old one: a reader holding the old file reads it whole, never a mix."""
    path = str(tmp_path / "r.json")
    sf.write_json(path, {"old": "x" * 10000})
    with open(path, encoding="utf-8") as reader:
        assert sf.write_json(path, {"new": 1}) is True
        assert json.load(reader) == {"old": "x" * 10000}
    assert json.loads(text_of(path)) == {"new": 1}
    assert os.listdir(str(tmp_path)) == ["r.json"]


def test_move_gets_a_finished_temp_file_in_the_same_directory(tmp_path):
    path = str(tmp_path / "sub" / "r.json")
    os.mkdir(str(tmp_path / "sub"))
    seen = []

    def move(src, dest):
        seen.append((os.path.dirname(src), os.path.basename(src), dest, mode_of(src), text_of(src)))
        os.rename(src, dest)

    assert sf.write_json(path, DOC, 0o640, move=move) is True
    assert seen == [(str(tmp_path / "sub"), seen[0][1], path, 0o640, sf.json_text(DOC))]
    assert seen[0][1].startswith(sf.TEMP_PREFIX) and not seen[0][1].endswith(".json")


def test_relative_path_is_written_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(str(tmp_path))
    assert sf.write_json("r.json", DOC) is True
    assert json.loads(text_of(str(tmp_path / "r.json"))) == DOC


@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), SystemExit(1)])
def test_a_failed_move_leaves_the_old_file_and_no_temp_file(tmp_path, exc):
    """SystemExit: what a module's atomic_move raises through fail_json."""
    path = str(tmp_path / "r.json")
    sf.write_json(path, DOC)

    def move(src, dest):
        raise exc

    with pytest.raises(type(exc)):
        sf.write_json(path, {"new": 1}, move=move)
    assert os.listdir(str(tmp_path)) == ["r.json"]
    assert json.loads(text_of(path)) == DOC


def test_unserializable_document_writes_nothing(tmp_path):
    path = str(tmp_path / "r.json")
    with pytest.raises(TypeError):
        sf.write_json(path, {"x": object()})
    assert os.listdir(str(tmp_path)) == []


def test_missing_directory_raises(tmp_path):
    with pytest.raises(OSError):
        sf.write_json(str(tmp_path / "nope" / "r.json"), DOC)


# ------------------------------------------------------------------ read

def test_read_json(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(DOC))
    assert sf.read_json(str(path)) == DOC
    assert sf.read_json_reason(str(path)) == (DOC, "")
    path.write_text("[1]")
    assert sf.read_json(str(path)) == [1]


def test_read_json_of_missing_unreadable_or_broken_files_is_none(tmp_path):
    """model_weights, model_weights_progress and nccl_tune treat all of these as no file."""
    broken = tmp_path / "broken.json"
    broken.write_text('{"half": ')
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    empty = tmp_path / "empty.json"
    empty.write_text("")
    for path in (tmp_path / "missing.json", broken, binary, empty, tmp_path):
        assert sf.read_json(str(path)) is None


def test_read_json_reason_says_why(tmp_path):
    """nccl_tune_info reports the reason ("cannot read <path>: <reason>")."""
    doc, why = sf.read_json_reason(str(tmp_path / "missing.json"))
    assert doc is None and "No such file or directory" in why
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    doc, why = sf.read_json_reason(str(broken))
    assert doc is None and why.startswith("Expecting property name enclosed in double quotes")
    null = tmp_path / "null.json"
    null.write_text("null")
    assert sf.read_json_reason(str(null)) == (None, "")


def test_same_document():
    assert sf.same_document({"a": 1, "b": [1]}, {"b": [1], "a": 1})
    assert not sf.same_document({"a": 1}, {"a": 1.5})
    assert sf.same_document({"a": 1, "t": 1}, {"a": 1, "t": 2}, ignore_keys=("t",))
    assert sf.same_document({"a": 1}, {"a": 1, "t": 2}, ignore_keys=("t",))
    assert not sf.same_document([1], {"t": 1}, ignore_keys=("t",))
