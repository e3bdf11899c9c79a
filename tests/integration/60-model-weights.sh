#!/usr/bin/env bash
# The model_weights role on this machine against real servers the test starts on loopback:
#   - a local model directory (real safetensors shards + index + config.json, made by make_tiny_model.py);
#   - an HTTP mirror: auth_mirror.py (http.server behind Basic authentication, a STAND-IN for a lab mirror) serving the
#     model and its moeops-weights-manifest.json, its credentials in model_weights_mirror_url;
#   - an rsync mirror: rsync --daemon;
#   - the huggingface_hub path: the pinned huggingface_hub (/opt/moeops-test/hf-hub-venv, STAND-IN for the vLLM
#     venv) against HF_ENDPOINT = stand_in_hub.py, a STAND-IN Hub serving the endpoints snapshot_download calls.
# Downloads run as the unprivileged user nobody, as they would as vllm. Checks: facts (path, config.json), the
# idempotent second run (changed=0, no request reaches the mirror or hub), progress lines, resume of a lost file,
# clear failures for truncated and missing shards and a wrong mirror password, and that neither the token nor the
# mirror's password is anywhere in logs, records or output.
set -euo pipefail
start=$SECONDS
here=tests/integration/model_weights
hf_venv=${MOEOPS_HF_HUB_VENV:-/opt/moeops-test/hf-hub-venv}
[ -x "$hf_venv/bin/python" ] || { echo "missing $hf_venv: run ./scripts/setup"; exit 1; }
work=$(mktemp -d)
chmod 0755 "$work"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait_url URL [STATUS]: until URL answers 200 (or STATUS, an HTTP error status that counts as an answer).
wait_url() {
  for _ in $(seq 50); do
    python3 - "$1" "${2:-200}" 2>/dev/null <<'PY' && return 0
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=1)
    sys.exit(sys.argv[2] != "200")
except urllib.error.HTTPError as exc:
    sys.exit(str(exc.code) != sys.argv[2])
PY
    sleep 0.2
  done
  echo "no answer from $1"; exit 1
}
token="hf_moeopsTEST$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
mirror_pw="pw-moeopsTEST$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
export ANSIBLE_ASYNC_DIR="$work/async" ANSIBLE_LOG_PATH="$work/ansible.log"

python3 "$here/make_tiny_model.py" "$work/model"
mkdir -p "$work/mirror" "$work/hf_home" "$work/state"
cp -r "$work/model" "$work/mirror/tiny-moe"
python3 - "$work/mirror/tiny-moe" <<'PY'
import os, sys
sys.path.insert(0, "plugins/module_utils/_weights")
import model_weights as mw
root = sys.argv[1]
text = mw.build_mirror_manifest(mw.directory_sizes(root))
open(os.path.join(root, mw.MIRROR_MANIFEST_NAME), "w").write(text)
PY
chown nobody:nogroup "$work/hf_home"

# Servers.
http_port=$(free_port)
python3 "$here/auth_mirror.py" --dir "$work/mirror" --port "$http_port" --user moeops --password "$mirror_pw" \
  2>"$work/http.log" &
pids+=($!)
python3 "$here/stand_in_hub.py" --dir "$work/model" --repo moeops-test/tiny-moe --port-file "$work/hub.port" \
  --token "$token" --log "$work/hub.log" --rate 6000 &
pids+=($!)
rsync_port=$(free_port)
printf 'use chroot = no\nuid = nobody\ngid = nogroup\n[models]\n  path = %s\n  read only = yes\n' "$work/mirror" >"$work/rsyncd.conf"
rsync --daemon --no-detach --address=127.0.0.1 --port="$rsync_port" --config="$work/rsyncd.conf" &
pids+=($!)
# The mirror answers (its 401 to a request without the credentials counts: that is the mirror answering).
wait_url "http://127.0.0.1:$http_port/tiny-moe/config.json" 401
for _ in $(seq 50); do [ -s "$work/hub.port" ] && break; sleep 0.2; done
[ -s "$work/hub.port" ] || { echo "the stand-in hub wrote no port file"; exit 1; }
read -r hub_port commit <"$work/hub.port"
# rsync --daemon, too, is used only once it listens.
for _ in $(seq 50); do rsync "rsync://127.0.0.1:$rsync_port/" >/dev/null 2>&1 && break; sleep 0.2; done
rsync "rsync://127.0.0.1:$rsync_port/" >/dev/null || { echo "no answer from rsync --daemon on port $rsync_port"; exit 1; }

# stage NAME EXPECT(ok|fail) EXTRA-ARGS...: one role run; output in $work/NAME.out, facts in $work/NAME.json.
# The mirrors and the stand-in Hub here serve plain http and rsync on loopback: vllm_allow_insecure_sources accepts them.
stage() {
  local name=$1 expect=$2 rc=0
  shift 2
  ansible-playbook "$here/stage.yml" -i localhost, -e ansible_python_interpreter="$(command -v python3)" \
    -e vllm_user=nobody -e vllm_group=nogroup -e vllm_venv="$hf_venv" \
    -e vllm_hf_home="$work/hf_home" -e model_weights_state_dir="$work/state" -e vllm_allow_insecure_sources=true \
    -e model_weights_poll_interval=1 -e model_weights_download_timeout=600 -e result_file="$work/$name.json" "$@" >"$work/$name.out" 2>&1 || rc=$?
  if { [ "$expect" = ok ] && [ "$rc" -ne 0 ]; } || { [ "$expect" = fail ] && [ "$rc" -eq 0 ]; }; then
    echo "run $name: exit $rc, expected $expect"; cat "$work/$name.out"; exit 1
  fi
}
changed() { grep -Eo 'changed=[0-9]+' "$work/$1.out" | cut -d= -f2; }
fact() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))" "$work/$1.json" "$2"; }
lines() { wc -l <"$1" | tr -d ' '; }

# 1. Local path: checked in place, facts set, nothing changed.
stage local ok -e model_weights_source=local -e model_weights_name=tiny-local -e model_weights_local_path="$work/model"
[ "$(fact local path)" = "$work/model" ] && [ "$(fact local "config['hidden_size']")" = 64 ] && [ "$(changed local)" = 0 ]
echo "local: complete in place, config.json read (hidden_size 64), changed=0"

# 2. Completeness failures on a local copy: a truncated shard, then a missing one.
cp -r "$work/model" "$work/broken"
truncate -s 20000 "$work/broken/model-00002-of-00003.safetensors"
stage truncated fail -e model_weights_source=local -e model_weights_name=tiny-broken -e model_weights_local_path="$work/broken"
grep -q 'model-00002-of-00003.safetensors is 20000 bytes, safetensors header says 33000' "$work/truncated.out"
rm "$work/broken/model-00002-of-00003.safetensors"
stage missing fail -e model_weights_source=local -e model_weights_name=tiny-broken -e model_weights_local_path="$work/broken"
grep -q 'missing: model-00002-of-00003.safetensors' "$work/missing.out"
echo "local: truncated shard and missing shard each fail with the file named"
cp -r "$work/model" "$work/private"
chmod 0600 "$work/private/model-00001-of-00003.safetensors"
stage unreadable fail -e model_weights_source=local -e model_weights_name=tiny-private -e model_weights_local_path="$work/private"
grep -q 'nobody cannot read model-00001-of-00003.safetensors (Permission denied)' "$work/unreadable.out"
echo "local: a shard the service user cannot read fails naming it"

# 3. HTTP mirror: download, then a second run that changes nothing and sends no request.
http=(-e model_weights_source=http -e model_weights_name=tiny-http -e "model_weights_mirror_url=http://moeops:$mirror_pw@127.0.0.1:$http_port/tiny-moe/"
      -e model_weights_dest="$work/dest-http")
t0=$SECONDS
stage http1 ok "${http[@]}"
[ "$(fact http1 "summary['downloaded']")" = True ] && [ "$(fact http1 path)" = "$work/dest-http" ]
[ "$(stat -c %U "$work/dest-http/model-00001-of-00003.safetensors")" = nobody ]
cmp "$work/model/model-00003-of-00003.safetensors" "$work/dest-http/model-00003-of-00003.safetensors"
echo "http mirror: first run downloaded $(fact http1 "summary['bytes_fetched']") bytes as nobody in $((SECONDS - t0)) s, changed=$(changed http1)"
before=$(lines "$work/http.log")
stage http2 ok "${http[@]}"
[ "$(changed http2)" = 0 ] && [ "$(lines "$work/http.log")" = "$before" ] && [ "$(fact http2 "summary['downloaded']")" = False ]
echo "http mirror: second run changed=0, 0 requests to the mirror (log $before lines before and after)"

# 4. HTTP mirror: a shard damaged on disk is fetched again (only it), one served short fails clearly.
truncate -s 1000 "$work/dest-http/model-00001-of-00003.safetensors"
before=$(lines "$work/http.log")
stage http3 ok "${http[@]}"
got=$(tail -n +"$((before + 1))" "$work/http.log" | grep -c '"GET /tiny-moe/model-' || true)
[ "$got" = 1 ] && [ "$(changed http3)" -ge 1 ]
echo "http mirror: truncated local shard re-fetched ($got shard request), changed=$(changed http3)"
truncate -s 30000 "$work/mirror/tiny-moe/model-00003-of-00003.safetensors"
stage http4 fail "${http[@]}" -e model_weights_name=tiny-http-short -e model_weights_dest="$work/dest-short"
grep -q 'model-00003-of-00003.safetensors: the mirror sends 30000 bytes, its manifest says 33000' "$work/http4.out"
cp "$work/model/model-00003-of-00003.safetensors" "$work/mirror/tiny-moe/"
echo "http mirror: a shard served short fails naming the file and both sizes"
stage http5 fail "${http[@]}" -e model_weights_name=tiny-http-wrong-pw -e model_weights_dest="$work/dest-wrong-pw" \
  -e "model_weights_mirror_url=http://moeops:wrong@127.0.0.1:$http_port/tiny-moe/"
grep -q 'cannot read the mirror manifest http://\*\*\*\*@127.0.0.1:.*401' "$work/http5.out"
echo "http mirror: a wrong password fails with the mirror's 401, the URL shown masked"

# 5. rsync mirror: download, second run unchanged.
rs=(-e model_weights_source=rsync -e model_weights_name=tiny-rsync -e "model_weights_mirror_url=rsync://127.0.0.1:$rsync_port/models/tiny-moe"
    -e model_weights_dest="$work/dest-rsync")
stage rsync1 ok "${rs[@]}"
cmp "$work/model/model-00002-of-00003.safetensors" "$work/dest-rsync/model-00002-of-00003.safetensors"
stage rsync2 ok "${rs[@]}"
[ "$(changed rsync2)" = 0 ]
echo "rsync mirror: staged, second run changed=0"

# 6. huggingface_hub against the stand-in Hub: gated (token), throttled so the progress poll prints several lines.
hf=(-e model_weights_source=hf -e model_weights_name=tiny-hf -e model_weights_repo_id=moeops-test/tiny-moe
    -e "model_weights_hf_endpoint=http://127.0.0.1:$hub_port" -e model_weights_token="$token"
    -e model_weights_max_workers=1)
t0=$SECONDS
stage hf1 ok "${hf[@]}"
snap="$work/hf_home/hub/models--moeops-test--tiny-moe/snapshots/$commit"
[ "$(fact hf1 path)" = "$snap" ] && [ "$(fact hf1 "summary['commit']")" = "$commit" ]
[ "$(fact hf1 "config['model_type']")" = tiny_moe ]
[ "$(stat -c %U "$snap/config.json")" = nobody ]
# One file at a time (max_workers 1) at 6 kB/s, about 17 s for the 97.4 KiB: the bytes-done of successive polls must
# rise at least twice. A poll is 1 s of waiting plus one module run (estimated at most 1 s here, 2 s at half this
# machine's speed), so at least 5 polls fall inside the download; at 12 kB/s (8 s) half speed left about 3.
polls=$(grep -c 'running: .* of 97.4 KiB (.*%) at ' "$work/hf1.out" || true)
steps=$(grep -Eo 'running: [0-9.]+ [KMG]?i?B' "$work/hf1.out" | sort -u | wc -l)
[ "$steps" -ge 3 ] || { echo "expected >= 3 distinct bytes-done values, got $steps"; cat "$work/hf1.out"; exit 1; }
grep -E 'running: .* of ' "$work/hf1.out" | head -3 | sed 's/^/  progress line: /'
python3 - "$work/hub.log" <<'PY'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
assert all(r["auth"] for r in reqs if r["status"] != 404 or "agent" not in r["path"]), "a request without the token"
assert {r["path"].split("?")[0].rsplit("/", 2)[-2] for r in reqs if "/tree/" in r["path"]}, "no tree listing"
PY
echo "hf (stand-in hub): snapshot $commit staged as nobody in $((SECONDS - t0)) s, $polls progress lines ($steps distinct bytes-done values), every request authorized"
before=$(lines "$work/hub.log")
stage hf2 ok "${hf[@]}"
[ "$(changed hf2)" = 0 ] && [ "$(lines "$work/hub.log")" = "$before" ]
echo "hf: second run changed=0, 0 requests to the hub"

# 7. hf: a blob lost from the cache is fetched again alone (resume of what is missing, not the whole snapshot).
blob=$(readlink -f "$snap/model-00002-of-00003.safetensors")
rm "$blob"
before=$(lines "$work/hub.log")
stage hf3 ok "${hf[@]}"
fetched=$(tail -n +"$((before + 1))" "$work/hub.log" | python3 -c 'import json,sys; print(sum(json.loads(l)["bytes"] for l in sys.stdin))')
[ "$fetched" = 33000 ] && [ -f "$blob" ]
echo "hf: one lost blob re-fetched, $fetched bytes from the hub (the shard's size)"

# 8. hf: a wrong token fails with the hub's answer, not a traceback of a partial cache.
stage hfbad fail "${hf[@]}" -e model_weights_name=tiny-hf-bad -e model_weights_token=hf_wrong -e model_weights_refresh=true
grep -q '401' "$work/hfbad.out"
echo "hf: a wrong token fails with the hub's 401"

# 9. Neither the token nor the mirror's password is in any output, log, record, progress or async result file.
for secret in "$token" "$mirror_pw"; do
  if grep -rF "$secret" "$work"/*.out "$work/ansible.log" "$work/state" "$work/async" "$work/hf_home" "$work"/dest-* 2>/dev/null; then
    echo "a secret leaked (see above)"; exit 1
  fi
done
grep -qF 'http://****@127.0.0.1:' "$work/http1.out"  # the URL is shown, masked
echo "token and mirror password: in none of $(find "$work" -maxdepth 1 -name "*.out" | wc -l) outputs, the ansible log, state, async results, the cache or the staged files"
echo "model weights integration: $((SECONDS - start)) s"
