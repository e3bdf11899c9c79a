# -*- coding: utf-8 -*-
"""Test client (molecule/rollback) for the front's reload and restart: polls GET /v1/models every INTERVAL seconds,
each on a new connection, while (optionally) one stream runs; prints a JSON record with wall-clock times
(time.time(): the containers share the machine's clock).

argv: URL (the front), API key, CA file ("" for none), interval, seconds to poll at most, tokens of the stream (0: no
stream), stop file (polling ends once it exists, or after the seconds).
With a stream, "FIRST TOKEN" is printed (and flushed) when its first token arrives, so that a test reloads or restarts
while it is in flight rather than after a guessed sleep; polling then ends by itself once the stream has ended and a
poll begun after its end was answered 200 (a restart refuses connections until the old nginx has finished the stream).
The record is the last line.
"""
import json
import os
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request


def main():
    url, key, cafile = sys.argv[1], sys.argv[2], sys.argv[3]
    interval, limit, tokens, stop = float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + key}
    with urllib.request.urlopen(urllib.request.Request(url + "/v1/models", headers=headers), timeout=10,
                                context=context) as answer:
        model = json.load(answer)["data"][0]["id"]
    record = {"start": time.time(), "polls": [], "stream": None}

    def stream():
        one = {"max_tokens": tokens, "tokens": 0, "done": False, "first_token": None, "last_token": None,
               "status": None, "error": None}
        record["stream"] = one
        body = json.dumps({"model": model, "prompt": "reload", "max_tokens": tokens, "ignore_eos": True,
                           "temperature": 0, "stream": True,
                           "stream_options": {"include_usage": True}}).encode()
        request = urllib.request.Request(url + "/v1/completions", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=300, context=context) as answer:
                one["status"] = answer.status
                for line in answer:
                    if line.startswith(b"data: [DONE]"):
                        one["done"] = True
                    elif line.startswith(b"data: "):
                        event = json.loads(line[6:])
                        if "error" in event:
                            one["error"] = event["error"]
                        elif event.get("usage") and not event.get("choices"):
                            # vLLM's own count: a lagging API server sends several tokens in one event.
                            one["tokens"] = event["usage"]["completion_tokens"]
                        else:
                            one["tokens"] += 1
                            one["last_token"] = time.time()
                            if not one["first_token"]:
                                one["first_token"] = one["last_token"]
                                print("FIRST TOKEN", flush=True)
        except Exception as err:  # pylint: disable=broad-except  # recorded: the test fails on it
            one["error"] = repr(err)
        one["ended"] = time.time()

    worker = threading.Thread(target=stream) if tokens else None
    if worker:
        worker.start()
    while time.time() - record["start"] < limit and not os.path.exists(stop):
        request = urllib.request.Request(url + "/v1/models", headers=headers)
        t = time.time()
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                poll = {"t": t, "status": answer.status}
        except urllib.error.HTTPError as err:
            poll = {"t": t, "status": err.code}
        except Exception as err:  # pylint: disable=broad-except  # recorded as no answer (refused, reset)
            poll = {"t": t, "status": None, "error": repr(err)}
        record["polls"].append(poll)
        ended = record["stream"] and record["stream"].get("ended")
        if ended and t > ended and poll["status"] == 200:
            break
        time.sleep(interval)
    if worker:
        worker.join(timeout=300)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
