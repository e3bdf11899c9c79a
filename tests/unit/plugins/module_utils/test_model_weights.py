# -*- coding: utf-8 -*-
from __future__ import annotations

import importlib.util
import json
import os
import struct

import pytest

from ansible_collections.moeops.inference.plugins.module_utils._weights import model_weights as mw

_MAKER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "integration", "model_weights", "make_tiny_model.py")


def _maker():
    spec = importlib.util.spec_from_file_location("make_tiny_model", _MAKER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def model(tmp_path, monkeypatch):
    """A 3-shard model made by the same generator the integration test uses."""
    monkeypatch.setattr("sys.argv", ["make_tiny_model.py", str(tmp_path / "m"), "--floats-per-tensor", "16"])
    _maker().main()
    return tmp_path / "m"


def test_safetensors_files_are_real_format(model):
    path = model / "model-00001-of-00003.safetensors"
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert n % 8 == 0
    assert header["model.layers.1.mlp.experts.0.weight"] == {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]}
    assert mw.read_safetensors_expected_size(str(path)) == len(raw) == 8 + n + 128
    assert struct.unpack("<f", raw[8 + n:12 + n])[0] == 1000.0


def test_complete_model(model):
    r = mw.check_completeness(str(model))
    assert r["complete"] is True and r["problems"] == []
    assert r["shards"] == ["model-0000%d-of-00003.safetensors" % i for i in (1, 2, 3)]
    assert r["files"] == 6 and r["total_bytes"] == sum(p.stat().st_size for p in model.iterdir())
    assert mw.load_config(str(model))["hidden_size"] == 64


def test_truncated_shard_is_named_with_both_sizes(model):
    shard = model / "model-00002-of-00003.safetensors"
    full = shard.stat().st_size
    with open(shard, "r+b") as f:
        f.truncate(full - 10)
    r = mw.check_completeness(str(model))
    assert not r["complete"]
    assert r["wrong_size"] == [{"path": shard.name, "size": full - 10, "expected": full, "source": "safetensors header"}]
    assert r["problems"] == ["%s is %d bytes, safetensors header says %d" % (shard.name, full - 10, full)]


def test_missing_shard_and_config(model):
    (model / "model-00003-of-00003.safetensors").unlink()
    (model / "config.json").unlink()
    r = mw.check_completeness(str(model))
    assert r["missing"] == ["config.json", "model-00003-of-00003.safetensors"]
    assert "missing: model-00003-of-00003.safetensors" in r["problems"]


def test_source_manifest_sizes_are_checked(model):
    sizes = mw.directory_sizes(str(model))
    assert mw.check_completeness(str(model), sizes)["complete"]
    wrong = dict(sizes, **{"tokenizer_config.json": 1, "extra/file.bin": 5})
    r = mw.check_completeness(str(model), wrong)
    assert r["missing"] == ["extra/file.bin"]
    assert r["wrong_size"][0]["path"] == "tokenizer_config.json" and r["wrong_size"][0]["source"] == "source manifest"


def test_damaged_header_is_a_problem_not_a_crash(model):
    (model / "model-00001-of-00003.safetensors").write_bytes(b"\xff" * 16)
    r = mw.check_completeness(str(model))
    assert not r["complete"]
    assert any("header length" in p for p in r["problems"])


def test_single_file_model_and_no_weights(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert mw.check_completeness(str(tmp_path))["problems"] == [
        "neither model.safetensors.index.json nor model.safetensors is there"]
    _maker().write_safetensors(str(tmp_path / "model.safetensors"), {"w": [1.0, 2.0]})
    assert mw.check_completeness(str(tmp_path))["shards"] == ["model.safetensors"]
    assert not mw.check_completeness(str(tmp_path / "nope"))["complete"]


@pytest.mark.parametrize("text, message", [
    ("not json", "is not JSON"),
    ('{"metadata": {}}', "no weight_map"),
    ('{"weight_map": {"a": 3}}', "must be shard file names"),
    ('{"weight_map": {"a": "../../etc/passwd"}}', "outside the model directory"),
])
def test_bad_index(text, message):
    with pytest.raises(mw.WeightsError, match=message):
        mw.parse_index(text)


def test_index_shards_unique_sorted():
    text = json.dumps({"weight_map": {"a": "s2.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"}})
    assert mw.parse_index(text) == ["s1.safetensors", "s2.safetensors"]


def test_header_validation():
    with pytest.raises(mw.WeightsError, match="8-byte"):
        mw.safetensors_header_length(b"\x01")
    with pytest.raises(mw.WeightsError, match="not plausible"):
        mw.safetensors_header_length(struct.pack("<Q", 0))
    with pytest.raises(mw.WeightsError, match="data_offsets"):
        mw.safetensors_expected_size(10, b'{"t": {"data_offsets": [5, 2]}}')
    assert mw.safetensors_expected_size(32, b'{"__metadata__": {}, "t": {"data_offsets": [0, 40]}}') == 80


def test_mirror_manifest_round_trip_leaves_itself_and_partials_out():
    text = mw.build_mirror_manifest({"b.safetensors": 10, "a.json": 2, mw.MIRROR_MANIFEST_NAME: 50, "c.part": 3})
    assert mw.parse_mirror_manifest(text) == {"a.json": 2, "b.safetensors": 10}


@pytest.mark.parametrize("text, message", [
    ("[]", "needs"),
    ('{"files": {"/abs": 1}}', "leaves the model directory"),
    ('{"files": {"a": -1}}', "non-negative"),
    ('{"files": {"a": true}}', "non-negative"),
])
def test_bad_mirror_manifest(text, message):
    with pytest.raises(mw.WeightsError, match=message):
        mw.parse_mirror_manifest(text)


def test_rsync_listing():
    listing = (
        "drwxr-xr-x          4,096 2026/12/02 20:01:02 .\n"
        "-rw-r--r--            209 2026/12/02 20:01:02 config.json\n"
        "-rw-r--r--  5,000,000,000 2026/12/02 20:01:02 model-00001-of-00002.safetensors\n"
        "lrwxrwxrwx             10 2026/12/02 20:01:02 link\n"
        "drwxr-xr-x          4,096 2026/12/02 20:01:02 sub\n"
        "-rw-r--r--             12 2026/12/02 20:01:02 sub/file name.txt\n")
    assert mw.parse_rsync_listing(listing) == {"config.json": 209, "model-00001-of-00002.safetensors": 5000000000,
                                               "sub/file name.txt": 12}
    with pytest.raises(mw.WeightsError, match="no files"):
        mw.parse_rsync_listing("drwxr-xr-x 4,096 2026/12/02 20:01:02 .\n")


@pytest.mark.parametrize("path, ok", [
    ("a/b.safetensors", True), ("..a", True), ("/etc", False), ("a/../../b", False), ("..", False), ("", False)])
def test_safe_relative_path(path, ok):
    assert mw.is_safe_relative_path(path) is ok


def test_hf_cache_layout():
    assert mw.hf_repo_folder("/c", "moonshotai/Kimi-K2.5") == "/c/hub/models--moonshotai--Kimi-K2.5"


def test_record_must_match_source_pin_and_patterns():
    ident = mw.source_identity("hf", "org/m", "v1", ["*.safetensors"])
    record = dict(ident, path="/x", files={"a": 1})
    assert mw.record_matches(record, ident)
    assert not mw.record_matches(record, mw.source_identity("hf", "org/m", "v2", ["*.safetensors"]))
    assert not mw.record_matches(record, mw.source_identity("hf", "org/m", "v1", []))
    assert not mw.record_matches(dict(record, files=None), ident)
    assert not mw.record_matches(None, ident)
    assert mw.source_identity("hf", "org/m", "", [])["revision"] is None


def test_bytes_on_disk_counts_partials_not_symlinks(tmp_path):
    (tmp_path / "blob").write_bytes(b"x" * 100)
    (tmp_path / "blob2.incomplete").write_bytes(b"x" * 30)
    os.symlink("blob", str(tmp_path / "link"))
    assert mw.bytes_on_disk(str(tmp_path)) == 130


def test_progress_report():
    gib = 1024 ** 3
    r = mw.progress_report(done=300 * gib, total=600 * gib, baseline=100 * gib, elapsed=1000.0, state="running")
    assert r["bytes_fetched"] == 200 * gib and r["percent"] == 50.0
    assert r["rate_bytes_per_s"] == int(200 * gib / 1000) and r["eta_s"] == 1500
    assert r["msg"] == "running: 300.0 GiB of 600.0 GiB (50.0%) at 204.8 MiB/s ETA 0h25m"
    unknown = mw.progress_report(done=10, total=None, baseline=0, elapsed=0, state="running")
    assert unknown["percent"] is None and unknown["eta_s"] is None and unknown["msg"] == "running: 10 B at 0 B/s"
    assert mw.progress_report(5, 5, 0, 1.0, "done")["eta_s"] is None


def test_human_bytes():
    assert [mw.human_bytes(n) for n in (0, 1023, 1536, 5 * 1024 ** 4, 3 * 1024 ** 5)] == [
        "0 B", "1023 B", "1.5 KiB", "5.0 TiB", "3072.0 TiB"]
