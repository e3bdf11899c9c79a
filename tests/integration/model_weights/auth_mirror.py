# -*- coding: utf-8 -*-
"""STAND-IN weights mirror for 60-model-weights.sh: python's http.server (whole files, no Range) behind HTTP Basic
authentication, as a lab mirror whose URL carries its credentials would be.

    python auth_mirror.py --dir DIR --port PORT --user USER --password PASSWORD

Every request without those credentials gets 401 with a Basic challenge. Logs as http.server does, on stderr, with
the status, so the test can count the requests that reached a file."""
import argparse
import base64
import functools
import http.server


class Handler(http.server.SimpleHTTPRequestHandler):
    expected = ""

    def _authorized(self):
        if self.headers.get("Authorization") == self.expected:
            return True
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="moeops-test-mirror"')
        self.send_header("Content-Length", "0")
        self.end_headers()
        return False

    def do_GET(self):
        if self._authorized():
            super().do_GET()

    def do_HEAD(self):
        if self._authorized():
            super().do_HEAD()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    args = parser.parse_args()
    Handler.expected = "Basic " + base64.b64encode(("%s:%s" % (args.user, args.password)).encode()).decode()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), functools.partial(Handler, directory=args.dir))
    server.serve_forever()


if __name__ == "__main__":
    main()
