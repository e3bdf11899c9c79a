# -*- coding: utf-8 -*-
"""Test client (molecule/rollback) for the drain test: one long streaming request through the front while new
requests are sent every 0.5 s; prints a JSON record with wall-clock times (time.time(): the containers share the
machine's clock, so they compare with the journal's).

argv: URL (the front), API key, CA file ("" for none), max_tokens, seconds to keep polling at most.
"""
import json
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request


def main():
    url, key, cafile, max_tokens, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    record = {"stream_start": time.time(), "tokens": 0, "done": False, "last_token": None, "stream_status": None,
              "stream_error": None, "polls": []}

    def stream():
        body = json.dumps({"model": "x", "prompt": "drain", "max_tokens": max_tokens, "stream": True}).encode()
        request = urllib.request.Request(url + "/v1/completions", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=300, context=context) as answer:
                record["stream_status"] = answer.status
                for line in answer:
                    if line.startswith(b"data: [DONE]"):
                        record["done"] = True
                    elif line.startswith(b"data: "):
                        record["tokens"] += 1
                        record["last_token"] = time.time()
        except Exception as err:  # pylint: disable=broad-except  # recorded: the test fails on it
            record["stream_error"] = repr(err)

    worker = threading.Thread(target=stream)
    worker.start()
    time.sleep(1)
    seen_503 = False
    while time.time() - record["stream_start"] < limit:
        request = urllib.request.Request(url + "/v1/models", headers=headers)
        t = time.time()
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                poll = {"t": t, "status": answer.status}
        except urllib.error.HTTPError as err:
            poll = {"t": t, "status": err.code, "retry_after": err.headers.get("Retry-After")}
        except Exception as err:  # pylint: disable=broad-except  # recorded as no answer
            poll = {"t": t, "status": None, "error": repr(err)}
        record["polls"].append(poll)
        seen_503 = seen_503 or poll["status"] == 503
        if seen_503 and poll["status"] == 200 and not worker.is_alive():
            break
        time.sleep(0.5)
    worker.join(timeout=5)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
