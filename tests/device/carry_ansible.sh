# shellcheck shell=bash
# Sourced by tests/device/*.sh, from the repository root: makes the ansible-core wheels in .whl/
# (scripts/device-wheels, docs/dev/device.md) runnable on the device tool's machine, with this checkout as
# moeops.inference and the carried ansible.posix (its json callback, for the scripts' own output; the collection
# needs ansible-core alone).  Argument: the stdout callback.
# Sets PATH, PYTHONPATH, ANSIBLE_* and py (the Python that runs the modules).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH ANSIBLE_HOME=/tmp/ah
_carry_root=/tmp/ac/ansible_collections
mkdir -p "$_carry_root/moeops" "$_carry_root/ansible"
ln -sfn "$PWD" "$_carry_root/moeops/inference"
ln -sfn "$PWD/.whl/ansible.posix" "$_carry_root/ansible/posix"
printf "[defaults]\nstdout_callback = %s\n" "${1:?stdout callback}" > /tmp/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH=/tmp/ac ANSIBLE_CONFIG=/tmp/ansible.cfg
py=$(command -v python3)
export py
