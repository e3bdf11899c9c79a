# -*- coding: utf-8 -*-
"""Test client (molecule/rollback) for the drain tests: N long streaming requests, and (with a poll limit) new
requests every 0.5 s; prints a JSON record with wall-clock times (time.time(): the containers share the machine's
clock, so they compare with the journal's).

argv: URL (the front, or vLLM itself), API key ("" for none), CA file ("" for none), max_tokens, streams, seconds to
keep polling (0: no polling, wait for the streams only), and optionally "direct": the URL is vLLM itself, which
refuses new requests only by closing its port at SIGTERM (no answer), where the front answers 503.
Each stream asks for exactly max_tokens tokens (ignore_eos) at temperature 0 and counts the tokens it gets; an
error event inside the stream (vLLM's in-stream 500 when its engine dies) is recorded as the stream's error. Whether a
stream was whole is judged by the test from what it received (tests/stream_record.py): a server that closes a response
cleanly mid-stream sends no error, and that stream has no [DONE] and fewer tokens than it asked for.
When the first token of any stream arrives, the line "FIRST TOKEN" is printed (and flushed), so that a test can act
while a stream is in flight rather than after a guessed sleep; the record is the last line.
The second relay's first stream asks for half as many: streams in one batch run in lockstep, so relays begun
together would end together, and a restart that came in the short gap between their streams would find none.
While polling, each of the N streams is relayed: when one ends whole and no poll has seen 503 yet, the next one starts
at once, so that streams are in flight whenever the restart comes, however long the play takes to get there. A stream
that the front refuses (503: it began after the drain) ends the relay; it is recorded with its status. Straight to
vLLM ("direct"), the relay runs until vLLM's port closes at SIGTERM, so one stream of each relay spans the SIGTERM.
"""
import json
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request


def main():
    url, key, cafile = sys.argv[1], sys.argv[2], sys.argv[3]
    max_tokens, count, limit = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    direct = sys.argv[7:] == ["direct"]
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    with urllib.request.urlopen(urllib.request.Request(url + "/v1/models", headers=headers), timeout=10,
                                context=context) as answer:
        model = json.load(answer)["data"][0]["id"]
    record = {"stream_start": time.time(), "streams": [], "polls": []}

    refusing = threading.Event()
    first_token = threading.Event()
    lock = threading.Lock()

    def stream(tokens):
        one = {"start": time.time(), "max_tokens": tokens, "tokens": 0, "done": False, "last_token": None,
               "status": None, "error": None}
        record["streams"].append(one)
        body = json.dumps({"model": model, "prompt": "drain", "max_tokens": tokens, "ignore_eos": True,
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
                            if not first_token.is_set():
                                with lock:
                                    if not first_token.is_set():
                                        print("FIRST TOKEN", flush=True)
                                        first_token.set()
        except urllib.error.HTTPError as err:
            one["status"] = err.code
        except Exception as err:  # pylint: disable=broad-except  # recorded: the test judges the stream
            one["error"] = repr(err)
            # No connection at all (vLLM's port closed at SIGTERM): nothing was sent, so nothing can have been cut.
            one["refused"] = isinstance(getattr(err, "reason", err), ConnectionRefusedError)
        return one

    def relay(first_tokens):
        one = stream(first_tokens)
        while limit and not refusing.is_set() and one["status"] == 200 and one["done"] and not one["error"]:
            one = stream(max_tokens)

    workers = [threading.Thread(target=relay, args=(max_tokens // 2 if index == 1 and limit else max_tokens,))
               for index in range(count)]
    for worker in workers:
        worker.start()
    time.sleep(1)
    seen_refusal = False
    while limit and time.time() - record["stream_start"] < limit:
        request = urllib.request.Request(url + "/v1/models", headers=headers)
        t = time.time()
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                poll = {"t": t, "status": answer.status}
        except urllib.error.HTTPError as err:
            poll = {"t": t, "status": err.code, "retry_after": err.headers.get("Retry-After")}
        except Exception as err:  # pylint: disable=broad-except  # recorded as no answer
            # vLLM's port closed (SIGTERM): refused at once; a timeout under load is not a refusal.
            poll = {"t": t, "status": None, "error": repr(err),
                    "refused": isinstance(getattr(err, "reason", err), ConnectionRefusedError)}
        record["polls"].append(poll)
        seen_refusal = seen_refusal or poll["status"] == 503 or (direct and poll.get("refused", False))
        if seen_refusal:
            refusing.set()
        if seen_refusal and poll["status"] == 200 and not any(w.is_alive() for w in workers):
            break
        time.sleep(0.5)
    for worker in workers:
        worker.join(timeout=300)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
