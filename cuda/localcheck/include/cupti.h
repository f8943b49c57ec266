// Declarations-only stand-in for CUPTI's cupti.h: what cuda/kernprof/kernprof.cpp
// uses, so that cuda/localcheck/check.sh compile-checks it on a machine without
// CUPTI. The real header comes with the GPU host's CUDA toolkit.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define CUPTIAPI
typedef struct CUctx_st *CUcontext;
typedef enum { CUPTI_SUCCESS = 0 } CUptiResult;
typedef enum { CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1 << 0 } CUpti_ActivityFlag;
typedef enum {
    CUPTI_ACTIVITY_KIND_KERNEL = 3,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL = 10,
} CUpti_ActivityKind;
typedef struct {
    CUpti_ActivityKind kind;
} CUpti_Activity;
typedef struct {
    CUpti_ActivityKind kind;
    uint8_t cacheConfig, sharedMemoryConfig;
    uint16_t registersPerThread;
    uint32_t partitionedGlobalCacheRequested, partitionedGlobalCacheExecuted;
    uint64_t start, end, completed;
    uint32_t deviceId, contextId, streamId;
    int32_t gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory;
    uint32_t localMemoryPerThread, localMemoryTotal, correlationId;
    int64_t gridId;
    const char *name;
} CUpti_ActivityKernel4;
typedef void(CUPTIAPI *CUpti_BuffersCallbackRequestFunc)(uint8_t **buffer, size_t *size, size_t *maxNumRecords);
typedef void(CUPTIAPI *CUpti_BuffersCallbackCompleteFunc)(CUcontext context, uint32_t streamId, uint8_t *buffer,
                                                          size_t size, size_t validSize);
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind);
CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes, CUpti_Activity **record);
CUptiResult cuptiActivityFlushAll(uint32_t flag);
