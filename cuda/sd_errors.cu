/*
 * sd_errors.cu: the library's error reporting. Every entry point returns a
 * status; the message of the last failure on a thread is kept in that
 * thread's buffer for sd_last_error().
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sd_internal.h"

static __thread char sd_err_buf[1024];

/* The file's name without its directory, for short messages. */
static const char *sd_base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int sd_fail(int code, const char *file, int line, const char *fmt, ...) {
    int n = snprintf(sd_err_buf, sizeof sd_err_buf, "%s:%d: ", sd_base_name(file), line);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof sd_err_buf) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sd_err_buf + n, sizeof sd_err_buf - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return code;
}

int sd_fail_cuda(const char *file, int line, const char *call, cudaError_t err) {
    int code = SD_ERR;
    switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
        code = SD_ERR_NO_DEVICE;
        break;
    case cudaErrorMemoryAllocation:
        code = SD_ERR_NO_MEMORY;
        break;
    default:
        break;
    }
    return sd_fail(code, file, line, "%s: %s (%s)", call, cudaGetErrorString(err),
                   cudaGetErrorName(err));
}

extern "C" const char *sd_last_error(void) { return sd_err_buf; }

extern "C" int sd_abi_version(void) { return SD_ABI_VERSION; }
