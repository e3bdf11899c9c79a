# -*- coding: utf-8 -*-
"""TEST DOUBLE of FlashInfer's kernels wheel, for 52-external-playbook.sh.

    cubin_test_double.py VERSION DIR

Writes DIR/flashinfer-cubin/flashinfer_cubin-VERSION-py3-none-any.whl: a wheel named and versioned like FlashInfer's
precompiled kernels (https://flashinfer.ai/whl, which this machine cannot reach) that holds no kernel, only the
package `flashinfer_cubin` that vLLM looks for. Served as a simple index (python3 -m http.server over DIR), it lets the
vllm role's real install and version check run. Nothing can use it as kernels: the simulated node has no GPU.
"""
import base64
import hashlib
import os
import sys
import zipfile


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main(version: str, root: str) -> str:
    info = "flashinfer_cubin-%s.dist-info" % version
    files = {
        "flashinfer_cubin/__init__.py": b'"""TEST DOUBLE of flashinfer-cubin (moeops.inference tests): no kernels."""\n',
        info + "/METADATA": ("Metadata-Version: 2.1\nName: flashinfer-cubin\nVersion: %s\n"
                             "Summary: TEST DOUBLE of FlashInfer's precompiled kernels (no kernels)\n" % version).encode(),
        info + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: moeops-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(record_line(n, d) + "\n" for n, d in files.items()) + info + "/RECORD,,\n"
    files[info + "/RECORD"] = record.encode()
    os.makedirs(os.path.join(root, "flashinfer-cubin"), exist_ok=True)
    path = os.path.join(root, "flashinfer-cubin", "flashinfer_cubin-%s-py3-none-any.whl" % version)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return path


if __name__ == "__main__":
    print(main(sys.argv[1], sys.argv[2]))
