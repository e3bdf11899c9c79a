# -*- coding: utf-8 -*-
"""Test client (molecule/rollback): sends each request of a JSON list and prints what came back, as JSON.

argv[1]: a list of requests, each one of:
- {"method", "url", "key" (optional bearer token), "cafile" (optional: verify TLS against it), "body" (optional
  JSON)}: sent with urllib;
- {"raw": the request head as text (CRLF line ends), "host", "port", "tls" (bool), "cafile", "chunks" (optional
  [count, size]: after the head, a chunked body of that many chunks of that many bytes)}: sent as written, byte for
  byte, over one connection of its own (request targets urllib would normalise, HTTP/0.9, the absolute form);
- {"hold": count, "raw", "host", "port", "tls", "cafile", "early": n, "then": a raw request}: opens `count`
  connections that each send the head `raw` and nothing more (a body that never comes), waits until `n` of them are
  answered (those over a limit), sends `then` on one more connection while the rest are held, and waits up to 120 s
  for each held one to be answered or closed;
- {"ciphers": true, "host", "port"}: which TLS 1.2 suites of this OpenSSL's whole list the server accepts (one
  handshake each, no verification), and the suite TLS 1.3 negotiates.
Each answer: {"status": HTTP status, or null with "error" when nothing answered (refused, TLS failure), or null for
an answer without a status line (HTTP/0.9), "retry_after", "body" (its first 300 characters), "head" (raw: the
first 120 bytes of the answer)}; for "ciphers": {"tls12": [names], "tls13": name}; for "hold": {"then": its answer,
"held": how many were opened, "ended": [the status each held one got, null when closed without one], "seconds": [when
each ended, counted from the last one opened]}.
"""
import json
import select
import socket
import ssl
import sys
import time
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


def connect(req):
    sock = socket.create_connection((req["host"], int(req["port"])), timeout=10)
    if req.get("tls"):
        context = ssl.create_default_context(cafile=req.get("cafile"))
        sock = context.wrap_socket(sock, server_hostname=req["host"])
    return sock


def status_of(data):
    """The status of an answer's status line, or None for one without (HTTP/0.9, or nothing)."""
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else None


def raw(req):
    try:
        sock = connect(req)
    except (OSError, ssl.SSLError) as err:
        return {"status": None, "error": str(err)}
    sent_error = None
    try:
        sock.sendall(req["raw"].encode("latin-1"))
        count, size = req.get("chunks") or (0, 0)
        for _chunk in range(count):
            sock.sendall(b"%x\r\n" % size + b"x" * size + b"\r\n")
        if count:
            sock.sendall(b"0\r\n\r\n")
    except (OSError, ssl.SSLError) as err:  # the server may answer (413) and close before the body is all sent
        sent_error = str(err)
    data = b""
    try:
        while len(data) < 65536:
            part = sock.recv(65536)
            if not part:
                break
            data += part
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep and b"content-length:" in head.lower():
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(body) >= length:
                    break
    except (OSError, ssl.SSLError) as err:
        if not data:
            return {"status": None, "error": str(err), "sent_error": sent_error}
    finally:
        sock.close()
    head, _sep, body = data.partition(b"\r\n\r\n")
    out = {"head": data[:120].decode("latin-1"), "sent_error": sent_error, "retry_after": None}
    if data.startswith(b"HTTP/"):
        out["status"] = status_of(data)
        for line in head.split(b"\r\n")[1:]:
            if line.lower().startswith(b"retry-after:"):
                out["retry_after"] = line.split(b":", 1)[1].strip().decode()
        out["body"] = body[:300].decode("utf-8", "replace")
    else:  # no status line: an HTTP/0.9 answer is the body alone
        out["status"] = None
        out["body"] = data[:300].decode("utf-8", "replace")
    return out


def hold(req):
    held = []
    for _index in range(int(req["hold"])):
        sock = connect(req)
        sock.sendall(req["raw"].encode("latin-1"))
        held.append(sock)
    opened = time.monotonic()
    answered = {}

    def read(sock):
        try:
            data = sock.recv(65536)
        except (OSError, ssl.SSLError):
            data = b""
        answered[sock] = (status_of(data), round(time.monotonic() - opened, 1))
        sock.close()

    # The ones the server answers at once (over a limit) first: once `early` of them are, it holds the others.
    while len(answered) < int(req.get("early", 0)) and time.monotonic() - opened < 60:
        ready, _w, _x = select.select([s for s in held if s not in answered], [], [], 0.5)
        for sock in ready:
            read(sock)
    then = raw(dict(req, raw=req["then"]))
    for sock in held:
        if sock not in answered:
            sock.settimeout(max(1.0, 120 - (time.monotonic() - opened)))
            read(sock)
    return {"then": then, "held": len(held), "ended": [answered[s][0] for s in held],
            "seconds": [answered[s][1] for s in held]}


def ciphers(req):
    every = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    every.set_ciphers("ALL:COMPLEMENTOFALL:@SECLEVEL=0")
    names = sorted({c["name"] for c in every.get_ciphers() if c["protocol"] != "TLSv1.3"})
    accepted = []
    for name in names:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.set_ciphers(name + ":@SECLEVEL=0")
        except ssl.SSLError:
            continue
        try:
            with socket.create_connection((req["host"], int(req["port"])), timeout=5) as sock:
                with context.wrap_socket(sock) as tls:
                    accepted.append(tls.cipher()[0])
        except (OSError, ssl.SSLError):
            pass
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    with socket.create_connection((req["host"], int(req["port"])), timeout=5) as sock:
        with context.wrap_socket(sock) as tls:
            tls13 = tls.cipher()[0]
    return {"tls12": accepted, "tls13": tls13, "tried": len(names)}


def one(req):
    if "hold" in req:
        return hold(req)
    if "raw" in req:
        return raw(req)
    if req.get("ciphers"):
        return ciphers(req)
    return probe(req)


if __name__ == "__main__":
    print(json.dumps([one(r) for r in json.loads(sys.argv[1])]))
