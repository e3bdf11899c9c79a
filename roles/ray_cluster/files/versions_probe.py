# The installed vLLM and Ray versions and what vLLM declares it requires, as JSON, from the venv's
# package metadata (run by the venv's own interpreter).
import importlib.metadata as m
import json


def v(n):
    try:
        return m.version(n)
    except m.PackageNotFoundError:
        return None


print(json.dumps({"vllm": v("vllm"), "ray": v("ray"),
                  "requires": (m.requires("vllm") or []) if v("vllm") else []}))
