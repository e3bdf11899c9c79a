# -*- coding: utf-8 -*-
"""Unit tests of stream_record.py, the judging of the drain clients' streams (no node needed: tests/run's pytest
stages run them, and the safety suite runs them again beside the live tests)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from stream_record import CUT, REFUSED, UNANSWERED, WHOLE, client_record, finish, killmode_verdict, verdict, wait_for_line

RESTART_AT = 1000.0


def stream(start, tokens, max_tokens, done, last_token, status=200, error=None, **more):
    return dict({"start": start, "tokens": tokens, "max_tokens": max_tokens, "done": done, "last_token": last_token,
                 "status": status, "error": error}, **more)


# The record of issue 40's failed run (the default-KillMode test, straight to vLLM): "tokens 1900/950/1900/1900/969/20
# of 1900/950/1900/1900/1900/1900, 0 cut at the SIGTERM ... errors []". The last two were cut at the SIGTERM: no
# [DONE], fewer tokens than asked for, and no error, since the server closed each response cleanly. Times are seconds
# relative to that run's SIGTERM, as the client records them (first pair, then one more each, then the two cut).
ISSUE_40_RECORD = [
    stream(RESTART_AT - 21.0, 1900, 1900, True, RESTART_AT - 11.2),
    stream(RESTART_AT - 21.0, 950, 950, True, RESTART_AT - 16.1),
    stream(RESTART_AT - 16.1, 1900, 1900, True, RESTART_AT - 6.3),
    stream(RESTART_AT - 11.2, 1900, 1900, True, RESTART_AT - 1.5),
    stream(RESTART_AT - 6.3, 969, 1900, False, RESTART_AT + 0.2),
    stream(RESTART_AT - 1.5, 20, 1900, False, RESTART_AT + 0.2),
]


def test_the_issue_40_record_counts_two_streams_cut():
    cut, drained = killmode_verdict(ISSUE_40_RECORD, RESTART_AT)
    assert [(s["tokens"], s["max_tokens"]) for s in cut] == [(969, 1900), (20, 1900)]
    assert drained == []
    assert [verdict(s) for s in ISSUE_40_RECORD] == [WHOLE] * 4 + [CUT] * 2


def test_a_stream_is_cut_by_what_it_received_whatever_the_transport_said():
    # An error event, an exception, a clean close: with or without an error, short or without [DONE] is cut.
    assert verdict(stream(0, 5, 1900, False, 1, error={"message": "EngineCore died"})) == CUT
    assert verdict(stream(0, 5, 1900, False, 1, error="IncompleteRead(...)")) == CUT
    assert verdict(stream(0, 5, 1900, False, 1)) == CUT
    # Every token but no [DONE]: the end of the response was lost.
    assert verdict(stream(0, 1900, 1900, False, 1)) == CUT
    # [DONE] but fewer tokens than asked for (vLLM's usage count says so).
    assert verdict(stream(0, 1899, 1900, True, 1)) == CUT
    # Answered 200, then nothing at all: it began, so it was cut.
    assert verdict(stream(0, 0, 1900, False, None)) == CUT
    # Whole, with an error after all the tokens: not whole.
    assert verdict(stream(0, 1900, 1900, True, 1, error="late")) == CUT


def test_refused_and_unanswered_streams_received_nothing():
    assert verdict(stream(0, 0, 1900, False, None, status=503)) == REFUSED
    assert verdict(stream(0, 0, 1900, False, None, status=None, error="ConnectionRefusedError(111)",
                          refused=True)) == UNANSWERED
    assert verdict(stream(0, 0, 1900, False, None, status=None, error="ConnectionResetError(104)")) == UNANSWERED
    # A 503 with tokens cannot be a refusal.
    assert verdict(stream(0, 3, 1900, False, 1, status=503)) == CUT


def test_killmode_counts_only_streams_begun_before_the_sigterm_and_flags_a_drain():
    late = stream(RESTART_AT + 0.5, 7, 1900, False, RESTART_AT + 0.6)
    drained = stream(RESTART_AT - 2, 1900, 1900, True, RESTART_AT + 4)
    cut, whole_after = killmode_verdict([late, drained], RESTART_AT)
    assert cut == [] and whole_after == [drained]
    # Ending whole within a second of the SIGTERM is not a drain (the stream was about to end anyway).
    assert killmode_verdict([stream(RESTART_AT - 9, 1900, 1900, True, RESTART_AT + 0.5)], RESTART_AT) == ([], [])


def test_client_record_is_the_last_line():
    assert client_record('FIRST TOKEN\n{"streams": []}\n') == {"streams": []}
    with pytest.raises(AssertionError):
        client_record("")


def _client(script):
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)


def test_wait_for_line_then_finish_reads_the_rest():
    proc = _client('import time\nprint("FIRST TOKEN", flush=True)\ntime.sleep(0.3)\nprint("{\\"polls\\": [1]}")')
    assert wait_for_line(proc, "FIRST TOKEN", 30) < 30
    assert finish(proc, 30) == {"polls": [1]}


def test_wait_for_line_fails_when_the_client_ends_or_says_something_else():
    proc = _client('print("{}")')
    with pytest.raises(AssertionError):
        wait_for_line(proc, "FIRST TOKEN", 30)
    proc.wait()
    proc = _client("pass")
    with pytest.raises(AssertionError, match="ended before"):
        wait_for_line(proc, "FIRST TOKEN", 30)
    proc.wait()
    proc = _client("import time; time.sleep(5)")
    with pytest.raises(AssertionError, match="within"):
        wait_for_line(proc, "FIRST TOKEN", 0.3)
    proc.kill()
    proc.wait()
