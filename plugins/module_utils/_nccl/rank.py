# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rank side of the NCCL tuning sweep: one process a GPU, run by the vLLM venv's Python.

The module moeops.inference.nccl_tune writes this file's source to the node
and starts it once per rank and candidate, as

    python nccl_tune_rank.py --launch '<spec>'  (starts world_size ranks of itself
                                                  with the candidate environment,
                                                  waits, kills them at timeout_s)
    python nccl_tune_rank.py '<spec JSON>'      (one rank: RANK, WORLD_SIZE,
                                                  LOCAL_RANK, MASTER_ADDR, MASTER_PORT)
    python nccl_tune_rank.py --probe             (versions only, no process group)
    python nccl_tune_rank.py --copy '<spec>'      (one process: a copy between every GPU pair,
                                                  verified byte for byte; the P2P gate's first step)

The P2P gate (moeops.inference.p2p_gate) reuses --launch for its all-reduce step, and for its copy step
with spec "step": "copy" (one process of --copy, under the same hard timeout).

It needs nothing but PyTorch and the standard library, and imports PyTorch
only when run, so Ansible can import this file as module_utils anywhere.
Output: one line per record, LINE_PREFIX + JSON; NCCL's own log goes to stderr.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

LINE_PREFIX = "NCCL_TUNE "
# Inherited NCCL variables (and CUDA's connection count, which candidates set) would make "defaults" something else.
SCRUBBED_PREFIXES = ("NCCL_", "TORCH_NCCL_", "CUDA_DEVICE_MAX_CONNECTIONS")


def emit(record):
    sys.stdout.write(LINE_PREFIX + json.dumps(record, sort_keys=True) + "\n")
    sys.stdout.flush()


def nccl_version(torch):
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # CPU-only builds have no NCCL; the version is then unknown, not an error.
        return None
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    # Older PyTorch returns NCCL's integer code, major*10000 + minor*100 + patch (2.9+).
    return "%d.%d.%d" % (version // 10000, (version % 10000) // 100, version % 100)


def probe():
    import torch

    emit({"event": "probe", "torch": torch.__version__, "nccl_version": nccl_version(torch),
          "cuda_available": bool(torch.cuda.is_available()),
          "device_count": int(torch.cuda.device_count()) if torch.cuda.is_available() else 0})
    return 0


def run(spec):
    import datetime

    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    if spec.get("hang_rank") == rank:
        # TEST DOUBLE of a rank stuck before the first collective (the P2P gate's timeout test): it never answers.
        emit({"event": "hang", "rank": rank})
        while True:
            time.sleep(60)
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    backend = spec["backend"]
    on_gpu = spec["device"] == "cuda"
    dtype = getattr(torch, spec["dtype"])
    if on_gpu:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    kwargs = {"backend": backend, "rank": rank, "world_size": world_size,
              # A rank waiting for a peer gives up before the launcher's deadline when the spec says so (the P2P gate):
              # then only the rank that never answered is still running when the launcher kills, and it is named.
              "timeout": datetime.timedelta(seconds=float(spec.get("collective_timeout_s", spec.get("timeout_s", 120))))}
    if on_gpu:
        # Eager NCCL communicator set-up: init errors surface here, not in the first timed call.
        kwargs["device_id"] = device
    started = time.perf_counter()
    dist.init_process_group(**kwargs)
    emit({"event": "init", "rank": rank, "world_size": world_size, "backend": backend, "device": str(device),
          "torch": torch.__version__, "nccl_version": nccl_version(torch), "dtype": spec["dtype"],
          "init_s": round(time.perf_counter() - started, 3),
          "gpu": torch.cuda.get_device_name(device) if on_gpu else None})

    def sync():
        if on_gpu:
            torch.cuda.synchronize(device)

    inner = int(spec["inner"])
    for size in spec["sizes"]:
        tensor = torch.ones(int(size["elements"]), dtype=dtype, device=device)
        # Correctness first: a protocol that corrupts data must not win on speed.
        dist.all_reduce(tensor)
        sync()
        correct = bool(torch.all(tensor == float(world_size)).item())
        for _warm in range(int(spec["warmup"])):
            dist.all_reduce(tensor)
        sync()
        times = []
        for _iteration in range(int(spec["iterations"])):
            dist.barrier()
            sync()
            if on_gpu:
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                for _call in range(inner):
                    dist.all_reduce(tensor)
                end.record()
                end.synchronize()
                elapsed_us = begin.elapsed_time(end) * 1000.0
            else:
                t0 = time.perf_counter()
                for _call in range(inner):
                    dist.all_reduce(tensor)
                elapsed_us = (time.perf_counter() - t0) * 1e6
            times.append(round(elapsed_us / inner, 3))
        emit({"event": "timing", "rank": rank, "size": size["name"], "bytes": int(size["bytes"]),
              "times_us": times, "correct": correct})
        del tensor
    dist.barrier()
    dist.destroy_process_group()
    return 0


def copy_pairs(spec):
    """A copy from every GPU to every other, checked byte for byte: one record a pair, emitted before the copy
    starts ("start") and after ("copy"), so that a hang names the pair it hangs in."""
    import torch

    count = int(os.environ.get("WORLD_SIZE") or spec.get("world_size") or 1)  # the launcher passes it as WORLD_SIZE
    elements = int(spec.get("copy_bytes", 64 << 20)) // 4
    for src in range(count):
        torch.cuda.set_device(src)
        generator = torch.Generator(device="cuda:%d" % src).manual_seed(1234 + src)
        data = torch.randint(-2 ** 31, 2 ** 31 - 1, (elements,), dtype=torch.int32, device="cuda:%d" % src,
                             generator=generator)
        reference = data.cpu()
        for dst in range(count):
            if dst == src:
                continue
            emit({"event": "start", "pair": [src, dst]})
            began = time.perf_counter()
            copied = data.to("cuda:%d" % dst)
            torch.cuda.synchronize(dst)
            seconds = time.perf_counter() - began
            same = bool(torch.equal(copied.cpu(), reference))
            emit({"event": "copy", "pair": [src, dst], "bytes": elements * 4, "seconds": round(seconds, 6),
                  "correct": same, "peer_access": bool(torch.cuda.can_device_access_peer(src, dst))})
            del copied
    return 0


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(spec):
    """Start every rank with the candidate's environment (spec['env']) and report their output as one record."""
    world_size = int(spec["world_size"])
    timeout = float(spec["timeout_s"])
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
    base.update(spec.get("env") or {})
    base["PYTHONUNBUFFERED"] = "1"
    if spec.get("nccl_debug"):
        base.update(NCCL_DEBUG=spec["nccl_debug"], NCCL_DEBUG_SUBSYS="INIT,TUNING")
    rank_spec = json.dumps({k: v for k, v in spec.items() if k not in ("env", "world_size", "nccl_debug")})
    procs, files = [], []
    copy = spec.get("step") == "copy"
    for rank in range(1 if copy else world_size):
        env = dict(base, RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        argv = ["--copy", rank_spec] if copy else [rank_spec]
        out, err = tempfile.TemporaryFile(mode="w+"), tempfile.TemporaryFile(mode="w+")
        files.append((out, err))
        # Own process group each, so that a hung rank and its children can be killed. This file runs as a
        # script in the vLLM venv, outside any Ansible module, and the ranks must run at the same time:
        # run_command (which sanity asks for) starts one process and waits for it, so Popen it is.
        procs.append(subprocess.Popen(  # pylint: disable=ansible-bad-function
            [sys.executable, os.path.abspath(__file__)] + argv, env=env,
            stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True))
    deadline = time.monotonic() + timeout
    failure = ""
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            break
    stuck = [rank for rank, proc in enumerate(procs) if proc.poll() is None]
    if stuck:
        failure = "ranks killed after %ds (candidate_timeout or time_budget); rank(s) %s had not finished" % (
            timeout, ", ".join(str(r) for r in stuck))
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    ranks = {}
    for rank, (out, err) in enumerate(files):
        out.seek(0)
        err.seek(0)
        ranks[str(rank)] = {"rc": procs[rank].returncode, "stdout": out.read(), "stderr": err.read()[-20000:]}
        out.close()
        err.close()
        if not failure and procs[rank].returncode != 0:
            failure = "rank %d exited %d: %s" % (rank, procs[rank].returncode,
                                                 (ranks[str(rank)]["stderr"].strip().splitlines() or ["no output"])[-1])
    emit({"event": "launch", "failure": failure, "ranks": ranks, "stuck": stuck})
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--probe":
        return probe()
    if len(argv) == 3 and argv[1] == "--launch":
        return launch(json.loads(argv[2]))
    if len(argv) == 3 and argv[1] == "--copy":
        return copy_pairs(json.loads(argv[2]))
    if len(argv) != 2:
        sys.stderr.write("usage: nccl_tune_rank.py SPEC_JSON | --launch SPEC_JSON | --probe\n")
        return 2
    try:
        return run(json.loads(argv[1]))
    except Exception as exc:  # Reported to the module as a record; the traceback stays on stderr.
        import traceback

        traceback.print_exc()
        emit({"event": "error", "rank": int(os.environ.get("RANK", "-1")),
              "message": "%s: %s" % (type(exc).__name__, exc)})
        return 1


if __name__ == "__main__":
    # Run as a plain script by the module, never inside Ansible.
    raise SystemExit(main(sys.argv))
