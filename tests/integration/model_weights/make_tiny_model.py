"""Writes a tiny sharded safetensors model directory for the model_weights tests.

The files are real safetensors (8-byte little-endian header length, JSON header with dtype, shape and
data_offsets, then the tensor bytes), written by hand so no torch or numpy is needed; the index maps
each tensor to its shard like a Hugging Face checkpoint's model.safetensors.index.json.
Usage: make_tiny_model.py DIR [--shards N] [--floats-per-tensor K]
"""
import argparse
import json
import os
import struct


def write_safetensors(path, tensors):
    """tensors: {name: list of floats} -> F32 1-D tensors."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, values in tensors.items():
        data = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": [len(values)], "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes with spaces
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--floats-per-tensor", type=int, default=4096)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    weight_map, total = {}, 0
    for i in range(1, a.shards + 1):
        shard = "model-%05d-of-%05d.safetensors" % (i, a.shards)
        tensors = {}
        for e in range(2):
            values = [float(i * 1000 + e + k / 7) for k in range(a.floats_per_tensor)]
            tensors["model.layers.%d.mlp.experts.%d.weight" % (i, e)] = values
        write_safetensors(os.path.join(a.dir, shard), tensors)
        for name in tensors:
            weight_map[name] = shard
        total += 4 * a.floats_per_tensor * 2
    with open(os.path.join(a.dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(a.dir, "config.json"), "w") as f:
        json.dump({"architectures": ["TinyMoeForCausalLM"], "model_type": "tiny_moe", "hidden_size": 64,
                   "num_attention_heads": 8, "num_hidden_layers": a.shards, "n_routed_experts": 2,
                   "torch_dtype": "float32"}, f, indent=2)
    with open(os.path.join(a.dir, "tokenizer_config.json"), "w") as f:
        json.dump({"model_max_length": 4096}, f)


if __name__ == "__main__":
    main()
