/*
 * nvshmem_decls.h: declarations only, for compile-checking the library's .cu
 * files on a machine without NVSHMEM (cuda/localcheck/check.sh). The shapes
 * follow NVSHMEM's documented host API (3.x); nothing here is linked or run.
 * The real build (cuda/build.sh) uses NVSHMEM's own headers.
 */
#ifndef SD_LOCALCHECK_NVSHMEM_DECLS_H
#define SD_LOCALCHECK_NVSHMEM_DECLS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

/* Unique id: 128 opaque bytes with a version in front. */
typedef struct {
    int version;
    char internal[124];
} nvshmemx_uniqueid_t;
#define NVSHMEMX_UNIQUEID_INITIALIZER {(1 << 16) + (int)sizeof(nvshmemx_uniqueid_t), {0}}

typedef struct {
    int version;
    void *mpi_comm;
    char rest[240];
} nvshmemx_init_attr_t;
#define NVSHMEMX_INIT_ATTR_INITIALIZER {0, 0, {0}}

enum { NVSHMEMX_INIT_WITH_UNIQUEID = 1 << 3 };

typedef int32_t nvshmem_team_t;
#define NVSHMEM_TEAM_WORLD ((nvshmem_team_t)0)

enum { NVSHMEM_SIGNAL_SET = 0, NVSHMEM_SIGNAL_ADD = 5 };

#ifdef __cplusplus
extern "C" {
#endif

int nvshmemx_get_uniqueid(nvshmemx_uniqueid_t *uniqueid);
int nvshmemx_set_attr_uniqueid_args(const int myrank, const int nranks,
                                    const nvshmemx_uniqueid_t *uniqueid,
                                    nvshmemx_init_attr_t *attr);
/* Inline in the real header (calls nvshmemi_init_thread); a prototype here. */
int nvshmemx_init_attr(unsigned int flags, nvshmemx_init_attr_t *attr);
void nvshmem_init(void);
void nvshmem_finalize(void);
int nvshmem_my_pe(void);
int nvshmem_n_pes(void);
void nvshmemx_vendor_get_version_info(int *major, int *minor, int *patch);

void *nvshmem_malloc(size_t size);
void nvshmem_free(void *ptr);
void *nvshmem_ptr(const void *ptr, int pe);

void nvshmem_barrier_all(void);
void nvshmemx_barrier_all_on_stream(cudaStream_t stream);
void nvshmem_getmem(void *dest, const void *source, size_t bytes, int pe);
void nvshmemx_putmem_on_stream(void *dest, const void *source, size_t bytes, int pe,
                               cudaStream_t stream);
void nvshmemx_getmem_on_stream(void *dest, const void *source, size_t bytes, int pe,
                               cudaStream_t stream);
void nvshmemx_putmem_signal_on_stream(void *dest, const void *source, size_t bytes,
                                      uint64_t *sig_addr, uint64_t signal, int sig_op, int pe,
                                      cudaStream_t stream);
void nvshmemx_quiet_on_stream(cudaStream_t stream);
void nvshmemx_signal_op_on_stream(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe,
                                  cudaStream_t stream);

int nvshmemx_float_sum_reduce_on_stream(nvshmem_team_t team, float *dest, const float *source,
                                        size_t nreduce, cudaStream_t stream);
int nvshmemx_float_max_reduce_on_stream(nvshmem_team_t team, float *dest, const float *source,
                                        size_t nreduce, cudaStream_t stream);
int nvshmemx_float_min_reduce_on_stream(nvshmem_team_t team, float *dest, const float *source,
                                        size_t nreduce, cudaStream_t stream);
int nvshmemx_broadcastmem_on_stream(nvshmem_team_t team, void *dest, const void *source,
                                    size_t nelems, int pe_root, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SD_LOCALCHECK_NVSHMEM_DECLS_H */
