#!/usr/bin/env bash
# What a user reads in the built tarball points only at what it ships: every relative link of every shipped Markdown
# file resolves in the tarball (anchors included), and no ansible-doc text (plugins' DOCUMENTATION, EXAMPLES,
# RETURN, the filters' YAML docs, the roles' argument specs) names a file that galaxy.yml's build_ignore keeps out
# (docs/dev, tests, molecule, scripts...). tests/run's artifact stage runs it on the tarball it built:
#   tests/artifact/links.sh TARBALL
set -euo pipefail
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 TARBALL (a built moeops-inference-*.tar.gz)" >&2
  exit 2
fi
exec python3 "$(dirname "$0")/links.py" "$1"
