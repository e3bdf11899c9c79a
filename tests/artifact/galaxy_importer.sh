#!/usr/bin/env bash
# galaxy-importer, the checker Ansible Galaxy runs on every upload, on the built tarball (argument).
#  1. The tarball as built: the one objection allowed is the missing `repository` (galaxy.yml says why it is
#     unset). galaxy-importer stops at that metadata error, before its other checks.
#  2. So that the other checks run too: a TEST COPY whose MANIFEST.json alone gains a repository under the
#     reserved .invalid domain (RFC 2606; never shipped). It must pass with no ERROR and no WARNING line.
# Runs with the galaxy-importer venv on PATH (tests/run); ansible-lint on the roles is on, as on Galaxy.
# Its venv has the ansible bundle too, as after `pip install ansible`; the collection declares no dependency.
set -euo pipefail
tarball=$(readlink -f "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[galaxy-importer]\nRUN_ANSIBLE_DOC = True\nRUN_ANSIBLE_LINT = True\nRUN_ANSIBLE_TEST = False\n' >"$work/galaxy-importer.cfg"
export GALAXY_IMPORTER_CONFIG=$work/galaxy-importer.cfg ANSIBLE_LOCAL_TEMP=$work/ansible-tmp
importer() { (cd "$(dirname "$1")" && python -m galaxy_importer.main "$(basename "$1")") >"$2" 2>&1; }

rc=0
importer "$tarball" "$work/as-built.log" || rc=$?
grep -E 'WARNING|ERROR' "$work/as-built.log" >"$work/as-built.findings" || true
if [ "$rc" -eq 0 ] || [ "$(cat "$work/as-built.findings")" != \
     "ERROR: The import failed for the following reason: Invalid collection metadata. 'repository' is required" ]; then
  echo "galaxy-importer on the tarball as built: exit $rc, expected exactly the missing-repository error:"
  cat "$work/as-built.log"; exit 1
fi
echo "galaxy-importer, tarball as built: $(cat "$work/as-built.findings")"

mkdir "$work/copy"
python3 - "$tarball" "$work/copy/$(basename "$tarball")" <<'PY'
import io, json, sys, tarfile
with tarfile.open(sys.argv[1]) as src, tarfile.open(sys.argv[2], "w:gz") as dst:
    for member in src.getmembers():
        data = src.extractfile(member) if member.isfile() else None
        if member.name == "MANIFEST.json":
            manifest = json.load(data)
            assert manifest["collection_info"]["repository"] is None, "the tarball has a repository now: drop the copy"
            manifest["collection_info"]["repository"] = "https://repository.invalid/moeops/inference"
            raw = json.dumps(manifest, indent=4).encode()
            member.size, data = len(raw), io.BytesIO(raw)
        dst.addfile(member, data)
PY
rc=0
importer "$work/copy/$(basename "$tarball")" "$work/copy.log" || rc=$?
findings=$(grep -cE 'WARNING|ERROR' "$work/copy.log" || true)
sed 's/^/  /' "$work/copy.log"
if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ]; then
  echo "galaxy-importer on the test copy with a repository: exit $rc, $findings WARNING/ERROR lines"; exit 1
fi
echo "galaxy-importer, test copy with a repository: exit 0, 0 errors, 0 warnings"
