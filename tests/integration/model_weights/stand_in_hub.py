"""STAND-IN for the Hugging Face Hub (a test double: the real Hub cannot be reached from CI).

Serves one model directory as repository REPO at one commit, with the endpoints huggingface_hub 2.4.0's
snapshot_download calls (read from its source: hf_api.model_info, hf_api._iter_repo_tree_pages,
file_download.get_hf_file_metadata / http_get):
  GET  /api/models/{repo}/revision/{rev}           -> {"id", "sha", "siblings"}; 404 for another revision
  GET  /api/models/{repo}/tree/{commit}?recursive= -> [{"type": "file", "path", "size", "oid", "lfs"?}]
  HEAD /{repo}/resolve/{rev}/{file}                -> X-Repo-Commit, ETag (sha256 for LFS files, git blob sha1
                                                      otherwise), Content-Length
  GET  /{repo}/resolve/{rev}/{file}                -> the bytes; honours Range (resume of *.incomplete)
Optionally requires "Authorization: Bearer TOKEN" (a gated repo) and logs each request line with the bytes it
sent to --log (JSON lines) so the test can count what was downloaded.
Usage: stand_in_hub.py --dir DIR --repo org/name --port-file FILE [--token T] [--log FILE] [--rate BYTES_PER_S]
"""
import argparse
import hashlib
import json
import os
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".safetensors", ".bin")


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, root, repo_id):
        self.root, self.repo_id, self.files = root, repo_id, {}
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                with open(full, "rb") as f:
                    data = f.read()
                lfs = rel.endswith(LFS_SUFFIXES)
                self.files[rel] = {"size": len(data), "oid": git_blob_sha1(data),
                                   "sha256": hashlib.sha256(data).hexdigest() if lfs else None}
        self.commit = hashlib.sha1(json.dumps(self.files, sort_keys=True).encode()).hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    repo = None
    token = None
    log_path = None
    rate = 0
    lock = threading.Lock()

    def log_message(self, fmt, *args):
        pass

    def _log(self, status, sent):
        if self.log_path:
            with self.lock, open(self.log_path, "a") as f:
                f.write(json.dumps({"method": self.command, "path": self.path, "status": status,
                                    "bytes": sent, "auth": "Authorization" in self.headers}) + "\n")

    def _json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 404:
            self.send_header("X-Error-Code", "RevisionNotFound" if "revision" in self.path else "EntryNotFound")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self._log(status, 0)

    def _authorized(self):
        if self.token is None or self.headers.get("Authorization") == "Bearer " + self.token:
            return True
        self._json(401, {"error": "Invalid credentials in Authorization header"})
        return False

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        if not self._authorized():
            return
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        r = self.repo
        api = "/api/models/%s/" % r.repo_id
        if path.startswith(api + "revision/"):
            rev = path[len(api + "revision/"):]
            if rev not in ("main", r.commit):
                return self._json(404, {"error": "Invalid rev id: %s" % rev})
            return self._json(200, {"id": r.repo_id, "modelId": r.repo_id, "sha": r.commit, "private": False,
                                    "siblings": [{"rfilename": p} for p in sorted(r.files)]})
        if path.startswith(api + "tree/"):
            rev = path[len(api + "tree/"):]
            if rev not in ("main", r.commit):
                return self._json(404, {"error": "Invalid rev id: %s" % rev})
            entries = []
            for p, meta in sorted(r.files.items()):
                entry = {"type": "file", "path": p, "size": meta["size"], "oid": meta["oid"]}
                if meta["sha256"]:
                    entry["lfs"] = {"oid": meta["sha256"], "size": meta["size"], "pointerSize": 134}
                entries.append(entry)
            return self._json(200, entries)
        prefix = "/%s/resolve/" % r.repo_id
        if path.startswith(prefix):
            rev, _sep, rel = path[len(prefix):].partition("/")
            if rev not in ("main", r.commit):
                return self._json(404, {"error": "Revision Not Found"})
            meta = r.files.get(rel)
            if meta is None:
                return self._json(404, {"error": "Entry not found"})
            return self._send_file(rel, meta)
        return self._json(404, {"error": "not served by the stand-in hub: %s" % path})

    def _send_file(self, rel, meta):
        size, start = meta["size"], 0
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and rng[6:].split("-")[0].isdigit():
            start = min(int(rng[6:].split("-")[0]), size)
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", self.repo.commit)
        self.send_header("ETag", '"%s"' % (meta["sha256"] or meta["oid"]))
        self.send_header("Content-Length", str(size - start))
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        sent = 0
        if self.command == "GET":
            with open(os.path.join(self.repo.root, rel), "rb") as f:
                f.seek(start)
                while True:
                    # --rate: slow enough that the test sees several progress polls during one download.
                    chunk = f.read(8192 if self.rate else 1 << 20)
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    if self.rate:
                        time.sleep(len(chunk) / self.rate)
        self._log(206 if start else 200, sent)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--token")
    ap.add_argument("--log")
    ap.add_argument("--rate", type=int, default=0, help="bytes per second per file; 0 = unthrottled")
    a = ap.parse_args()
    Handler.repo, Handler.token, Handler.log_path, Handler.rate = Repo(a.dir, a.repo), a.token, a.log, a.rate
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(a.port_file + ".tmp", "w") as f:
        f.write("%d %s\n" % (server.server_address[1], Handler.repo.commit))
    os.replace(a.port_file + ".tmp", a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
