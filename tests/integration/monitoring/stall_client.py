# -*- coding: utf-8 -*-
"""Stop the engine while a request runs, from the process that reads the request (51-monitoring-live.sh).

    stall_client.py URL MODEL ENGINE_PID OUT

Streams a long completion from vLLM and sends SIGSTOP to EngineCore as soon as 5 chunks have arrived, so that the
request is running when the engine stops however fast the machine generates (the tiny model can finish 1900 tokens
before a second `podman exec` polls). Writes "stopped N" to OUT at the stop, then "done C chunks, T tokens" (T:
vLLM's own count) or "error ..." when the stream ends; the test sends SIGCONT. Standard library only: it runs with
the node's /usr/bin/python3.
"""

import json
import os
import signal
import sys
import urllib.request


def main(url: str, model: str, engine_pid: int, out: str) -> None:
    body = json.dumps({"model": model, "prompt": "hello", "max_tokens": 1900, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}})
    request = urllib.request.Request(url, data=body.encode(), headers={"Content-Type": "application/json"})
    chunks = 0
    tokens = None
    stopped = False
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            for raw in response:
                line = raw.decode().strip()
                if line == "data: [DONE]":
                    break
                if not line.startswith("data: {"):
                    continue
                event = json.loads(line[6:])
                if event.get("usage") and not event.get("choices"):
                    tokens = event["usage"]["completion_tokens"]  # vLLM's own count (a chunk may carry several)
                    continue
                chunks += 1
                if not stopped and chunks >= 5:
                    os.kill(engine_pid, signal.SIGSTOP)
                    stopped = True
                    with open(out, "w", encoding="utf-8") as f:
                        f.write("stopped %d\n" % chunks)
    except Exception as e:  # the test reads the reason from OUT
        with open(out, "a", encoding="utf-8") as f:
            f.write("error %s after %d chunks\n" % (e, chunks))
        raise
    with open(out, "a", encoding="utf-8") as f:
        f.write("done %d chunks, %s tokens\n" % (chunks, tokens))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
