# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The download programs the model_weights module runs as the service user, in a child interpreter.

They are source text, not functions, because they run under another interpreter (the vLLM venv's,
where huggingface_hub is installed) and another user than the module. Each reads its request as JSON
on stdin (never a secret: the token comes through the HF_TOKEN environment variable) and prints one JSON
line on stdout at the end.
"""

from __future__ import annotations

# huggingface_hub, in two steps: "plan" resolves the revision to a commit (GET /api/models/{repo}/revision/{rev})
# and lists the tree with sizes (GET /api/models/{repo}/tree/{commit}?recursive=true: the expected sizes);
# "download" runs snapshot_download pinned to that commit (HEAD + GET /{repo}/resolve/{commit}/{file}; it
# resumes *.incomplete blobs with Range).
HF_FETCH_PROGRAM = r'''
import json, sys

req = json.load(sys.stdin)
allow = req["allow_patterns"] or None
ignore = req["ignore_patterns"] or None
if req["step"] == "plan":
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile
    from huggingface_hub.utils import filter_repo_objects

    api = HfApi()
    commit = api.model_info(req["repo_id"], revision=req["revision"] or "main").sha
    tree = {f.path: f.size for f in api.list_repo_tree(req["repo_id"], revision=commit, recursive=True)
            if isinstance(f, RepoFile)}
    wanted = set(filter_repo_objects(list(tree), allow_patterns=allow, ignore_patterns=ignore))
    print(json.dumps({"event": "plan", "commit": commit, "files": {p: s for p, s in tree.items() if p in wanted}}))
else:
    from huggingface_hub import snapshot_download

    path = snapshot_download(req["repo_id"], revision=req["commit"], allow_patterns=allow, ignore_patterns=ignore,
                             max_workers=req["max_workers"])
    print(json.dumps({"event": "done", "commit": req["commit"], "path": path}))
'''

# HTTP mirror: the module read the mirror's manifest; this fetches each file that is absent or of the wrong
# size into FILE.part (resumed with a Range request), checks the length the server announces against the
# manifest before writing and the length written after, then renames it into place. Credentials in the URL
# (https://user:password@host/...) go in an Authorization header that a redirect does not carry to another host:
# urllib reads no userinfo itself (it would look up "user:password@host").
HTTP_FETCH_PROGRAM = r'''
import base64, json, os, sys, urllib.parse, urllib.request

req = json.load(sys.stdin)
parts = urllib.parse.urlsplit(req["url"].rstrip("/") + "/")
auth = None
if "@" in parts.netloc:
    userinfo, _sep, hostport = parts.netloc.rpartition("@")
    user, _sep, password = userinfo.partition(":")
    pair = "%s:%s" % (urllib.parse.unquote(user), urllib.parse.unquote(password))
    auth = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    parts = parts._replace(netloc=hostport)
base, dest, files = urllib.parse.urlunsplit(parts), req["dest"], req["files"]
opener = urllib.request.build_opener()
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
    request = urllib.request.Request(url, headers=headers)
    if auth:
        request.add_unredirected_header("Authorization", auth)
    with opener.open(request, timeout=req["timeout"]) as r:
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

# local path: the service user (this program's user) must be able to open every file vLLM will read.
LOCAL_READ_PROGRAM = r'''
import json, os, sys

root = json.load(sys.stdin)["path"]
unreadable = []
for dirpath, _dirs, names in os.walk(root, followlinks=True):
    for name in names:
        path = os.path.join(dirpath, name)
        try:
            with open(path, "rb") as f:
                f.read(1)
        except OSError as exc:
            unreadable.append("%s (%s)" % (os.path.relpath(path, root), exc.strerror))
print(json.dumps({"event": "done", "unreadable": sorted(unreadable)}), flush=True)
'''
