# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure logic of model weight staging: safetensors index and header parsing, the completeness
check, source manifests (hub tree, mirror manifest, rsync listing) and progress accounting.

Nothing here touches the network; the only I/O is reading files a caller names. The modules
model_weights and model_weights_progress are thin shells over these functions.
"""

from __future__ import annotations

import json
import os
import re
import struct
import typing as t

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
# The manifest an HTTP mirror serves at its root: {"files": {"relative/path": size_in_bytes, ...}}.
MIRROR_MANIFEST_NAME = "moeops-weights-manifest.json"
# A safetensors header above this is not a header but a damaged file (the format caps it at 100 MB).
SAFETENSORS_MAX_HEADER = 100 * 1024 * 1024
# Suffixes of files a download is still writing: huggingface_hub's blobs, ours, rsync's --partial-dir.
PARTIAL_SUFFIXES = (".incomplete", ".part")

_SAFE_PATH = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.(?:/|$))[^\x00]+$")


class WeightsError(ValueError):
    """A model directory, index or manifest that cannot be used; the message says what and where."""


def is_safe_relative_path(path: str) -> bool:
    """True for a relative path that stays inside its directory (no leading /, no .. component)."""
    return bool(_SAFE_PATH.match(path))


def _json_mapping(text: str, name: str, key: str, missing: str) -> dict:
    """The non-empty mapping under key in the JSON document text (the file name), else WeightsError."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise WeightsError("%s is not JSON: %s" % (name, exc)) from exc
    member = data.get(key) if isinstance(data, dict) else None
    if not isinstance(member, dict) or not member:
        raise WeightsError(missing)
    return member


def parse_index(text: str) -> list[str]:
    """Shard file names listed by a model.safetensors.index.json (its weight_map values), sorted, unique."""
    weight_map = _json_mapping(text, INDEX_NAME, "weight_map",
                               "%s has no weight_map (tensor name -> shard file)" % INDEX_NAME)
    shards = sorted({v for v in weight_map.values() if isinstance(v, str)})
    if len(shards) == 0 or any(not isinstance(v, str) for v in weight_map.values()):
        raise WeightsError("%s: weight_map values must be shard file names" % INDEX_NAME)
    bad = [s for s in shards if not is_safe_relative_path(s)]
    if bad:
        raise WeightsError("%s names shards outside the model directory: %s" % (INDEX_NAME, ", ".join(bad)))
    return shards


def safetensors_header_length(prefix: bytes) -> int:
    """The header length from the first 8 bytes of a safetensors file (little-endian u64)."""
    if len(prefix) < 8:
        raise WeightsError("shorter than the 8-byte safetensors header length")
    (length,) = struct.unpack("<Q", prefix[:8])
    if length == 0 or length > SAFETENSORS_MAX_HEADER:
        raise WeightsError("safetensors header length %d is not plausible (damaged or not safetensors)" % length)
    return length


def safetensors_expected_size(header_length: int, header: bytes) -> int:
    """The file size a safetensors file must have: 8 + header + the end of its last tensor's data."""
    try:
        data = json.loads(header.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WeightsError("safetensors header is not JSON: %s" % exc) from exc
    if not isinstance(data, dict):
        raise WeightsError("safetensors header is not a JSON object")
    end = 0
    for name, info in data.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
                or offsets[0] < 0 or offsets[1] < offsets[0]):
            raise WeightsError("tensor %s has no valid data_offsets" % name)
        end = max(end, offsets[1])
    return 8 + header_length + end


def read_safetensors_expected_size(path: str) -> int:
    """Reads only the header of a safetensors file and returns the size it must have."""
    with open(path, "rb") as f:
        length = safetensors_header_length(f.read(8))
        header = f.read(length)
    if len(header) != length:
        raise WeightsError("header cut short (%d of %d bytes)" % (len(header), length))
    return safetensors_expected_size(length, header)


def parse_mirror_manifest(text: str) -> dict[str, int]:
    """{path: size} from an HTTP mirror's moeops-weights-manifest.json ({"files": {path: size}})."""
    files = _json_mapping(text, MIRROR_MANIFEST_NAME, "files",
                          '%s needs {"files": {"path": size, ...}}' % MIRROR_MANIFEST_NAME)
    out: dict[str, int] = {}
    for path, size in files.items():
        if not is_safe_relative_path(path):
            raise WeightsError("%s: %r leaves the model directory" % (MIRROR_MANIFEST_NAME, path))
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise WeightsError("%s: size of %s must be a non-negative integer" % (MIRROR_MANIFEST_NAME, path))
        out[path] = size
    return out


def build_mirror_manifest(sizes: dict[str, int]) -> str:
    """The moeops-weights-manifest.json text for a directory's {path: size} (what a mirror serves); the
    manifest itself and partial files are left out."""
    files = {p: n for p, n in sorted(sizes.items())
             if os.path.basename(p) != MIRROR_MANIFEST_NAME and not p.endswith(PARTIAL_SUFFIXES)}
    return json.dumps({"files": files}, indent=1) + "\n"


_RSYNC_LINE = re.compile(r"^(?P<mode>[-dlcbps][rwxsStT-]{9})\s+(?P<size>[\d,.]+)\s+\S+\s+\S+\s+(?P<path>.+)$")


def parse_rsync_listing(text: str) -> dict[str, int]:
    """{path: size} of the regular files in `rsync --list-only --recursive` output (sizes may carry , or .)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _RSYNC_LINE.match(line.strip())
        if not m or m.group("mode")[0] != "-":
            continue
        path = m.group("path")
        if path.startswith("./"):
            path = path[2:]
        if not is_safe_relative_path(path):
            raise WeightsError("rsync listing names %r outside the model directory" % path)
        out[path] = int(re.sub(r"[,.]", "", m.group("size")))
    if not out:
        raise WeightsError("the rsync listing holds no files")
    return out


def directory_sizes(root: str, skip_dirs: tuple[str, ...] = (".cache", ".rsync-partial")) -> dict[str, int]:
    """{relative path: size} of the files under root (symlinks followed, as vLLM reads them)."""
    out: dict[str, int] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        if dirpath == root:
            dirnames[:] = [d for d in dirnames if d not in skip_dirs]
        for name in filenames:
            full = os.path.join(dirpath, name)
            try:
                out[os.path.relpath(full, root)] = os.stat(full).st_size
            except OSError:
                continue  # a dangling symlink: absent, reported by the check if it matters
    return out


def check_completeness(root: str, expected: dict[str, int] | None = None) -> dict[str, t.Any]:
    """Whether root holds a complete safetensors model.

    Complete means: config.json is there; the index (or a single model.safetensors) is there and every shard
    it lists exists; every safetensors file is as long as its own header says; and every file of `expected`
    (the source's {path: size}: hub tree, mirror manifest or rsync listing) exists with exactly that size.
    Returns complete, problems (readable lines), shards, missing, wrong_size, total_bytes, files.
    """
    problems: list[str] = []
    missing: list[str] = []
    wrong_size: list[dict[str, t.Any]] = []
    if not os.path.isdir(root):
        return {"complete": False, "problems": ["%s is not a directory" % root], "shards": [], "missing": [],
                "wrong_size": [], "total_bytes": 0, "files": 0}
    sizes = directory_sizes(root)
    shards: list[str] = []
    if INDEX_NAME in sizes:
        try:
            with open(os.path.join(root, INDEX_NAME), encoding="utf-8") as f:
                shards = parse_index(f.read())
        except (OSError, WeightsError) as exc:
            problems.append(str(exc))
    elif SINGLE_NAME in sizes:
        shards = [SINGLE_NAME]
    else:
        problems.append("neither %s nor %s is there" % (INDEX_NAME, SINGLE_NAME))
    if CONFIG_NAME not in sizes:
        missing.append(CONFIG_NAME)
    for shard in shards:
        if shard not in sizes:
            missing.append(shard)
    for path in sorted(p for p in sizes if p.endswith(".safetensors")):
        try:
            want = read_safetensors_expected_size(os.path.join(root, path))
        except (OSError, WeightsError) as exc:
            problems.append("%s: %s" % (path, exc))
            continue
        if want != sizes[path]:
            wrong_size.append({"path": path, "size": sizes[path], "expected": want, "source": "safetensors header"})
    for path, want in sorted((expected or {}).items()):
        if path not in sizes:
            if path not in missing:
                missing.append(path)
        elif sizes[path] != want and not any(w["path"] == path for w in wrong_size):
            wrong_size.append({"path": path, "size": sizes[path], "expected": want, "source": "source manifest"})
    missing.sort()
    problems += ["missing: %s" % p for p in missing]
    problems += ["%s is %d bytes, %s says %d" % (w["path"], w["size"], w["source"], w["expected"]) for w in wrong_size]
    return {
        "complete": not problems,
        "problems": problems,
        "shards": shards,
        "missing": missing,
        "wrong_size": wrong_size,
        "total_bytes": sum(sizes.values()),
        "files": len(sizes),
    }


def load_config(root: str) -> dict[str, t.Any]:
    """The model's config.json as a dict."""
    path = os.path.join(root, CONFIG_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise WeightsError("cannot read %s: %s" % (path, exc)) from exc
    if not isinstance(data, dict):
        raise WeightsError("%s is not a JSON object" % path)
    return data


def hf_repo_folder(hf_home: str, repo_id: str) -> str:
    """huggingface_hub's cache folder of a model repo: HF_HOME/hub/models--org--name."""
    return os.path.join(hf_home, "hub", "models--" + repo_id.replace("/", "--"))


def source_identity(source: str, location: str, revision: str | None, patterns: list[str]) -> dict[str, t.Any]:
    """What a staging record must match to count: a changed source, pin or filter stages again."""
    return {"source": source, "location": location, "revision": revision or None, "patterns": list(patterns)}


def record_matches(record: t.Any, identity: dict[str, t.Any]) -> bool:
    """True when a staging record was written for this identity and names an expected-sizes table."""
    return (isinstance(record, dict) and isinstance(record.get("files"), dict)
            and isinstance(record.get("path"), str)
            and all(record.get(k) == v for k, v in identity.items()))


def bytes_on_disk(root: str) -> int:
    """Bytes under root, counting files still being written (what the progress poll reports)."""
    total = 0
    for dirpath, _dirs, filenames in os.walk(root):
        for name in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(dirpath, name)):
                total += st.st_size
    return total


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    value = float(n)
    for unit in units:
        if abs(value) < 1024 or unit == units[-1]:
            return ("%d %s" % (value, unit)) if unit == "B" else ("%.1f %s" % (value, unit))
        value /= 1024
    raise AssertionError("unreachable")


def progress_report(done: int, total: int | None, baseline: int, elapsed: float, state: str) -> dict[str, t.Any]:
    """Progress of a download: bytes done, percent, rate since the start and an ETA, as data and one line.

    done and baseline are bytes on disk now and when the download started (a resumed download does not count
    what was already there in the rate); total is the bytes the source says the model has, if known.
    """
    fetched = max(done - baseline, 0)
    rate = fetched / elapsed if elapsed > 0 else 0.0
    percent = None if not total else min(100.0, round(100.0 * done / total, 1))
    eta = None
    if total and rate > 0 and done < total:
        eta = int((total - done) / rate)
    parts = [state + ":", human_bytes(done)]
    if total:
        parts += ["of", human_bytes(total), "(%s%%)" % percent]
    parts.append("at %s/s" % human_bytes(rate))
    if eta is not None:
        parts.append("ETA %dh%02dm" % (eta // 3600, eta % 3600 // 60))
    return {"bytes_done": done, "bytes_total": total, "bytes_fetched": fetched, "percent": percent,
            "rate_bytes_per_s": int(rate), "eta_s": eta, "msg": " ".join(parts)}
