#!/usr/bin/python3
"""Check a Hugging Face GPT-2 directory written by symddp's export command
against symddp's own logits, with nothing but PyTorch (Debian's
python3-torch; no transformers, no safetensors package).

    hf_gpt2_check.py --hf DIR --tokens 1,2,3 --logits ours.f32 [--rtol 1e-4]

It parses DIR/model.safetensors itself (an 8-byte little-endian header
length, a JSON header, raw little-endian tensors: F32, BF16 or F16), reads
the sizes from DIR/config.json, and runs GPT-2's forward written out here
with the Conv1D layout, (in, out) matrices applied as x @ W, in float64.
--logits is symddp's logits of the same tokens: float32 little-endian,
one row of vocab_size per token. It prints one line of JSON: the largest
absolute difference, the largest |logit|, their ratio, the tolerance, the
arg max of the last position, and "ok". Exit 0 when the ratio is within
--rtol, 1 otherwise, 2 for bad input.
"""

import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path):
    """Tensors of a safetensors file by name, as float64."""
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
            if name.endswith("attn.bias") or name.endswith("attn.masked_bias"):
                continue  # mask buffers of older files
            raise SystemExit(f"{path}: tensor {name} is {entry['dtype']}, want F32, BF16 or F16")
        buf = bytearray(raw[base + begin : base + end])
        t = torch.frombuffer(buf, dtype=DTYPES[entry["dtype"]]) if buf else torch.empty(0, dtype=DTYPES[entry["dtype"]])
        out[name] = t.reshape(entry["shape"]).to(torch.float64)
    return out


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gpt2_logits(w, cfg, tokens):
    """GPT-2's forward over one sequence: logits (T, vocab_size)."""
    C, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    T, hs = len(tokens), C // H

    def ln(x, p):
        return F.layer_norm(x, (C,), w[p + ".weight"], w[p + ".bias"], eps)

    def conv1d(x, p):  # Conv1D: weight (in, out)
        return x @ w[p + ".weight"] + w[p + ".bias"]

    x = w["wte.weight"][torch.tensor(tokens)] + w["wpe.weight"][:T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        p = f"h.{l}."
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=1)
        q, k, v = (a.reshape(T, H, hs).transpose(0, 1) for a in (q, k, v))  # (H, T, hs)
        att = (q @ k.transpose(1, 2)) / math.sqrt(hs)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + conv1d(y, p + "attn.c_proj")
        x = x + conv1d(gelu_tanh(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return ln(x, "ln_f") @ w["wte.weight"].T  # the head is tied to wte


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hf", required=True, help="directory with config.json and model.safetensors")
    ap.add_argument("--tokens", required=True, help="token ids, comma-separated")
    ap.add_argument("--logits", help="symddp's logits: float32 little-endian, tokens x vocab_size")
    ap.add_argument("--rtol", type=float, default=1e-4, help="largest |difference| / largest |logit| accepted")
    a = ap.parse_args()

    with open(os.path.join(a.hf, "config.json")) as f:
        cfg = json.load(f)
    w = {k[len("transformer.") :] if k.startswith("transformer.") else k: v
         for k, v in read_safetensors(os.path.join(a.hf, "model.safetensors")).items()}
    tokens = [int(t) for t in a.tokens.split(",")]
    with torch.no_grad():
        theirs = gpt2_logits(w, cfg, tokens)
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


if __name__ == "__main__":
    main()
