#!/usr/bin/python3
"""Check a Hugging Face GPT-2 directory written by symddp's export command
against symddp's own logits, with nothing but PyTorch (Debian's
python3-torch; no transformers, no safetensors package).

    hf_gpt2_check.py --hf DIR --tokens 1,2,3 --logits ours.f32 [--rtol 1e-4]

It reads DIR's files with hfcheck.py (the safetensors reader and the
command line it shares with hf_llama_check.py: the JSON line it prints and
its exit codes are described there) and runs GPT-2's forward written out
here with the Conv1D layout, (in, out) matrices applied as x @ W, in
float64. Names with and without the "transformer." prefix are read.
"""

import math

import torch
import torch.nn.functional as F

import hfcheck


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gpt2_logits(w, cfg, tokens):
    """GPT-2's forward over one sequence: logits (T, vocab_size)."""
    w = {k[len("transformer.") :] if k.startswith("transformer.") else k: v for k, v in w.items()}
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


def mask_buffer(name):
    """The causal-mask buffers older GPT-2 files hold (BOOL or F32)."""
    return name.endswith("attn.bias") or name.endswith("attn.masked_bias")


if __name__ == "__main__":
    hfcheck.main(__doc__, gpt2_logits, skip=mask_buffer)
