/*
 * sd_gpt_errors.cu: the per-thread message behind sdg_last_error() and the
 * GPT ABI's version (symddp_gpt.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sd_gpt.cuh"

static thread_local char sdg_msg[512];

extern "C" int sdg_abi_version(void) { return SDG_ABI_VERSION; }

extern "C" const char *sdg_last_error(void) { return sdg_msg; }

int sdg_fail(int code, const char *file, int line, const char *fmt, ...) {
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    int n = snprintf(sdg_msg, sizeof sdg_msg, "%s:%d: ", base, line);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof sdg_msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sdg_msg + n, sizeof sdg_msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return code;
}
