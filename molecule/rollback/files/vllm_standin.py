# -*- coding: utf-8 -*-
"""TEST STAND-IN for vLLM's ``vllm serve`` (moeops molecule/rollback). NOT vLLM.

vLLM cannot serve without GPUs, so this small HTTP server takes its place as the ``vllm``
executable of a fake venv. It behaves as vLLM 0.33.0 does where the role and its front depend on it:
- it binds ``--host``/``--port`` only after "loading" (STANDIN_LOAD_SECONDS, default 3);
- it registers vLLM 0.33.0's route table for a generative model, read from ``standin-routes.json`` next to
  the venv (tests/fixtures/vllm/routes-0.33.0-generate.json, taken from vLLM's own build_app): a known
  path with another method is 405, an unknown path 404;
- the API key (``VLLM_API_KEY``, as vLLM reads it) guards only paths under /v1, /v2, /inference and
  /cohere, as vLLM's GUARDED_PREFIX does: /invocations, /tokenize, /metrics ... answer anyone;
- ``POST /v1/completions`` and ``/v1/chat/completions`` with ``"stream": true`` send ``max_tokens`` server-sent
  events, one every STANDIN_TOKEN_SECONDS (default 0.05), then ``data: [DONE]``;
- ``--shutdown-timeout N``: on SIGTERM the requests in flight finish (at most N s) while new ones get 503;
  0, vLLM's default, aborts them at once;
- a ``--max-model-len`` above the model's 262144 positions fails the start with exit 1, as
  vLLM's config validation does: the "bad config" of the rollback test.
Other options are accepted and ignored.
"""
import argparse
import http.server
import json
import os
import re
import signal
import sys
import threading
import time

MODEL_MAX_POSITIONS = 262144  # Kimi-K2.5's max_position_embeddings
GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")


def load_routes():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[0]))), "standin-routes.json")
    with open(path) as f:
        table = json.load(f)["routes"]
    routes = []
    for r in table:
        regex = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(r["path"])) + "$"
        routes.append((re.compile(regex), set(r["methods"] or ["GET"]), r["path"], r["file"]))
    return routes


def main():
    parser = argparse.ArgumentParser(prog="vllm (stand-in)")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-model-len", type=int, default=MODEL_MAX_POSITIONS)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--shutdown-timeout", type=int, default=0)
    args, _ignored = parser.parse_known_args()
    print("vLLM STAND-IN (test double, not vLLM) pid %d: serve %s" % (os.getpid(), args.model), flush=True)
    print("HF_TOKEN set: %s; VLLM_API_KEY set: %s; uid %d" % (
        bool(os.environ.get("HF_TOKEN")), bool(os.environ.get("VLLM_API_KEY")), os.getuid()), flush=True)
    if args.max_model_len > MODEL_MAX_POSITIONS:
        print("ValueError: User-specified max_model_len (%d) is greater than the derived max_model_len "
              "(max_position_embeddings=%d in model's config.json)." % (args.max_model_len, MODEL_MAX_POSITIONS),
              file=sys.stderr, flush=True)
        return 1
    routes = load_routes()
    time.sleep(float(os.environ.get("STANDIN_LOAD_SECONDS", "3")))
    token_seconds = float(os.environ.get("STANDIN_TOKEN_SECONDS", "0.05"))
    key = os.environ.get("VLLM_API_KEY") or ""
    served = args.served_model_name or args.model
    state = {"draining": False, "in_flight": 0}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self):
            length = int(self.headers.get("Content-Length") or 0)
            try:
                return json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                return {}

        def _stream(self, body):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for i in range(int(body.get("max_tokens") or 16)):
                time.sleep(token_seconds)
                self.wfile.write(("data: %s\n\n" % json.dumps({"choices": [{"index": 0, "text": "t%d " % i}]})).encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _handle(self, method):
            path = self.path.split("?", 1)[0]
            known = [r for r in routes if r[0].match(path)]
            if not known:
                return self._send(404, {"detail": "Not Found"})
            if not any(method in r[1] for r in known):
                return self._send(405, {"detail": "Method Not Allowed"})
            if path.startswith(GUARDED_PREFIX) and key and self.headers.get("Authorization") != "Bearer " + key:
                return self._send(401, {"error": "Unauthorized"})
            body = self._body() if method == "POST" else {}
            with lock:
                if state["draining"] and path != "/health":
                    return self._send(503, {"error": "shutting down"})
                state["in_flight"] += 1
            try:
                if path == "/health":
                    return self._send(200, {})
                if path == "/v1/models":
                    return self._send(200, {"object": "list", "data": [{"id": served, "object": "model"}]})
                if path in ("/v1/completions", "/v1/chat/completions") and body.get("stream"):
                    return self._stream(body)
                return self._send(200, {"standin": True, "route": [r[2] for r in known if method in r[1]][0],
                                        "served_by": [r[3] for r in known if method in r[1]][0]})
            finally:
                with lock:
                    state["in_flight"] -= 1

        def do_GET(self):  # noqa: N802 (http.server's naming)
            self._handle("GET")

        def do_POST(self):  # noqa: N802
            self._handle("POST")

        def do_HEAD(self):  # noqa: N802
            self._handle("HEAD")

        def log_message(self, fmt, *fargs):
            print("%s %s" % (self.address_string(), fmt % fargs), flush=True)

    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True

    def drain_and_exit():
        t0 = time.monotonic()
        with lock:
            print("STAND-IN SIGTERM: draining %d request(s) in flight, --shutdown-timeout %d" % (
                state["in_flight"], args.shutdown_timeout), flush=True)
        while time.monotonic() - t0 < args.shutdown_timeout:
            with lock:
                if state["in_flight"] == 0:
                    break
            time.sleep(0.1)
        with lock:
            print("STAND-IN exits after %.1f s, %d request(s) aborted" % (time.monotonic() - t0, state["in_flight"]),
                  flush=True)
        os._exit(0)

    def on_sigterm(_signum, _frame):
        with lock:
            state["draining"] = True
        threading.Thread(target=drain_and_exit, daemon=True).start()

    signal.signal(signal.SIGTERM, on_sigterm)
    print("stand-in listening on %s:%d" % (args.host, args.port), flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
