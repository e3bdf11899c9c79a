#!/usr/bin/env bash
# Molecule: the real kimi_k25 play on Debian 12 and Debian 13 systemd podman
# nodes (check-mode converge, converge, idempotence, testinfra verify).
# The nodes share one uv cache on this machine, so vLLM's wheels are
# downloaded once per machine, not once per node.
set -euo pipefail
start=$SECONDS
molecule test
echo "molecule test: $((SECONDS - start)) s"
