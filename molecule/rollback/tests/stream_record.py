# -*- coding: utf-8 -*-
"""What the test clients' records say (files/drain_client.py, files/front_watch.py): each stream judged by what it
received, and the clients' output read. Pure, but for reading a client's pipe; unit-tested in test_stream_record.py.

A stream is judged by what it received, never by what the transport said: a server that closes a response cleanly
mid-stream raises no error on the client, and such a stream has no [DONE] and fewer tokens than it asked for. It was
cut all the same (issue 40: two streams cut at 969 and 20 of 1900 tokens, with no error, counted as not cut).
"""
from __future__ import annotations

import json
import select
import threading
import time

WHOLE, CUT, REFUSED, UNANSWERED = "whole", "cut", "refused", "unanswered"


def verdict(stream: dict) -> str:
    """One stream of a client's record:
    - whole: answered 200, [DONE] received, every token it asked for, no error event;
    - refused: an HTTP answer other than 200 (the front's 503) and no token;
    - unanswered: no HTTP answer and no token (the port was closed, or the connection dropped before any answer);
    - cut: anything else, that is, a stream that began (200, or a token) and did not end whole."""
    if (stream.get("status") == 200 and stream.get("done") and stream.get("error") is None
            and stream.get("tokens") == stream.get("max_tokens", stream.get("tokens"))):
        return WHOLE
    if not stream.get("tokens"):
        if stream.get("status") is None:
            return UNANSWERED
        if stream["status"] != 200:
            return REFUSED
    return CUT


def killmode_verdict(streams: list[dict], restart_at: float) -> tuple[list[dict], list[dict]]:
    """systemd's default KillMode (SIGTERM to every process of the unit at once): (the streams begun before the SIGTERM
    that were cut, the streams that ended whole more than 1 s after it). Every cut counts, with or without an error."""
    cut = [s for s in streams if s["start"] < restart_at and verdict(s) == CUT]
    drained = [s for s in streams if verdict(s) == WHOLE and s.get("last_token") and s["last_token"] > restart_at + 1]
    return cut, drained


def client_record(output: str) -> dict:
    """The record a test client printed: its last line (progress lines such as "FIRST TOKEN" come before it)."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines, "the client printed nothing"
    return json.loads(lines[-1])


def wait_for_line(proc, expected: str, seconds: float) -> float:
    """Read the client's stdout (a text pipe) until the line `expected`; return how long that took. Fails if the
    client ends, or prints something else, or `seconds` pass first: the event, not a guessed sleep, starts the next step."""
    t0 = time.monotonic()
    while True:
        left = seconds - (time.monotonic() - t0)
        assert left > 0, "no %r from the client within %.0f s" % (expected, seconds)
        ready, _w, _x = select.select([proc.stdout], [], [], left)
        if not ready:
            continue
        line = proc.stdout.readline()
        assert line, "the client ended before printing %r (exit %s)" % (expected, proc.poll())
        assert line.strip() == expected, line
        return time.monotonic() - t0


def finish(proc, seconds: float) -> dict:
    """Wait for the client to end (killed after `seconds`: each client bounds its own run) and return its record. Read
    from the same text pipe as wait_for_line, so that nothing it buffered is lost."""
    watchdog = threading.Timer(seconds, proc.kill)
    watchdog.start()
    try:
        text = proc.stdout.read()
        proc.wait()
    finally:
        watchdog.cancel()
    return client_record(text)
