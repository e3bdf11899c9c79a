# -*- coding: utf-8 -*-
# Copyright: (c) 2026, moeops.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine check: the pinned vLLM's own decisions for a profile on a compute capability, without a GPU.

Run by the vLLM venv's Python (like nccl_tune_rank.py), never by Ansible's:

    python _engine/check.py < request.json        (request: see verdict.build_request)

For each profile and compute capability in the request it pins vLLM's CUDA platform to that capability
(a subclass of vllm.platforms.cuda.CudaPlatform whose get_device_capability answers it, installed as
vllm.platforms.current_platform, the way vLLM's own selector tests patch it) and asks vLLM itself:

- attention: vllm.v1.attention.selector.get_attn_backend, the function vLLM's attention layers call,
  with what the model's layer passes (MLA, sparse, head size, the heads of one rank); when it refuses,
  the per-backend reasons of CudaPlatform.get_valid_backends (each backend's validate_configuration:
  supports_compute_capability, supported_kv_cache_dtypes, ...);
- KV cache dtype: whether the selected backend takes the profile's dtype, and what vLLM's MLA layer turns
  it into (_canonicalize_sparse_mla_kv_cache_dtype: auto is fp8_ds_mla on FLASHINFER_MLA_SPARSE_SM120);
  when the dtype is what makes the selection fail, the same selection with "auto" says so;
- quantization: the config class of get_quantization_config(method) and its get_min_capability, compared
  as vllm/config/vllm.py does; for compressed-tensors with the model's quantization_config, the linear
  scheme vLLM's own _get_scheme_from_parts picks, with its get_min_capability;
- tensor parallel: the head rule of ModelConfig.verify_with_parallel_config, the key/value head split or
  replication, and the expert placement of fused_moe's determine_expert_map under expert parallel.

Output: one line, LINE_PREFIX + JSON ({"vllm": version, "symbols": [...], "results": [...]}); vLLM's log
and warnings may go to either stream, so readers take only that line.  A vLLM without one of SYMBOLS stops
the check with {"error": ..., "missing": [...]} and exit status 3: an upgrade must be looked at, not
passed.  An attention type the script does not know is "not checked by the engine", never passed.

No GPU: vLLM's CUDA extension modules link libcuda.so.1, which only a driver installs.  Without one this
script re-executes itself with a CUDA driver stub (the toolkit's stubs/libcuda.so, or the copy that
PyNvVideoCodec, a vLLM dependency, bundles) as libcuda.so.1: every driver call then fails with
CUDA_ERROR_STUB_LIBRARY, so nothing can run on a device by accident, while vLLM's modules import.

It needs nothing but the standard library until main() runs, so Ansible can import this file as
module_utils anywhere (ansible-test's import test has no vLLM).
"""

from __future__ import annotations

import ctypes
import glob
import importlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import traceback

LINE_PREFIX = "ENGINE_CHECK "
SCHEMA_VERSION = 1
# The attention types a profile may name and what vLLM's attention layer passes for them.
ATTENTION_TYPES = {
    "sparse_mla": {"use_mla": True, "use_sparse": True},
    "mla": {"use_mla": True, "use_sparse": False},
    "gqa": {"use_mla": False, "use_sparse": False},
}
# cuInit's answer from the CUDA toolkit's driver stub (CUDA_ERROR_STUB_LIBRARY).
CUDA_ERROR_STUB_LIBRARY = 34
STUB_DIR_ENV = "MOEOPS_ENGINE_CHECK_STUB_DIR"
STUB_PATH_ENV = "MOEOPS_ENGINE_CHECK_LIBCUDA_STUB"

# Every vLLM name the check uses: (module, attribute path).  All are resolved before anything is checked.
# The platform's come first: the pinned platform must be vLLM's current_platform before any other vLLM
# module is imported, since some decide at import time what they are (fa_utils asks is_cuda()).
PLATFORM_SYMBOLS = (
    ("vllm", "__version__"),
    ("vllm.platforms", "current_platform"),
    ("vllm.platforms.interface", "DeviceCapability"),
    ("vllm.platforms.interface", "Platform"),
    ("vllm.platforms.cuda", "CudaPlatform"),
    ("vllm.platforms.cuda", "CudaPlatform.get_valid_backends"),
    ("vllm.platforms.cuda", "_get_attn_backend_class"),
)
ENGINE_SYMBOLS = (
    ("vllm.config", "VllmConfig"),
    ("vllm.config", "CacheConfig"),
    ("vllm.config", "set_current_vllm_config"),
    ("vllm.v1.attention.selector", "get_attn_backend"),
    ("vllm.v1.attention.selector", "AttentionSelectorConfig"),
    ("vllm.v1.attention.selector", "_cached_get_attn_backend"),
    ("vllm.v1.attention.backend", "AttentionBackend.get_name"),
    ("vllm.v1.attention.backend", "AttentionBackend.supported_kv_cache_dtypes"),
    ("vllm.v1.attention.backend", "AttentionBackend.supports_kv_cache_dtype"),
    ("vllm.v1.attention.backend", "AttentionBackend.supports_compute_capability"),
    ("vllm.model_executor.layers.attention.mla_attention", "_canonicalize_sparse_mla_kv_cache_dtype"),
    ("vllm.model_executor.layers.quantization", "get_quantization_config"),
    ("vllm.model_executor.layers.quantization.base_config", "QuantizationConfig.get_min_capability"),
    ("vllm.model_executor.layers.quantization.base_config", "QuantizationConfig.get_supported_act_dtypes"),
    ("vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors",
     "CompressedTensorsConfig.from_config"),
    ("vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors",
     "CompressedTensorsConfig._get_scheme_from_parts"),
    ("vllm.model_executor.layers.fused_moe.expert_map_manager", "determine_expert_map"),
    # Whether vLLM uses FlashInfer at all: without flashinfer-cubin (or VLLM_HAS_FLASHINFER_CUBIN) it needs nvcc and
    # ninja on PATH, else every FlashInfer backend is refused.  Asked in the environment the script was given.
    ("vllm.utils.flashinfer", "has_flashinfer"),
    ("vllm.utils.flashinfer", "has_flashinfer_cubin"),
)
SYMBOLS = PLATFORM_SYMBOLS + ENGINE_SYMBOLS
# The mark on a backend whose module cannot even be imported without a GPU (CUTLASS_MLA allocates a
# CUDA workspace at import): vLLM then skips it as unavailable, and the check says its answer is uncertain.
UNIMPORTABLE = "not importable without a GPU"


class MissingSymbol(Exception):
    """A name in SYMBOLS that this vLLM does not have."""


def emit(record):
    sys.stdout.write(LINE_PREFIX + json.dumps(record, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------ libcuda.so.1 without a driver

def _loads(name):
    try:
        ctypes.CDLL(name)
        return True
    except OSError:
        return False


def stub_candidates(python_prefix):
    """Driver stubs to try, best first: the one named in the environment, the CUDA toolkit's, then
    PyNvVideoCodec's bundled copy in the venv (auditwheel renames it libcuda-<hash>.so)."""
    out = [os.environ.get(STUB_PATH_ENV, "")]
    out += ["/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"]
    for site in glob.glob(os.path.join(python_prefix, "lib", "python3*", "site-packages")):
        out += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "stubs", "libcuda.so")))
        out += sorted(glob.glob(os.path.join(site, "pynvvideocodec*", "libcuda-*.so")))
    return [p for p in out if p and os.path.isfile(p)]


def is_driver_stub(path):
    """cuInit answers CUDA_ERROR_STUB_LIBRARY: a stub, which cannot touch a GPU."""
    try:
        return ctypes.CDLL(path).cuInit(0) == CUDA_ERROR_STUB_LIBRARY
    except (OSError, AttributeError):
        return False


def reexec_with_stub(request_text):
    """Re-executes this script with a driver stub as libcuda.so.1 (the dynamic linker reads
    LD_LIBRARY_PATH only at start).  Returns an error message when there is no stub to use."""
    stub = next((p for p in stub_candidates(sys.prefix) if is_driver_stub(p)), None)
    if stub is None:
        return ("libcuda.so.1 is not installed (no NVIDIA driver) and no CUDA driver stub was found (set %s to "
                "a CUDA toolkit's stubs/libcuda.so)" % STUB_PATH_ENV)
    workdir = tempfile.mkdtemp(prefix="engine-check-")
    os.symlink(stub, os.path.join(workdir, "libcuda.so.1"))
    with open(os.path.join(workdir, "request.json"), "w", encoding="utf-8") as f:
        f.write(request_text)
    env = dict(os.environ)
    env[STUB_DIR_ENV] = workdir
    env["MOEOPS_ENGINE_CHECK_STUB"] = stub
    env["LD_LIBRARY_PATH"] = workdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), "--request",
                               os.path.join(workdir, "request.json")], env)
    return "exec failed"  # not reached


# ------------------------------------------------------------------ vLLM's names

def resolve_symbols(symbols):
    """{'module:attr': object} for every name in `symbols`; raises MissingSymbol naming each one missing."""
    found, missing = {}, []
    for module_name, path in symbols:
        key = "%s:%s" % (module_name, path)
        try:
            obj = importlib.import_module(module_name)
            for part in path.split("."):
                obj = getattr(obj, part)
            found[key] = obj
        except Exception as exc:  # ImportError, AttributeError, or the module failing to import at all
            missing.append("%s (%s: %s)" % (key, type(exc).__name__, exc))
    if missing:
        raise MissingSymbol("; ".join(missing))
    return found


class Engine(object):
    """vLLM's selection with the CUDA platform pinned to one compute capability at a time."""

    def __init__(self, platform_symbols):
        self.s = dict(platform_symbols)
        self.platforms = importlib.import_module("vllm.platforms")
        self.cuda = importlib.import_module("vllm.platforms.cuda")
        base = self.s["vllm.platforms.cuda:CudaPlatform"]
        self.device_capability = self.s["vllm.platforms.interface:DeviceCapability"]

        class PinnedCudaPlatform(base):
            """vLLM's CUDA platform; only the capability is answered from here (there is no GPU to ask)."""
            pinned = None

            @classmethod
            def get_device_capability(cls, device_id=0):
                return cls.pinned

            @classmethod
            def get_device_name(cls, device_id=0):
                return "GPU of compute capability %s (engine check, no device)" % cls.pinned.as_version_str()

        self.platform_cls = PinnedCudaPlatform
        self.platform = PinnedCudaPlatform()
        self.rebound = self._install()
        self.unimportable = {}
        self._wrap_backend_import()
        self.s.update(resolve_symbols(ENGINE_SYMBOLS))

    def _install(self):
        """Makes the pinned platform vLLM's current_platform.  Modules that already hold the old object
        (`from vllm.platforms import current_platform` while the platform modules were imported) are
        pointed at the new one too; their names are returned for the report."""
        self.platforms._current_platform = self.platform
        self.platforms.current_platform = self.platform
        platform_base = self.s["vllm.platforms.interface:Platform"]
        rebound = []
        for name, module in list(sys.modules.items()):
            attrs = getattr(module, "__dict__", None) or {}
            current = attrs.get("current_platform")
            if isinstance(current, platform_base) and current is not self.platform and name != "vllm.platforms":
                module.current_platform = self.platform
                rebound.append(name)
        return sorted(rebound)

    def _wrap_backend_import(self):
        """CudaPlatform.get_valid_backends treats a backend whose module raises ImportError or OSError as
        unavailable, but a module that touches the device at import raises RuntimeError here, with no GPU,
        and would abort the whole selection.  Such a backend is turned into an ImportError marked
        UNIMPORTABLE, and remembered, so vLLM goes on with the others and the report can say which
        answers it leaves uncertain."""
        original = self.s["vllm.platforms.cuda:_get_attn_backend_class"]
        unimportable = self.unimportable

        def get_attn_backend_class(backend):
            try:
                return original(backend)
            except (ImportError, OSError):
                raise
            except Exception as exc:
                unimportable[backend.name] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200])
                raise ImportError("%s (%s)" % (UNIMPORTABLE, unimportable[backend.name]))

        self.cuda._get_attn_backend_class = get_attn_backend_class

    def pin(self, cc):
        major, _dot, minor = str(cc).partition(".")
        self.platform_cls.pinned = self.device_capability(major=int(major), minor=int(minor or 0))
        # get_attn_backend caches its answer per selector config, not per capability.
        self.s["vllm.v1.attention.selector:_cached_get_attn_backend"].cache_clear()
        return self.platform_cls.pinned

    def vllm_config(self, kv_cache_dtype):
        return self.s["vllm.config:VllmConfig"](cache_config=self.s["vllm.config:CacheConfig"](cache_dtype=kv_cache_dtype))

    # ---------------------------------------------------------- attention

    def select(self, head_size, dtype, kv_cache_dtype, use_mla, use_sparse, num_heads):
        """(backend class, None) or (None, vLLM's error) from get_attn_backend, as the model's layer calls it."""
        with self.s["vllm.config:set_current_vllm_config"](self.vllm_config(kv_cache_dtype)):
            try:
                if use_mla:
                    cls = self.s["vllm.v1.attention.selector:get_attn_backend"](
                        head_size, dtype, kv_cache_dtype, use_mla=True, use_sparse=use_sparse, num_heads=num_heads)
                else:
                    cls = self.s["vllm.v1.attention.selector:get_attn_backend"](
                        head_size, dtype, kv_cache_dtype, use_mla=False)
                return cls, None
            except (ValueError, AssertionError, RuntimeError) as exc:
                return None, "%s: %s" % (type(exc).__name__, exc)

    def candidate_reasons(self, head_size, dtype, kv_cache_dtype, use_mla, use_sparse, num_heads):
        """vLLM's candidates in priority order: {backend: [reasons]} for those it refuses, the names of those
        it accepts, and {backend: priority} for all of them."""
        selector_config = self.s["vllm.v1.attention.selector:AttentionSelectorConfig"](
            head_size=head_size, dtype=dtype, kv_cache_dtype=kv_cache_dtype, block_size=None,
            use_mla=use_mla, use_sparse=use_sparse)
        with self.s["vllm.config:set_current_vllm_config"](self.vllm_config(kv_cache_dtype)):
            valid, invalid = self.platform_cls.get_valid_backends(
                device_capability=self.platform_cls.pinned, attn_selector_config=selector_config,
                num_heads=num_heads if use_mla else None)
        priority = {backend.name: p for backend, (p, _reasons) in invalid.items()}
        priority.update((c.backend.name, c.priority) for c in valid)
        return ({backend.name: list(reasons) for backend, (_p, reasons) in invalid.items()},
                [c.backend.name for c in sorted(valid, key=lambda c: c.priority)], priority)

    def attention(self, spec, tp):
        kind = ATTENTION_TYPES[spec["attention_type"]]
        torch = importlib.import_module("torch")
        dtype = getattr(torch, spec.get("dtype") or "bfloat16")
        kv = spec.get("kv_cache_dtype") or "auto"
        heads = int(spec["num_attention_heads"]) // tp if spec.get("num_attention_heads") else None
        args = (int(spec["head_size"]), dtype, kv, kind["use_mla"], kind["use_sparse"], heads)
        cls, error = self.select(*args)
        refused, accepted, priority = self.candidate_reasons(*args)
        out = {"tensor_parallel_size": tp, "num_heads_per_rank": heads, "kv_cache_dtype": kv,
               "backend": None, "error": error, "refused": refused, "accepted": accepted}
        # A backend vLLM could not even import here, ranked above the answer, might have been chosen on a GPU.
        chosen = priority.get(cls.get_name()) if cls is not None else None
        out["uncertain_because"] = {name: self.unimportable.get(name, refused[name][0]) for name in refused
                                    if UNIMPORTABLE in " ".join(refused[name])
                                    and (chosen is None or priority[name] < chosen)}
        if cls is None:
            if kv != "auto":
                # Is the dtype what leaves no backend?  The same selection with the model's own dtype.
                auto_cls, _auto_error = self.select(int(spec["head_size"]), dtype, "auto", kind["use_mla"],
                                                    kind["use_sparse"], heads)
                out["backend_with_auto"] = auto_cls.get_name() if auto_cls is not None else None
                if auto_cls is not None:
                    out["backend_with_auto_kv_cache_dtypes"] = [str(d) for d in auto_cls.supported_kv_cache_dtypes]
            out["kv_ok"] = None if out.get("backend_with_auto") is None else False
            return out
        out["backend"] = cls.get_name()
        out["backend_class"] = "%s.%s" % (cls.__module__, cls.__qualname__)
        out["backend_kv_cache_dtypes"] = [str(d) for d in cls.supported_kv_cache_dtypes]
        out["supports_compute_capability"] = bool(cls.supports_compute_capability(self.platform_cls.pinned))
        out["kv_ok"] = bool(cls.supports_kv_cache_dtype(kv))
        out["kv_cache_dtype_resolved"] = kv
        if kind["use_mla"]:
            out["kv_cache_dtype_resolved"] = str(self.s[
                "vllm.model_executor.layers.attention.mla_attention:_canonicalize_sparse_mla_kv_cache_dtype"](cls, kv))
        return out

    # ---------------------------------------------------------- quantization

    def quantization(self, spec):
        method = spec.get("quantization_method")
        out = {"method": method, "ok": None, "reason": ""}
        if not method:
            out["reason"] = "the profile names no quantization_method"
            return out
        try:
            config_cls = self.s["vllm.model_executor.layers.quantization:get_quantization_config"](method)
        except (KeyError, ValueError) as exc:
            out.update(ok=False, reason="vLLM has no quantization method %r (%s: %s)" % (method, type(exc).__name__, exc))
            return out
        capability = self.platform_cls.pinned.to_int()
        minimum = int(config_cls.get_min_capability())
        out.update(config_class="%s.%s" % (config_cls.__module__, config_cls.__qualname__),
                   min_capability=minimum, capability=capability)
        # vllm/config/vllm.py (_get_quantization_config) refuses the model with exactly this comparison.
        if capability < minimum:
            out.update(ok=False, reason="The quantization method %s is not supported for the current GPU. Minimum "
                                        "capability: %d. Current capability: %d." % (method, minimum, capability))
            return out
        out["ok"] = True
        qc = spec.get("quantization_config")
        if method == "compressed-tensors" and isinstance(qc, dict):
            out["scheme"] = self.compressed_tensors_scheme(qc)
            if out["scheme"].get("ok") is False:
                out.update(ok=False, reason=out["scheme"]["reason"])
        return out

    def compressed_tensors_scheme(self, qc):
        """The linear scheme vLLM picks for each target of the model's compressed-tensors config, and its
        minimum capability (_get_scheme_from_parts checks the pinned capability itself and raises)."""
        ct = self.s["vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors:"
                    "CompressedTensorsConfig.from_config"](qc)
        schemes = {}
        try:
            for target, parts in sorted(ct.target_scheme_map.items()):
                scheme = ct._get_scheme_from_parts(parts.get("weights"), parts.get("input_activations"),
                                                   format=parts.get("format"))
                schemes[target] = {"scheme": type(scheme).__name__, "min_capability": int(scheme.get_min_capability())}
        except (ValueError, NotImplementedError, RuntimeError) as exc:
            return {"ok": False, "reason": "%s: %s" % (type(exc).__name__, exc), "schemes": schemes}
        return {"ok": True, "reason": "", "schemes": schemes}

    # ---------------------------------------------------------- tensor parallel

    def tensor_parallel(self, spec, tp):
        problems = []
        heads, kv_heads = spec.get("num_attention_heads"), spec.get("num_key_value_heads")
        # ModelConfig.verify_with_parallel_config raises this for the attention heads.
        if heads and heads % tp:
            problems.append({"key": "num_attention_heads", "message": "Total number of attention heads (%d) must "
                             "be divisible by tensor parallel size (%d)." % (heads, tp)})
        # GQA key/value heads are split when there are at least as many as ranks, else replicated
        # (QKVParallelLinear); MLA keeps one latent KV head per rank, so its count does not constrain tp.
        if spec["attention_type"] == "gqa" and kv_heads and (kv_heads % tp if kv_heads >= tp else tp % kv_heads):
            problems.append({"key": "num_key_value_heads", "message": "%d key/value heads cannot be split or "
                             "replicated evenly over %d ranks" % (kv_heads, tp)})
        out = {"tensor_parallel_size": tp, "ok": not problems, "problems": problems}
        experts = spec.get("num_routed_experts")
        if experts:
            determine = self.s["vllm.model_executor.layers.fused_moe.expert_map_manager:determine_expert_map"]
            per_rank = [int(determine(tp, rank, int(experts))[0]) for rank in range(tp)]
            # With tensor parallel alone every rank holds every expert (sharded); with --enable-expert-parallel
            # the experts are placed per rank as determine_expert_map says.
            out["experts_per_rank_with_expert_parallel"] = sorted(set(per_rank))
            out["experts_even_with_expert_parallel"] = len(set(per_rank)) == 1
        return out


def flashinfer_state(engine):
    """vLLM's own answers on FlashInfer in this environment (vllm/utils/flashinfer.py), and what they depend on."""
    nvcc = getattr(importlib.import_module("vllm.utils.flashinfer"), "_flashinfer_nvcc_path", None)
    return {"installed": importlib.util.find_spec("flashinfer") is not None,
            "has_flashinfer": bool(engine.s["vllm.utils.flashinfer:has_flashinfer"]()),
            "has_flashinfer_cubin": bool(engine.s["vllm.utils.flashinfer:has_flashinfer_cubin"]()),
            "nvcc": nvcc() if callable(nvcc) else None, "ninja": shutil.which("ninja"),
            "path": os.environ.get("PATH", ""), "VLLM_HAS_FLASHINFER_CUBIN": os.environ.get("VLLM_HAS_FLASHINFER_CUBIN")}


def check_profile(engine, spec):
    results = []
    for check in spec.get("checks") or []:
        cc = str(check["compute_capability"])
        row = {"profile": spec.get("profile"), "file": spec.get("file"), "compute_capability": cc,
               "attention_type": spec.get("attention_type"), "head_size": spec.get("head_size"),
               "kv_cache_dtype": check.get("kv_cache_dtype") or "auto",
               "kv_cache_dtype_key": check.get("kv_cache_dtype_key") or "kv_cache_dtype",
               "checked": True, "not_checked": ""}
        if spec.get("attention_type") not in ATTENTION_TYPES:
            row.update(checked=False, not_checked="attention type %r is not one the engine check knows (%s)"
                       % (spec.get("attention_type"), ", ".join(sorted(ATTENTION_TYPES))))
            results.append(row)
            continue
        if not spec.get("head_size"):
            row.update(checked=False, not_checked="the attention head size is unknown (no config.json dimensions)")
            results.append(row)
            continue
        engine.pin(cc)
        attention_spec = dict(spec, kv_cache_dtype=row["kv_cache_dtype"])
        sizes = [int(t) for t in check.get("tensor_parallel_sizes") or [1]]
        row["attention"] = [engine.attention(attention_spec, tp) for tp in sizes]
        row["quantization"] = engine.quantization(spec)
        row["tensor_parallel"] = [engine.tensor_parallel(spec, tp) for tp in sizes]
        results.append(row)
    return results


def run(request):
    version = None
    try:
        platform_symbols = resolve_symbols(PLATFORM_SYMBOLS)
        version = platform_symbols["vllm:__version__"]
        engine = Engine(platform_symbols)
    except MissingSymbol as exc:
        if version is None:
            try:
                version = importlib.import_module("vllm").__version__
            except Exception:  # the version is only for the message
                pass
        emit({"schema_version": SCHEMA_VERSION, "vllm": version, "missing": str(exc).split("; "),
              "error": "vLLM %s lacks what the engine check uses: %s" % (version, exc)})
        return 3
    results = []
    for spec in request.get("profiles") or []:
        results += check_profile(engine, spec)
    emit({"schema_version": SCHEMA_VERSION, "vllm": version, "flashinfer": flashinfer_state(engine), "symbols": ["%s:%s" % s for s in SYMBOLS],
          "platform": "%s (compute capability pinned per check)" % engine.platform_cls.__mro__[1].__name__,
          "libcuda_stub": os.environ.get("MOEOPS_ENGINE_CHECK_STUB", ""), "rebound_modules": engine.rebound,
          "unimportable_backends": engine.unimportable, "results": results})
    return 0


def main(argv):
    if len(argv) > 2 and argv[1] == "--request":
        with open(argv[2], encoding="utf-8") as f:
            text = f.read()
    else:
        text = sys.stdin.read()
    stub_dir = os.environ.get(STUB_DIR_ENV)
    try:
        request = json.loads(text)
        if not _loads("libcuda.so.1"):
            if stub_dir:
                emit({"schema_version": SCHEMA_VERSION, "error": "the CUDA driver stub in %s does not load" % stub_dir})
                return 2
            why = reexec_with_stub(text)
            emit({"schema_version": SCHEMA_VERSION, "error": why})
            return 2
        return run(request)
    except Exception as exc:
        emit({"schema_version": SCHEMA_VERSION, "error": "%s: %s" % (type(exc).__name__, exc),
              "traceback": traceback.format_exc(limit=8)})
        return 1
    finally:
        if stub_dir:
            shutil.rmtree(stub_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
