#!/usr/bin/env bash
# The roles used as a user uses them: a project outside the checkout (a copy of
# tests/integration/targets/external_playbook/) whose playbook lists the roles with
# vllm_service_profile: glm5 and nothing else, run against the built tarball installed into an empty
# collections path (tests/run's artifact stage), on a fresh simulated node:
#   1. it converges the node;
#   2. `ansible-playbook moeops.inference.glm5` (the shipped playbook, by name: the same roles, the same profile)
#      on the same node then changes nothing, and the unit is byte-identical. That is also the second run that
#      shows the roles idempotent (a second run of the user's playbook would repeat it: CI's time is counted);
#   3. the same play with only moeops.inference.vllm_service (vLLM already there) converges, zero changes;
#   4. that role alone refuses what preflight would refuse for it, before anything changes: tensor parallel 3 for
#      MiniMax-M2.5 (8 key/value heads), the removed moeops_model, no GPUs read; it warns about a misspelt
#      variable with the closest name; one knob changed is changed=1, with the role's outcome line.
# The node is the harness's (playbooks/sim_node.yml from the checkout): GPUs replayed from a snapshot.
set -euo pipefail
start=$SECONDS
installed=$(readlink -f "${MOEOPS_INSTALLED:-tests/output/installed}")
[ -d "$installed/ansible_collections/moeops/inference" ] || { echo "no installed artifact in $installed"; exit 1; }
export MOEOPS_NODE_SUFFIX=${MOEOPS_NODE_SUFFIX:-}
name=moeops-external
node=$name$MOEOPS_NODE_SUFFIX
work=$(mktemp -d)
cleanup() { podman rm -f -t 0 "$node" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
podman rm -f -t 0 "$node" >/dev/null 2>&1 || true

# The user's project: their playbooks, their inventory (the simulated node's GPU snapshot, as in inventories/sim,
# reached with containers.podman's connection: the suites' own, tests/connection_plugins, is not theirs), no ansible.cfg.
project=$work/project
mkdir -p "$project/group_vars"
cp tests/integration/targets/external_playbook/*.yml "$project/"
cp inventories/sim/group_vars/vllm_servers/sim.yml "$project/group_vars/all.yml"
cat > "$project/hosts.yml" <<YAML
all:
  children:
    gpu_servers:
      children:
        vllm_servers:
          hosts:
            $name: {sim_node_suite: bookworm, ansible_connection: containers.podman.podman}
YAML
echo "--- node $node"
ansible-playbook -i "$project/hosts.yml" playbooks/sim_node.yml > "$work/sim.log" || { tail -40 "$work/sim.log"; exit 1; }

# FlashInfer's kernels (vllm_flashinfer_kernels, on by default) come from FlashInfer's index, which this machine cannot
# reach. A TEST DOUBLE index on the node serves a flashinfer-cubin wheel made here that holds no kernel, at the
# flashinfer-python version the pinned vLLM requires (its recorded METADATA), so that the role's own install from an
# index and its version check run; the user's inventory points vllm_flashinfer_index_url at it, as at a mirror.
vllm_version=$(sed -n 's/^vllm_version: "\(.*\)"$/\1/p' roles/vllm/defaults/main.yml)
fi_version=$(sed -n 's/^Requires-Dist: flashinfer-python==//p' "tests/fixtures/vllm/vllm-$vllm_version.dist-info.METADATA")
[ -n "$fi_version" ] || { echo "no flashinfer-python pin in vLLM $vllm_version's recorded METADATA"; exit 1; }
python3 tests/integration/flashinfer/cubin_test_double.py "$fi_version" "$work/flashinfer-index" >/dev/null
podman cp "$work/flashinfer-index" "$node:/srv/moeops-test-flashinfer-index"
podman exec -d "$node" python3 -m http.server 8199 --bind 127.0.0.1 --directory /srv/moeops-test-flashinfer-index >/dev/null
# The converge must find it listening: wait until it answers (`podman exec -d` returns before the server binds).
index_up() {
  podman exec "$node" python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8199/", timeout=2)' 2>/dev/null
}
for _ in $(seq 60); do index_up && break; sleep 0.5; done
index_up || { echo "the FlashInfer TEST DOUBLE index on the node does not answer"; exit 1; }
# Both indexes carry credentials, as a lab's mirrors do (PyPI and http.server ignore them): no output of any run may
# show the password (issue 41, class 4; checked at the end).
index_pw="pw-moeopsTEST$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "vllm_flashinfer_index_url: http://moeops:$index_pw@127.0.0.1:8199/  # TEST DOUBLE index (52-external-playbook.sh)" \
  "vllm_allow_insecure_sources: true  # the TEST DOUBLE index serves plain http on the node's loopback" \
  "vllm_index_url: https://moeops:$index_pw@pypi.org/simple" \
  >> "$project/group_vars/all.yml"
echo "--- FlashInfer TEST DOUBLE index on the node: flashinfer-cubin $fi_version (vLLM $vllm_version)"

unset ANSIBLE_CONFIG
export ANSIBLE_COLLECTIONS_PATH=$installed
# What a user would put in their own ansible.cfg for speed; nothing else is configured.
export ANSIBLE_PIPELINING=true
cd "$project"
where=$(ansible-galaxy collection list moeops.inference --format json | python3 -c 'import json,sys; print(*json.load(sys.stdin))')
[ "$where" = "$installed/ansible_collections" ] || { echo "moeops.inference found in '$where', not in $installed"; exit 1; }
echo "--- the user's playbook ($(wc -l < playbook.yml) lines), from $project, collection from $where:"
cat playbook.yml

changed() {  # the PLAY RECAP's changed= for the node
  sed -n "s/^$name *: .*changed=\([0-9]*\).*/\1/p" "$1" | tail -n1
}
run() {  # label, then ansible-playbook arguments
  local label=$1; shift
  local t0=$SECONDS
  ansible-playbook -i hosts.yml "$@" > "$work/$label.log" 2>&1 || { echo "$label failed:"; tail -40 "$work/$label.log"; exit 1; }
  echo "$label: changed=$(changed "$work/$label.log") in $((SECONDS - t0)) s"
}
unit_sum() { podman exec "$node" sha256sum /etc/systemd/system/vllm.service | cut -d' ' -f1; }

run converge playbook.yml
[ "$(changed "$work/converge.log")" -gt 0 ] || { echo "the first run changed nothing on a fresh node"; exit 1; }
# The unit runs the engine's own venv (the one /opt/vllm/engine links to), never the link.
engine=$(podman exec "$node" readlink -f /opt/vllm/engine)
[[ $engine =~ ^/opt/vllm/venvs/$vllm_version-cuda-[0-9a-f]{12}$ ]] || { echo "/opt/vllm/engine links to '$engine'"; exit 1; }
grep -q "ExecStart=$engine/bin/vllm serve nvidia/GLM-5-NVFP4" <(podman exec "$node" cat /etc/systemd/system/vllm.service) \
  || { echo "the unit does not serve the glm5 profile's model from $engine"; exit 1; }
external=$(unit_sum)
cubin=$(podman exec "$node" /opt/vllm/engine/bin/python -c 'import importlib.metadata as m; print(m.version("flashinfer-cubin"))')
[ "$cubin" = "$fi_version" ] || { echo "flashinfer-cubin in the venv: '$cubin', not $fi_version"; exit 1; }
echo "converge installed flashinfer-cubin $cubin (the TEST DOUBLE) beside vLLM $vllm_version"

run shipped moeops.inference.glm5 -e moeops_hosts=gpu_servers
shipped=$(unit_sum)
[ "$external" = "$shipped" ] || { echo "unit differs: external playbook $external, moeops.inference.glm5 $shipped"; exit 1; }
[ "$(changed "$work/shipped.log")" -eq 0 ] || { echo "moeops.inference.glm5 changed the node:"; grep -B1 -E '^changed:' "$work/shipped.log" | head -20; exit 1; }
echo "unit sha256 $external: the same from the user's playbook and from moeops.inference.glm5"

run service_only service_only.yml
[ "$(changed "$work/service_only.log")" -eq 0 ] || { echo "vllm_service alone changed something"; grep -B1 -E '^changed:' "$work/service_only.log" | head -20; exit 1; }
[ "$(unit_sum)" = "$external" ] || { echo "vllm_service alone rendered another unit"; exit 1; }

refused() {  # label, the words the refusal must hold (one per argument until --), then ansible-playbook arguments
  local label=$1; shift
  local words=()
  while [ "$1" != -- ]; do words+=("$1"); shift; done; shift
  local t0=$SECONDS
  if ansible-playbook -i hosts.yml service_only.yml "$@" > "$work/$label.log" 2>&1; then
    echo "$label: vllm_service alone accepted it:"; tail -30 "$work/$label.log"; exit 1
  fi
  for w in "${words[@]}"; do
    grep -qF -- "$w" "$work/$label.log" || { echo "$label: the refusal lacks: $w"; grep -E 'fatal|FAILED|WARNING' "$work/$label.log" | head; exit 1; }
  done
  [ "$(changed "$work/$label.log")" = 0 ] || { echo "$label: changed something before refusing"; exit 1; }
  echo "$label: refused before any change in $((SECONDS - t0)) s: $(grep -oF -- "${words[0]}" "$work/$label.log" | head -1)"
}
refused tp3_minimax "vllm_service_tensor_parallel_size 3" "8 key/value heads" -- \
  -e vllm_service_profile=minimax_m25 -e vllm_service_tensor_parallel_size=3
refused removed_name "moeops_model was removed" "vllm_service_profile" -- -e moeops_model=kimi_k25
# A misspelt variable is refused with the name it resembles (moeops_unknown_names: refuse, the default).
refused misspelt_name "vllm_service_tensor_paralel_size is set but is not an option of role vllm_service" \
  "did you mean vllm_service_tensor_parallel_size?" -- -e vllm_service_tensor_paralel_size=4
# No GPUs read: auto (NVML, else nvidia-smi) on a node without the NVIDIA driver reads none; nothing said the GPUs
# are not needed.
refused no_gpus "no NVIDIA GPU could be read" "gpu_facts_required false" -- -e gpu_facts_backend=auto

# One knob, changed once: the unit and nothing else (no prediction or backup counted), with the role's own outcome
# line; the misspelt variable beside it is warned about with the name it resembles (moeops_unknown_names: warn, as
# for an inventory shared with other tools), and has no effect.
run one_knob service_only.yml -e vllm_service_max_model_len=65536 -e vllm_service_tensor_paralel_size=4 \
  -e moeops_unknown_names=warn
[ "$(changed "$work/one_knob.log")" -eq 1 ] || { echo "one knob changed $(changed "$work/one_knob.log") things:"; grep -E '^changed:' -B1 "$work/one_knob.log"; exit 1; }
grep -qF "did you mean vllm_service_tensor_parallel_size?" "$work/one_knob.log" || { echo "no warning for the misspelt variable"; exit 1; }
grep -qE '"msg": "vllm_service: glm-5' "$work/one_knob.log" || { echo "the role printed no outcome line"; exit 1; }
echo "one knob: changed=1; $(grep -oE 'vllm_service: glm-5[^"]*' "$work/one_knob.log" | tail -1)"
grep -oE '\[WARNING\]: vllm_service: vllm_service_tensor_paralel_size[^(]*\(did you mean [a-z_]*\?\)' "$work/one_knob.log" | head -1
# And back: the next run restores the unit (the node is left as the shipped playbook made it).
run restore service_only.yml
# The indexes' password: in no output of any run; their URLs shown masked.
if grep -lF "$index_pw" "$work"/*.log; then echo "the index password leaked into the output above"; exit 1; fi
grep -qF "from http://****@127.0.0.1:8199/" "$work/converge.log" || { echo "the converge did not show FlashInfer's index, masked"; exit 1; }
echo "index password: in none of $(find "$work" -maxdepth 1 -name "*.log" | wc -l) outputs; the URLs shown masked"
echo "external playbook: passed in $((SECONDS - start)) s"
