#!/usr/bin/env bash
# Every role's nftables table, loaded with nft in this test's own network namespaces: an open session survives the
# load, a new connection to a dropped port is dropped, the SSH port stays open; a control table without its established
# rule cuts the session (tests/integration/firewall/test_netns_session.py). Seconds; needs root, ip and nft.
set -euo pipefail
command -v nft >/dev/null || { echo "57-firewall-netns: nft is missing (apt-get install nftables; scripts/setup)"; exit 1; }
python -m pytest -q -p no:cacheprovider -s tests/integration/firewall/test_netns_session.py
