# -*- coding: utf-8 -*-
"""Every role's nftables table, loaded for real with nft in this test's own network namespaces (issue 41, class 2).

A server namespace and a client namespace joined by a veth pair. The client opens a session to a port the table drops
and one to the SSH port Ansible connects on; then the table, rendered as the role renders it from its plan
(tests/unit/roles/test_firewall_rulesets.py's RENDERERS: every role's table, present and future), is loaded in the
server's namespace. Both sessions must go on, a new connection to the dropped port must be dropped (the client is no
allowed address), and a new one to the SSH port must pass. The control: the same table without its
`ct state established,related accept` cuts the open session, so this test sees the fault it exists for.
Needs root, ip (iproute2) and nft (nftables; scripts/setup installs it). Touches no other namespace."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path[:0] = [os.path.join(ROOT, "tests", "unit"), os.path.join(ROOT, "tests", "unit", "roles")]
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder  # noqa: E402

_AnsibleCollectionFinder(paths=[os.path.join(ROOT, "collections")])._install()
import test_firewall_rulesets as rulesets  # noqa: E402

SSH_PORT = 22
SERVER, CLIENT = "10.231.0.1", "10.231.0.2"  # outside every renderer's members and allowlists
ESTABLISHED = "ct state established,related accept"


def run(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def namespaces():
    tag = str(os.getpid())
    srv, cli = "moeops-fw-s" + tag, "moeops-fw-c" + tag
    try:
        run("ip", "netns", "add", srv)
        run("ip", "netns", "add", cli)
        run("ip", "-n", srv, "link", "add", "fws", "type", "veth", "peer", "name", "fwc", "netns", cli)
        for ns, dev, addr in ((srv, "fws", SERVER), (cli, "fwc", CLIENT)):
            run("ip", "-n", ns, "addr", "add", addr + "/24", "dev", dev)
            run("ip", "-n", ns, "link", "set", dev, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
        yield srv, cli
    finally:
        for ns in (srv, cli):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)


class Session(object):
    """The echo server in the server namespace and the line-driven client in the client namespace."""

    def __init__(self, srv, cli, ports):
        peer = os.path.join(HERE, "peer.py")
        self.server = subprocess.Popen(["ip", "netns", "exec", srv, sys.executable, peer, "serve"] + [str(p) for p in ports],
                                       stdout=subprocess.PIPE, text=True)
        assert self.server.stdout.readline().strip() == "LISTENING"
        self.client = subprocess.Popen(["ip", "netns", "exec", cli, sys.executable, peer, "client"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, *words):
        self.client.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.client.stdin.flush()
        return self.client.stdout.readline().strip()

    def close(self):
        for proc in (self.client, self.server):
            proc.kill()
            proc.wait()


def load(srv, text, path):
    path.write_text(text)
    run("ip", "netns", "exec", srv, "nft", "-f", str(path))


def tables(srv):
    return run("ip", "netns", "exec", srv, "nft", "list", "tables").stdout.split()


# Whether conntrack already tracks the server's namespace when the sessions open: "warm", as on a box whose own firewall or
# container runtime uses it; "cold", as on a box where the role's table is the first rule that needs it, so that the
# sessions open before the load are unknown to it (then `ct state established` alone does not keep them).
WARM = "table inet moeops_fw_warm {\n chain input {\n  type filter hook input priority 0; policy accept;\n  ct state new counter\n }\n}\n"


@pytest.mark.parametrize("case", ["cold", "warm", "control"])
@pytest.mark.parametrize("table", sorted(rulesets.RENDERERS))
def test_loading_the_table_keeps_open_sessions_and_drops_new_ones(namespaces, table, case, tmp_path):
    srv, cli = namespaces
    text = rulesets.RENDERERS[table](SSH_PORT)
    drops = rulesets.dropped_ports(text)
    dropped = drops[0][0]
    assert not any(low <= SSH_PORT <= high for low, high in drops), drops
    if case == "control":
        # CONTROL: what the tables were before issue 41 (every packet dropped, nothing established kept): it must cut
        # the open session, or this test could not see the fault.
        assert text.count(ESTABLISHED) == 1 and rulesets.NEW_ONLY in text, text
        text = text.replace(ESTABLISHED, "# (control: no established rule)").replace(rulesets.NEW_ONLY, "drop")
    name = [line.split()[2] for line in text.splitlines() if line.startswith("table ")][0]
    if case == "warm":
        load(srv, WARM, tmp_path / "warm.nft")
    session = Session(srv, cli, [SSH_PORT, dropped])
    try:
        # Before: both open, both answer.
        assert session.ask("open", "ssh", SERVER, SSH_PORT) == "ok"
        assert session.ask("open", "old", SERVER, dropped) == "ok"
        assert session.ask("echo", "ssh") == "ok" and session.ask("echo", "old") == "ok"
        load(srv, text, tmp_path / "table.nft")
        assert name in tables(srv)
        # After: the SSH session and a new SSH connection pass whatever the table says of other ports.
        assert session.ask("echo", "ssh") == "ok"
        assert session.ask("open", "ssh2", SERVER, SSH_PORT) == "ok"
        # A new connection to the dropped port from outside the allowlist gets no answer at all.
        assert session.ask("open", "new", SERVER, dropped) == "timeout"
        # The session opened before the load: kept, but cut by the control.
        assert session.ask("echo", "old") == ("timeout" if case == "control" else "ok")
    finally:
        session.close()
        for loaded in (name, "moeops_fw_warm"):
            subprocess.run(["ip", "netns", "exec", srv, "nft", "delete", "table", "inet", loaded], capture_output=True,
                           check=False)
    print("\n%s, %s: new connections to %d dropped, the session open there before the load %s, SSH (%d) open" % (
        table, case, dropped, "cut" if case == "control" else "kept", SSH_PORT))
