# -*- coding: utf-8 -*-
"""TEST STAND-IN for vLLM's ``vllm serve`` (moeops molecule/rollback). NOT vLLM.

vLLM cannot serve without GPUs, so this small HTTP server takes its place as the ``vllm``
executable of a fake venv. It behaves as vLLM does where the role depends on it:
- it binds ``--host``/``--port`` only after "loading" (STANDIN_LOAD_SECONDS, default 3);
- ``/health`` answers 200 without authentication;
- ``/v1/*`` needs ``Authorization: Bearer <VLLM_API_KEY>`` when the variable is set (vLLM reads
  it from the environment: vllm/entrypoints/serve/middleware/register.py in 0.33.0);
- a ``--max-model-len`` above the model's 262144 positions fails the start with exit 1, as
  vLLM's config validation does: the "bad config" of the rollback test.
Other options are accepted and ignored.
"""
import argparse
import http.server
import json
import os
import sys
import time

MODEL_MAX_POSITIONS = 262144  # Kimi-K2.5's max_position_embeddings


def main():
    parser = argparse.ArgumentParser(prog="vllm (stand-in)")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-model-len", type=int, default=MODEL_MAX_POSITIONS)
    parser.add_argument("--served-model-name", default=None)
    args, _ignored = parser.parse_known_args()
    print("vLLM STAND-IN (test double, not vLLM) pid %d: serve %s" % (os.getpid(), args.model), flush=True)
    print("HF_TOKEN set: %s; VLLM_API_KEY set: %s; uid %d" % (
        bool(os.environ.get("HF_TOKEN")), bool(os.environ.get("VLLM_API_KEY")), os.getuid()), flush=True)
    if args.max_model_len > MODEL_MAX_POSITIONS:
        print("ValueError: User-specified max_model_len (%d) is greater than the derived max_model_len "
              "(max_position_embeddings=%d in model's config.json)." % (args.max_model_len, MODEL_MAX_POSITIONS),
              file=sys.stderr, flush=True)
        return 1
    time.sleep(float(os.environ.get("STANDIN_LOAD_SECONDS", "3")))
    key = os.environ.get("VLLM_API_KEY") or ""
    served = args.served_model_name or args.model

    class Handler(http.server.BaseHTTPRequestHandler):
        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 (http.server's naming)
            if self.path == "/health":
                return self._send(200, {})
            if self.path.startswith("/v1/"):
                if key and self.headers.get("Authorization") != "Bearer " + key:
                    return self._send(401, {"error": "Unauthorized"})
                return self._send(200, {"object": "list", "data": [{"id": served, "object": "model"}]})
            return self._send(404, {"detail": "Not Found"})

        def log_message(self, fmt, *fargs):
            print("%s %s" % (self.address_string(), fmt % fargs), flush=True)

    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    print("stand-in listening on %s:%d" % (args.host, args.port), flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
