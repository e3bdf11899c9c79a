# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The download programs the model_weights module runs as the service user, in a child interpreter.

They are source text, not functions, because they run under another interpreter (the vLLM venv's,
where huggingface_hub is installed) and another user than the module. Each reads its request as JSON
on stdin (never a secret: the token comes through the HF_TOKEN environment variable) and writes JSON
lines on stdout: {"event": "plan", ...} once the expected sizes are known, {"event": "done", ...} at the end.
"""

from __future__ import annotations

# huggingface_hub: resolve the revision to a commit (GET /api/models/{repo}/revision/{rev}), list the tree
# with sizes (GET /api/models/{repo}/tree/{commit}?recursive=true: the expected sizes), then snapshot_download
# pinned to that commit (HEAD + GET /{repo}/resolve/{commit}/{file}; resumes *.incomplete blobs with Range).
HF_FETCH_PROGRAM = r'''
import json, sys
from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import filter_repo_objects

req = json.load(sys.stdin)
api = HfApi()
commit = api.model_info(req["repo_id"], revision=req["revision"] or "main").sha
tree = {f.path: f.size for f in api.list_repo_tree(req["repo_id"], revision=commit, recursive=True)
        if isinstance(f, RepoFile)}
allow = req["allow_patterns"] or None
ignore = req["ignore_patterns"] or None
wanted = set(filter_repo_objects(list(tree), allow_patterns=allow, ignore_patterns=ignore))
files = {p: s for p, s in tree.items() if p in wanted}
print(json.dumps({"event": "plan", "commit": commit, "files": files}), flush=True)
path = snapshot_download(req["repo_id"], revision=commit, allow_patterns=allow, ignore_patterns=ignore,
                         max_workers=req["max_workers"])
print(json.dumps({"event": "done", "commit": commit, "path": path, "files": files}), flush=True)
'''

# HTTP mirror: the module read the mirror's manifest; this fetches each file that is absent or of the wrong
# size into FILE.part (resumed with a Range request), checks the length the server announces against the
# manifest before writing and the length written after, then renames it into place.
HTTP_FETCH_PROGRAM = r'''
import json, os, sys, urllib.parse, urllib.request

req = json.load(sys.stdin)
base, dest, files = req["url"].rstrip("/") + "/", req["dest"], req["files"]
print(json.dumps({"event": "plan", "files": files}), flush=True)
for rel, size in sorted(files.items()):
    final = os.path.join(dest, rel)
    if os.path.isfile(final) and os.path.getsize(final) == size:
        continue
    os.makedirs(os.path.dirname(final), exist_ok=True)
    part = final + ".part"
    have = os.path.getsize(part) if os.path.isfile(part) else 0
    if have > size:
        os.unlink(part)
        have = 0
    url = base + urllib.parse.quote(rel)
    headers = {"Range": "bytes=%d-" % have} if 0 < have < size else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=req["timeout"]) as r:
        if r.status == 200:
            have = 0
        announced = r.headers.get("Content-Length")
        if announced is not None and have + int(announced) != size:
            sys.exit("%s: the mirror sends %d bytes, its manifest says %d" % (rel, have + int(announced), size))
        with open(part, "ab" if have else "wb") as out:
            while have < size or size == 0:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                out.write(chunk)
                have += len(chunk)
    if have != size:
        sys.exit("%s: got %d bytes, the manifest says %d (connection cut? run again to resume)" % (rel, have, size))
    os.replace(part, final)
print(json.dumps({"event": "done", "path": dest, "files": files}), flush=True)
'''
