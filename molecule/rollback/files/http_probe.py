# -*- coding: utf-8 -*-
"""Test client (molecule/rollback): sends each request of a JSON list and prints what came back, as JSON.

argv[1]: [{"method", "url", "key" (optional bearer token), "cafile" (optional: verify TLS against it),
"body" (optional JSON)}]. Each answer: {"status": HTTP status, or null with "error" when nothing answered
(refused, TLS failure), "retry_after", "body" (its first 300 characters)}.
"""
import json
import socket
import ssl
import sys
import urllib.error
import urllib.request


def probe(req):
    headers = {"Content-Type": "application/json"}
    if req.get("key"):
        headers["Authorization"] = "Bearer " + req["key"]
    data = json.dumps(req["body"]).encode() if req.get("body") is not None else (b"{}" if req["method"] == "POST" else None)
    context = ssl.create_default_context(cafile=req["cafile"]) if req.get("cafile") else None
    request = urllib.request.Request(req["url"], data=data, headers=headers, method=req["method"])
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return {"status": answer.status, "retry_after": answer.headers.get("Retry-After"),
                    "body": answer.read(300).decode("utf-8", "replace")}
    except urllib.error.HTTPError as err:
        return {"status": err.code, "retry_after": err.headers.get("Retry-After"),
                "body": err.read(300).decode("utf-8", "replace")}
    except (urllib.error.URLError, socket.timeout, ConnectionError, ssl.SSLError) as err:
        return {"status": None, "error": str(getattr(err, "reason", err))}


if __name__ == "__main__":
    print(json.dumps([probe(r) for r in json.loads(sys.argv[1])]))
