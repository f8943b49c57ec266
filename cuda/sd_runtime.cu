/*
 * sd_runtime.cu: the process's runtime: GPU selection, NVSHMEM start-up (by
 * unique id, MPI or PMIx), the library's symmetric sync area, and shutdown.
 *
 * Start-up, in order:
 *   1. environment NVSHMEM reads at init: NVSHMEM_DISABLE_NVLS=1 always (NVLink
 *      multicast stays off), NVSHMEM_REMOTE_TRANSPORT=none on one node unless
 *      set, NVSHMEM_SYMMETRIC_SIZE from the caller's heap size;
 *   2. cudaSetDevice(local_pe % device count), so PE i of a host uses GPU
 *      i mod GPUs (several PEs share a GPU when there are more PEs than GPUs);
 *   3. nvshmemx_init_attr with the unique id (or nvshmem_init under mpirun);
 *   4. one symmetric area: flag slots, call slots (desync detection), control
 *      words and a staging buffer; the collectives stream (sd_overlap.cu);
 *   5. agreement of all PEs (through the control words) on the ABI, the job
 *      size, the block count of collective kernels and whether every peer is
 *      reachable by pointer, so that every PE picks the same algorithms.
 *
 * Environment read here: SYMDDP_ONE_SHOT_MAX (bytes), SYMDDP_MAX_BLOCKS, and
 * SYMDDP_FORCE_NVSHMEM=1, a testing aid that makes every PE treat its peers
 * as unreachable by pointer, so that the NVSHMEM paths meant for other nodes
 * run on one host (it needs NVSHMEM's collectives: MPS or one GPU per PE).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_internal.h"
#include "symddp_compute.h" /* sdc_device_name */

/* Set when NVSHMEM bootstrapped through MPI: its plugin initialised MPI. */
static int sd_mpi_bootstrap;

sd_state g_sd;

/* Default largest one-shot allreduce. */
static const size_t sd_default_one_shot_max = (size_t)256 << 10;
/* Default deadline of in-kernel waits. */
static const uint64_t sd_default_timeout_ns = 300ull * 1000 * 1000 * 1000;

int sd_require_init(const char *what) {
    if (!g_sd.initialised)
        return SD_FAIL(SD_ERR_STATE, "%s: the runtime is not initialised (call sd_init first)",
                       what);
    if (g_sd.failed)
        return SD_FAIL(SD_ERR_STATE,
                       "%s: an earlier wait gave up, so the PEs are out of step; "
                       "finalize and restart the job",
                       what);
    return sd_use_device(g_sd.device); /* see sd_use_device */
}

sd_sync sd_sync_args(int op) {
    sd_sync s;
    s.peer_flags = g_sd.d_peer_flags;
    s.my_flags = g_sd.flags;
    s.epochs = g_sd.d_epochs;
    s.status = g_sd.d_status;
    s.host_failed = g_sd.h_failed_dev;
    s.me = g_sd.pe;
    s.npes = g_sd.npes;
    s.timeout_ns = g_sd.timeout_ns;
    s.op = op;
    s.check = g_sd.check;
    s.calls_off = (uint64_t)(g_sd.calls - g_sd.flags);
    for (int w = 0; w < SD_CALL_WORDS; w++) s.call[w] = g_sd.call[w];
    return s;
}

extern "C" int sd_set_call(uint64_t seq, uint64_t what, uint64_t buf, uint64_t off, uint64_t n) {
    const uint64_t w[SD_CALL_WORDS] = {seq, what, buf, off, n};
    g_sd.check = seq != 0;
    for (int i = 0; i < SD_CALL_WORDS; i++) g_sd.call[i] = g_sd.check ? w[i] : 0;
    return SD_OK;
}

extern "C" int sd_device_count(int32_t *count) {
    if (!count) return SD_FAIL(SD_ERR_ARG, "sd_device_count: count is NULL");
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return SD_FAIL(SD_ERR_NO_DEVICE, "no usable GPU: cudaGetDeviceCount: %s (%s)",
                       cudaGetErrorString(e), cudaGetErrorName(e));
    }
    if (n <= 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        return SD_FAIL(SD_ERR_NO_DEVICE, "no CUDA device visible (CUDA_VISIBLE_DEVICES=%s)",
                       vis ? vis : "unset");
    }
    *count = n;
    return SD_OK;
}

extern "C" int sd_uniqueid_size(size_t *size) {
    if (!size) return SD_FAIL(SD_ERR_ARG, "sd_uniqueid_size: size is NULL");
    *size = sizeof(nvshmemx_uniqueid_t);
    return SD_OK;
}

extern "C" int sd_get_uniqueid(void *out, size_t cap) {
    if (!out || cap < sizeof(nvshmemx_uniqueid_t))
        return SD_FAIL(SD_ERR_ARG, "sd_get_uniqueid: need %zu bytes, got %zu",
                       sizeof(nvshmemx_uniqueid_t), cap);
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    int rc = nvshmemx_get_uniqueid(&id);
    if (rc != 0) return SD_FAIL(SD_ERR, "nvshmemx_get_uniqueid failed with status %d", rc);
    memcpy(out, &id, sizeof id);
    return SD_OK;
}

/* Sets the NVSHMEM environment for nvshmem init; see the file comment. */
static void sd_set_env(const sd_init_args *a) {
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    if (a->single_node) setenv("NVSHMEM_REMOTE_TRANSPORT", "none", 0);
    if (a->heap_bytes > 0) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)(a->heap_bytes + SD_RESERVED_HEAP_BYTES));
        setenv("NVSHMEM_SYMMETRIC_SIZE", v, 1);
    }
    if (a->bootstrap == SD_BOOT_MPI) setenv("NVSHMEM_BOOTSTRAP", "MPI", 0);
    if (a->bootstrap == SD_BOOT_PMIX) {
        setenv("NVSHMEM_BOOTSTRAP", "PMI", 0);
        setenv("NVSHMEM_BOOTSTRAP_PMI", "PMIX", 0);
    }
}

/* An integer from the environment, or def. */
static long long sd_env_int(const char *name, long long def) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    return (end && *end == 0 && x > 0) ? x : def;
}

/* Starts NVSHMEM with the bootstrap a asks for. */
static int sd_start_nvshmem(const sd_init_args *a) {
    if (a->bootstrap == SD_BOOT_UNIQUEID) {
        if (!a->uid || a->uid_len != sizeof(nvshmemx_uniqueid_t))
            return SD_FAIL(SD_ERR_ARG, "sd_init: unique id of %zu bytes, want %zu", a->uid_len,
                           sizeof(nvshmemx_uniqueid_t));
        if (a->npes < 1 || a->pe < 0 || a->pe >= a->npes)
            return SD_FAIL(SD_ERR_ARG, "sd_init: PE %d of %d", a->pe, a->npes);
        nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
        memcpy(&id, a->uid, sizeof id);
        nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
        int rc = nvshmemx_set_attr_uniqueid_args(a->pe, a->npes, &id, &attr);
        if (rc != 0)
            return SD_FAIL(SD_ERR, "nvshmemx_set_attr_uniqueid_args(%d, %d) failed with status %d",
                           a->pe, a->npes, rc);
        rc = nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
        if (rc != 0)
            return SD_FAIL(SD_ERR, "nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID) failed with "
                           "status %d", rc);
        return SD_OK;
    }
    if (a->bootstrap == SD_BOOT_MPI || a->bootstrap == SD_BOOT_PMIX) {
        sd_mpi_bootstrap = a->bootstrap == SD_BOOT_MPI;
        nvshmem_init(); /* NVSHMEM_BOOTSTRAP chose the plugin; it exits on failure */
        return SD_OK;
    }
    return SD_FAIL(SD_ERR_ARG, "sd_init: unknown bootstrap %d", a->bootstrap);
}

/* Allocates and zeroes the symmetric sync area and the local state around it. */
static int sd_setup_area(void) {
    const size_t np = (size_t)g_sd.npes;
    const size_t flag_bytes = (size_t)SD_PHASES * SD_MAX_BLOCKS * np * sizeof(uint64_t);
    const size_t call_bytes = (size_t)SD_CALL_PARITIES * SD_MAX_BLOCKS * np * SD_CALL_WORDS * sizeof(uint64_t);
    const size_t ctrl_bytes = np * SD_CTRL_WORDS * sizeof(uint64_t);
    const size_t align = 256;
    const size_t flag_room = (flag_bytes + align - 1) / align * align;
    const size_t call_room = (call_bytes + align - 1) / align * align;
    const size_t ctrl_room = (ctrl_bytes + align - 1) / align * align;
    g_sd.area_bytes = flag_room + call_room + ctrl_room + SD_STAGING_BYTES;
    g_sd.area = (unsigned char *)nvshmem_malloc(g_sd.area_bytes);
    if (!g_sd.area)
        return SD_FAIL(SD_ERR_NO_MEMORY, "nvshmem_malloc(%zu) for the sync area returned NULL",
                       g_sd.area_bytes);
    g_sd.flags = (uint64_t *)g_sd.area;
    g_sd.calls = (uint64_t *)(g_sd.area + flag_room);
    g_sd.ctrl = (uint64_t *)(g_sd.area + flag_room + call_room);
    g_sd.staging = g_sd.area + flag_room + call_room + ctrl_room;
    SD_CUDA(cudaMemset(g_sd.area, 0, g_sd.area_bytes));
    SD_CUDA(cudaDeviceSynchronize());

    g_sd.h_peer_area = (uint64_t **)calloc(np, sizeof(uint64_t *));
    if (!g_sd.h_peer_area) return SD_FAIL(SD_ERR_NO_MEMORY, "calloc of %zu peer pointers", np);
    for (int j = 0; j < g_sd.npes && !g_sd.force_nvshmem; j++)
        g_sd.h_peer_area[j] = (uint64_t *)nvshmem_ptr(g_sd.area, j);
    SD_CUDA(cudaMalloc((void **)&g_sd.d_peer_flags, np * sizeof(uint64_t *)));
    SD_CUDA(cudaMemcpy(g_sd.d_peer_flags, g_sd.h_peer_area, np * sizeof(uint64_t *),
                       cudaMemcpyHostToDevice));
    SD_CUDA(cudaMalloc((void **)&g_sd.d_epochs, SD_MAX_BLOCKS * sizeof(uint64_t)));
    SD_CUDA(cudaMemset(g_sd.d_epochs, 0, SD_MAX_BLOCKS * sizeof(uint64_t)));
    SD_CUDA(cudaMalloc((void **)&g_sd.d_status, sizeof(sd_dev_status)));
    SD_CUDA(cudaMemset(g_sd.d_status, 0, sizeof(sd_dev_status)));
    SD_CUDA(cudaHostAlloc((void **)&g_sd.h_failed, sizeof(int32_t), cudaHostAllocMapped));
    *g_sd.h_failed = 0;
    SD_CUDA(cudaHostGetDevicePointer((void **)&g_sd.h_failed_dev, g_sd.h_failed, 0));
    SD_CUDA(cudaHostAlloc((void **)&g_sd.h_gather_in, SD_CTRL_WORDS * sizeof(uint64_t),
                          cudaHostAllocDefault));
    SD_CUDA(cudaHostAlloc((void **)&g_sd.h_gather_out, np * SD_CTRL_WORDS * sizeof(uint64_t),
                          cudaHostAllocDefault));
    SD_CUDA(cudaDeviceSynchronize());
    return SD_OK;
}

/* Reads bytes at the symmetric address sym of PE pe into host memory. */
static int sd_read_peer(void *dst, const void *sym, size_t bytes, int pe) {
    void *p = nvshmem_ptr(sym, pe);
    if (p) {
        SD_CUDA(cudaMemcpy(dst, p, bytes, cudaMemcpyDeviceToHost));
        return SD_OK;
    }
    nvshmem_getmem(g_sd.staging, sym, bytes, pe);
    SD_CUDA(cudaMemcpy(dst, g_sd.staging, bytes, cudaMemcpyDeviceToHost));
    return SD_OK;
}

/*
 * Every PE publishes {ABI, npes, reachable, max_blocks} in its control words;
 * all read all, with host barriers around (nvshmem_barrier_all works in every
 * NVSHMEM mode), and take the same decisions.
 */
static int sd_agree(int local_reachable) {
    uint64_t mine[4] = {(uint64_t)SD_ABI_VERSION, (uint64_t)g_sd.npes, (uint64_t)local_reachable,
                        (uint64_t)g_sd.max_blocks};
    uint64_t *my_slot = g_sd.ctrl + (size_t)g_sd.pe * SD_CTRL_WORDS;
    SD_CUDA(cudaMemcpy(my_slot, mine, sizeof mine, cudaMemcpyHostToDevice));
    nvshmem_barrier_all();
    int reachable = 1, blocks = g_sd.max_blocks;
    for (int j = 0; j < g_sd.npes; j++) {
        uint64_t theirs[4];
        SD_TRY(sd_read_peer(theirs, g_sd.ctrl + (size_t)j * SD_CTRL_WORDS, sizeof theirs, j));
        if (theirs[0] != (uint64_t)SD_ABI_VERSION || theirs[1] != (uint64_t)g_sd.npes)
            return SD_FAIL(SD_ERR_STATE,
                           "PE %d runs library ABI %llu with %llu PEs; this PE has ABI %d with %d",
                           j, (unsigned long long)theirs[0], (unsigned long long)theirs[1],
                           SD_ABI_VERSION, g_sd.npes);
        if (!theirs[2]) reachable = 0;
        if ((int)theirs[3] < blocks) blocks = (int)theirs[3];
    }
    nvshmem_barrier_all();
    g_sd.all_reachable = reachable;
    g_sd.max_blocks = blocks < 1 ? 1 : blocks;
    return SD_OK;
}

extern "C" int sd_init(const sd_init_args *a, sd_info *info) {
    if (!a || !info) return SD_FAIL(SD_ERR_ARG, "sd_init: NULL argument");
    if (g_sd.initialised)
        return SD_FAIL(SD_ERR_STATE, "sd_init: NVSHMEM is already initialised in this process");
    if (g_sd.finalised)
        return SD_FAIL(SD_ERR_STATE,
                       "sd_init: NVSHMEM cannot start again in a process that finalized it");
    sd_set_env(a);

    int32_t count = 0;
    SD_TRY(sd_device_count(&count));
    int dev = a->device >= 0 ? a->device : (a->local_pe > 0 ? a->local_pe : 0) % count;
    if (dev >= count)
        return SD_FAIL(SD_ERR_NO_DEVICE, "sd_init: GPU %d asked for, %d visible", dev, (int)count);
    SD_CUDA(cudaSetDevice(dev));
    SD_CUDA(cudaFree(0)); /* create the context now, so that its failure shows here */

    SD_TRY(sd_start_nvshmem(a));
    g_sd.pe = nvshmem_my_pe();
    g_sd.npes = nvshmem_n_pes();
    if (a->bootstrap == SD_BOOT_UNIQUEID && (g_sd.pe != a->pe || g_sd.npes != a->npes))
        return SD_FAIL(SD_ERR_STATE, "NVSHMEM made this PE %d of %d; the launcher said %d of %d",
                       g_sd.pe, g_sd.npes, a->pe, a->npes);
    g_sd.device = dev;
    g_sd.device_count = count;
    SD_CUDA(cudaDeviceGetAttribute(&g_sd.sm_count, cudaDevAttrMultiProcessorCount, dev));
    g_sd.timeout_ns = a->timeout_ns > 0 ? (uint64_t)a->timeout_ns : sd_default_timeout_ns;
    g_sd.one_shot_max = (size_t)sd_env_int("SYMDDP_ONE_SHOT_MAX", (long long)sd_default_one_shot_max);
    /* Two blocks per SM when the GPU is this PE's alone; one per SM when
     * PEs share it under MPS (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE below 100,
     * which the launcher sets, and sm_count is then this PE's share): with
     * two, the PEs' blocks crowd each other's SMs and the two-shot
     * allreduce of 64 MiB at 2 PEs reached 2.6 TB/s, with one 3.2 TB/s
     * (4 PEs: 2.6 and 3.1; 8 PEs: 3.3 either way). */
    const long long mps_pct = sd_env_int("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", 100);
    const long long per_sm = (mps_pct > 0 && mps_pct < 100) ? 1 : 2;
    long long blocks = sd_env_int("SYMDDP_MAX_BLOCKS", per_sm * g_sd.sm_count);
    g_sd.max_blocks = (int)(blocks > SD_MAX_BLOCKS ? SD_MAX_BLOCKS : blocks);
    SD_CUDA(cudaStreamCreateWithFlags(&g_sd.stream, cudaStreamNonBlocking));
    SD_CUDA(cudaStreamCreateWithFlags(&g_sd.side, cudaStreamNonBlocking));
    SD_TRY(sd_overlap_setup());
    /* Testing aid: every PE takes the paths for peers on other nodes. Only
     * where NVSHMEM's collectives run (not in "limited MPG" mode). */
    g_sd.force_nvshmem = sd_env_int("SYMDDP_FORCE_NVSHMEM", 0) > 0;

    SD_TRY(sd_setup_area());
    int local_reachable = 1;
    for (int j = 0; j < g_sd.npes; j++)
        if (!g_sd.h_peer_area[j]) local_reachable = 0;
    SD_TRY(sd_agree(local_reachable));
    g_sd.initialised = 1;

    memset(info, 0, sizeof *info);
    info->pe = g_sd.pe;
    info->npes = g_sd.npes;
    info->device = g_sd.device;
    info->device_count = g_sd.device_count;
    info->sm_count = g_sd.sm_count;
    info->max_blocks = g_sd.max_blocks;
    info->all_reachable = g_sd.all_reachable;
    int major = 0, minor = 0, patch = 0;
    nvshmemx_vendor_get_version_info(&major, &minor, &patch);
    info->nvshmem_major = major;
    info->nvshmem_minor = minor;
    info->nvshmem_patch = patch;
    int rt = 0, drv = 0;
    SD_CUDA(cudaRuntimeGetVersion(&rt));
    SD_CUDA(cudaDriverGetVersion(&drv));
    info->cuda_runtime = rt;
    info->cuda_driver = drv;
    return sdc_device_name(dev, info->device_name, sizeof info->device_name);
}

/* The MPI bootstrap plugin leaves MPI initialised after nvshmem_finalize,
 * and mpirun treats a rank that exits without MPI_Finalize as failed (seen
 * with Open MPI on the H200 host): finalize MPI if it is still up. The MPI
 * symbols come from the plugin's libmpi, found at run time. */
static void sd_finalize_mpi(void) {
    typedef int (*flag_fn)(int *);
    typedef int (*fin_fn)(void);
    flag_fn initialized = (flag_fn)dlsym(RTLD_DEFAULT, "MPI_Initialized");
    flag_fn finalized = (flag_fn)dlsym(RTLD_DEFAULT, "MPI_Finalized");
    fin_fn fin = (fin_fn)dlsym(RTLD_DEFAULT, "MPI_Finalize");
    if (!initialized || !finalized || !fin) {
        void *h = dlopen("libmpi.so.40", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
        if (!h) return;
        initialized = (flag_fn)dlsym(h, "MPI_Initialized");
        finalized = (flag_fn)dlsym(h, "MPI_Finalized");
        fin = (fin_fn)dlsym(h, "MPI_Finalize");
        if (!initialized || !finalized || !fin) return;
    }
    int up = 0, down = 0;
    if (initialized(&up) == 0 && up && finalized(&down) == 0 && !down) fin();
}

extern "C" int sd_finalize(int32_t collective) {
    if (!g_sd.initialised)
        return SD_FAIL(SD_ERR_STATE, "sd_finalize: the runtime is not initialised");
    int rc = SD_OK;
    int clean = collective && !g_sd.failed;
    if (g_sd.forked) {
        const int jrc = sd_comm_join(); /* the barrier below goes on the main stream */
        if (jrc != SD_OK) clean = 0, rc = jrc;
    }
    if (clean) {
        /* Every PE arrives here; a dead peer turns into a timeout, not a hang. */
        rc = sd_launch_barrier(g_sd.stream);
        if (rc == SD_OK) rc = sd_stream_wait((int64_t)g_sd.timeout_ns);
        clean = rc == SD_OK;
    }
    g_sd.initialised = 0;
    g_sd.finalised = 1;
    if (!clean) return rc; /* peers are gone or out of step: leave NVSHMEM to process exit */
    nvshmem_finalize();
    if (sd_mpi_bootstrap) sd_finalize_mpi();
    sd_overlap_release();
    cudaStreamDestroy(g_sd.side);
    cudaStreamDestroy(g_sd.stream);
    cudaFree(g_sd.d_peer_flags);
    cudaFree(g_sd.d_epochs);
    cudaFree(g_sd.d_status);
    cudaFreeHost(g_sd.h_failed);
    cudaFreeHost(g_sd.h_gather_in);
    cudaFreeHost(g_sd.h_gather_out);
    free(g_sd.h_peer_area);
    /* Nothing may reach what was just released: the wait and query entry
     * points check these for "not initialised". */
    g_sd.side = g_sd.stream = NULL;
    g_sd.d_peer_flags = NULL;
    g_sd.d_epochs = NULL;
    g_sd.d_status = NULL;
    g_sd.h_failed = g_sd.h_failed_dev = NULL;
    g_sd.h_gather_in = g_sd.h_gather_out = NULL;
    g_sd.h_peer_area = NULL;
    g_sd.area = NULL;
    g_sd.flags = g_sd.calls = g_sd.ctrl = NULL;
    g_sd.check = 0;
    g_sd.staging = NULL;
    return SD_OK;
}

extern "C" int sd_stream(uint64_t *stream) {
    if (!stream) return SD_FAIL(SD_ERR_ARG, "sd_stream: NULL argument");
    if (!g_sd.initialised) return SD_FAIL(SD_ERR_STATE, "sd_stream: the runtime is not initialised");
    *stream = (uint64_t)(uintptr_t)g_sd.stream;
    return SD_OK;
}

extern "C" int sd_set_timeout(int64_t timeout_ns) {
    g_sd.timeout_ns = timeout_ns > 0 ? (uint64_t)timeout_ns : sd_default_timeout_ns;
    return SD_OK;
}

extern "C" int sd_set_one_shot_max(size_t bytes) {
    g_sd.one_shot_max = bytes;
    return SD_OK;
}
