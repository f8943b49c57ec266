# kernprof-groups.awk: a table of cuda/kernprof (scripts/gpu-kernprof.sh)
# summed by operation per training step, as docs/LLAMA.md's and GPU.md's
# profiles group it:
#
#   awk -f scripts/kernprof-groups.awk TABLE...
#
# Steps are the launches of the optimizer's update kernel (one a step), so
# the table must come from a run that trains. A kernel goes to the first
# group whose pattern its name matches, else to "other"; each table is
# summed on its own.
BEGIN {
    n = split("GEMMs|nvjet|gemm|splitKreduce|cutlass;" \
              "attention|sdpa|fmha|matmul_dq|dot_do_o|attention|att_;" \
              "RMSNorm|rms_norm;layer norm|layernorm|layer_norm;SwiGLU|swiglu;GELU|gelu;rotation|rotate;" \
              "classifier and loss|clsb|xent;embedding|embb|RadixSort|embed;" \
              "optimizer|update_kernel|grad_check|cast_bf16|adamw;" \
              "collectives|allreduce|reduce_scatter|all_gather|barrier", g, ";")
    for (i = 1; i <= n; i++) {
        k = index(g[i], "|")
        name[i] = substr(g[i], 1, k - 1)
        pat[i] = substr(g[i], k + 1)
    }
}
FNR == 1 && NR > 1 { report(prev) }
FNR == 1 { reset(); prev = FILENAME }
/^#/ || NF < 4 { next }
{
    total = $1; launches = $2
    $1 = $2 = $3 = ""
    if ($0 ~ /update_kernel/) steps += launches
    hit = 0
    for (i = 1; i <= n; i++)
        if ($0 ~ pat[i]) { sum[i] += total; hit = 1; break }
    if (!hit) other += total
    all += total
}
END { if (NR > 0) report(prev) }

function reset(    i) {
    for (i = 1; i <= n; i++) sum[i] = 0
    steps = other = all = 0
}

function report(file,    i) {
    if (steps == 0) {
        printf "%s: no update kernel in the table, so no steps to divide by\n", file
        return
    }
    printf "%s: %d steps (the update kernel's launches), microseconds a step:\n", file, steps
    for (i = 1; i <= n; i++)
        if (sum[i] > 0) printf "  %-22s %10.1f\n", name[i], sum[i] / steps
    if (other > 0) printf "  %-22s %10.1f\n", "other", other / steps
    printf "  %-22s %10.1f\n", "all kernels", all / steps
}
