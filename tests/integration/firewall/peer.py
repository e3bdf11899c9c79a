# -*- coding: utf-8 -*-
"""Both ends of the TCP sessions of test_netns_session.py, each run in its own network namespace.

    python peer.py serve PORT...   echo every byte back on each port; prints LISTENING once all are bound
    python peer.py client          reads commands on stdin, one per line, and answers each with one line:
        open NAME HOST PORT        connect (1.5 s at most): ok, timeout or refused
        echo NAME                  send one byte and wait for it back (1.5 s at most): ok, timeout or closed
"""
import socket
import sys
import threading

WAIT = 1.5


def serve(ports):
    def echo(conn):
        with conn:
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                conn.sendall(data)

    def accept(server):
        while True:
            conn, _addr = server.accept()
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    for port in ports:
        server = socket.create_server(("0.0.0.0", int(port)), reuse_port=False)
        threading.Thread(target=accept, args=(server,), daemon=True).start()
    print("LISTENING", flush=True)
    threading.Event().wait()


def client():
    sessions = {}
    for line in sys.stdin:
        words = line.split()
        try:
            if words[0] == "open":
                sessions[words[1]] = socket.create_connection((words[2], int(words[3])), timeout=WAIT)
            else:
                sock = sessions[words[1]]
                sock.sendall(b"x")
                if sock.recv(1) != b"x":
                    raise EOFError
            answer = "ok"
        except socket.timeout:
            answer = "timeout"
        except ConnectionRefusedError:
            answer = "refused"
        except (EOFError, OSError):
            answer = "closed"
        print(answer, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2:])
    else:
        client()
