#!/usr/bin/python3
"""Check a Hugging Face LlamaForCausalLM directory written by symddp's
export command against symddp's own logits, with nothing but PyTorch
(Debian's python3-torch; no transformers, no safetensors package).

    hf_llama_check.py --hf DIR --tokens 1,2,3 --logits ours.f32 [--rtol 1e-4]

It reads DIR's files with hfcheck.py (the safetensors reader and the
command line it shares with hf_gpt2_check.py: the JSON line it prints and
its exit codes are described there) and runs Llama's forward written out
here in float64 from config.json's fields: RMSNorm with rms_norm_eps,
rotary embedding with rope_theta in rotate_half's pairing (channel i with
i + head_dim/2), grouped-query attention with each key/value head repeated
for its num_attention_heads/num_key_value_heads query heads (repeat_kv's
order), causal softmax, the SwiGLU MLP (down(silu(gate(x)) * up(x))), and
the head, tied to the embedding when the file has no lm_head.weight. A
config.json with rope_scaling (a scaled RoPE) is refused.
"""

import math
import sys

import torch
import torch.nn.functional as F

import hfcheck


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_theta(cfg):
    """rope_theta, or transformers 5's rope_parameters' (default type only)."""
    if cfg.get("rope_scaling") is not None:
        sys.exit(f"config.json has rope_scaling {cfg['rope_scaling']}: this check computes unscaled RoPE only")
    params = cfg.get("rope_parameters") or {}
    if params.get("rope_type", "default") != "default":
        sys.exit(f"config.json has rope_parameters {params}: this check computes unscaled RoPE only")
    return float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))


def llama_logits(w, cfg, tokens):
    """Llama's forward over one sequence: logits (T, vocab_size)."""
    C, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    KV = cfg.get("num_key_value_heads") or H
    hs = cfg.get("head_dim") or C // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    T = len(tokens)

    # rotary angles t·θ^(−2i/hs) for i < hs/2, each used by channels i and i + hs/2
    inv_freq = 1.0 / rope_theta(cfg) ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    angles = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    cos, sin = torch.cat((angles, angles), dim=-1).cos(), torch.cat((angles, angles), dim=-1).sin()  # (T, hs)

    def rope(x):  # (heads, T, hs)
        return x * cos + rotate_half(x) * sin

    def linear(x, name):  # torch.nn.Linear: weight (out, in)
        return x @ w[name].T

    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = linear(h, p + "self_attn.q_proj.weight").reshape(T, H, hs).transpose(0, 1)  # (H, T, hs)
        k = linear(h, p + "self_attn.k_proj.weight").reshape(T, KV, hs).transpose(0, 1)  # (KV, T, hs)
        v = linear(h, p + "self_attn.v_proj.weight").reshape(T, KV, hs).transpose(0, 1)
        q, k = rope(q), rope(k)
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)  # repeat_kv: (H, T, hs)
        att = (q @ k.transpose(1, 2)) / math.sqrt(hs)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(0, 1).reshape(T, H * hs)
        x = x + linear(y, p + "self_attn.o_proj.weight")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = linear(h, p + "mlp.gate_proj.weight"), linear(h, p + "mlp.up_proj.weight")
        x = x + linear(F.silu(gate) * up, p + "mlp.down_proj.weight")
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])  # tied when the file has no head
    return rms_norm(x, w["model.norm.weight"], eps) @ head.T


if __name__ == "__main__":
    hfcheck.main(__doc__, llama_logits)
