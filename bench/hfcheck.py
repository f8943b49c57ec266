"""What the PyTorch checks of symddp's Hugging Face exports share
(hf_gpt2_check.py, hf_llama_check.py): a safetensors reader, and the
command line that runs an architecture's forward over an exported
directory and compares its logits with symddp's. Nothing but PyTorch
(Debian's python3-torch): no transformers, no safetensors package.

A check is run as

    CHECK.py --hf DIR --tokens 1,2,3 --logits ours.f32 [--rtol 1e-4]

It parses DIR/model.safetensors (an 8-byte little-endian header length, a
JSON header, raw little-endian tensors: F32, BF16 or F16) into float64,
reads DIR/config.json, and runs the forward. --logits is symddp's logits
of the same tokens: float32 little-endian, one row of vocab_size per
token. It prints one line of JSON: the largest absolute difference, the
largest |logit|, their ratio, the tolerance, the arg max of the last
position, and "ok". Exit 0 when the ratio is within --rtol, 1 otherwise,
2 for bad input.
"""

import argparse
import json
import os
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path, skip=lambda name: False):
    """Tensors of a safetensors file by name, as float64; a tensor of
    another dtype is an error unless skip(name) (a buffer, not a weight)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        if entry["dtype"] not in DTYPES:
            if skip(name):
                continue
            raise SystemExit(f"{path}: tensor {name} is {entry['dtype']}, want F32, BF16 or F16")
        buf = bytearray(raw[base + begin : base + end])
        t = torch.frombuffer(buf, dtype=DTYPES[entry["dtype"]]) if buf else torch.empty(0, dtype=DTYPES[entry["dtype"]])
        out[name] = t.reshape(entry["shape"]).to(torch.float64)
    return out


def main(doc, logits_of, skip=lambda name: False):
    """The check's command line: logits_of(weights, config, tokens) is the
    architecture's forward, (T, vocab_size) in float64; skip names the
    file's buffers that read_safetensors may pass over."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--hf", required=True, help="directory with config.json and model.safetensors")
    ap.add_argument("--tokens", required=True, help="token ids, comma-separated")
    ap.add_argument("--logits", help="symddp's logits: float32 little-endian, tokens x vocab_size")
    ap.add_argument("--rtol", type=float, default=1e-4, help="largest |difference| / largest |logit| accepted")
    a = ap.parse_args()

    with open(os.path.join(a.hf, "config.json")) as f:
        cfg = json.load(f)
    w = read_safetensors(os.path.join(a.hf, "model.safetensors"), skip)
    tokens = [int(t) for t in a.tokens.split(",")]
    with torch.no_grad():
        theirs = logits_of(w, cfg, tokens)
    report = {"tokens": len(tokens), "vocab": theirs.shape[1], "argmax_last": int(theirs[-1].argmax())}
    ok = True
    if a.logits:
        with open(a.logits, "rb") as f:
            buf = bytearray(f.read())
        if len(buf) != 4 * theirs.numel():
            print(f"{a.logits}: {len(buf)} bytes, want {4 * theirs.numel()} ({len(tokens)} x {theirs.shape[1]} float32)", file=sys.stderr)
            sys.exit(2)
        ours = torch.frombuffer(buf, dtype=torch.float32).reshape(theirs.shape).to(torch.float64)
        diff = (ours - theirs).abs().max().item()
        scale = ours.abs().max().item()
        rel = diff / scale
        ok = rel <= a.rtol
        report.update(max_abs_diff=diff, max_abs_logit=scale, rel=rel, rtol=a.rtol, ok=ok)
    print(json.dumps(report))
    sys.exit(0 if ok else 1)
