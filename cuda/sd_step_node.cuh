/*
 * sd_step_node.cuh: kernel nodes of a captured training step that read the
 * step's values (sdc_step).
 *
 * Eager launches pass the values as kernel arguments; a captured kernel was
 * recorded with a pointer to the context's step block instead. Rather than
 * run a kernel that writes the block before every graph launch (a node's
 * worth of GPU time on the critical path of a step of a small model),
 * sdc_graph_launch rewrites those nodes' arguments for the launch
 * (cudaGraphExecKernelNodeSetParams): values by argument, no block pointer.
 * Each kernel that reads the block has a matcher beside it
 * (sdc_xent_step_node, sdc_update_step_node) that recognises its node
 * when it was recorded reading the block (use_block; a node captured with
 * values by argument keeps them),
 * copies the node's arguments into store, points argv at the copies and
 * sets set_values, which rewrites the copies for a launch.
 */
#pragma once

#include <cuda_runtime.h>
#include <string.h>

#include "symddp_compute.h"

#define SDC_STEP_NODE_ARGS 16
#define SDC_STEP_NODE_STORE 256

struct sdc_step_node {
    cudaGraphNode_t node;
    cudaKernelNodeParams p; /* the node's launch, kernelParams = argv */
    void *argv[SDC_STEP_NODE_ARGS];
    alignas(16) unsigned char store[SDC_STEP_NODE_STORE];
    void (*set_values)(sdc_step_node *n, const sdc_step *v);
};

/* Match p (a kernel node's parameters) and fill out; false when p is
 * another kernel. */
bool sdc_xent_step_node(const cudaKernelNodeParams *p, sdc_step_node *out);
bool sdc_update_step_node(const cudaKernelNodeParams *p, sdc_step_node *out);

/* Fills out from p, a node of a kernel whose count arguments have the
 * given sizes: copies each argument into store (at its natural alignment,
 * 16 bytes at most), points argv at the copies and kernelParams at argv.
 * set rewrites the copies for a launch, through argv. False when the
 * arguments do not fit. */
static inline bool sdc_step_node_fill(const cudaKernelNodeParams *p, sdc_step_node *out, const size_t *sizes,
                                      int count, void (*set)(sdc_step_node *, const sdc_step *)) {
    if (!p->kernelParams || count > SDC_STEP_NODE_ARGS) return false;
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        const size_t a = sizes[i] >= 16 ? 16 : sizes[i] >= 8 ? 8 : sizes[i] >= 4 ? 4 : 1;
        off = (off + a - 1) / a * a;
        if (off + sizes[i] > SDC_STEP_NODE_STORE) return false;
        memcpy(out->store + off, p->kernelParams[i], sizes[i]);
        out->argv[i] = out->store + off;
        off += sizes[i];
    }
    out->p = *p;
    out->p.kernelParams = out->argv;
    out->p.extra = NULL;
    out->set_values = set;
    return true;
}
