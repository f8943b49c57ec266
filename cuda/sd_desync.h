/*
 * sd_desync.h: the words that describe PEs met in different collectives,
 * from their fingerprints (SD_CALL_WORDS words per PE, as comm/internal/desync
 * encodes them; see sd_set_call), worded as desync.Check words them:
 *
 *   collective #7: PEs 0, 2 call allreduce(sum, 4000 bytes: float32 [0, 1000)
 *   of buffer #1); PE 1 calls barrier()
 *
 * The library's wait (sd_wait.cu) puts it in the message of SD_ERR_DESYNC,
 * which is what a caller that does not decode the calls itself shows (a
 * training step replayed from a CUDA graph). Plain C, host only, so that the
 * fake library of the Go tests (internal/cudalib/testdata) includes it too
 * and comm/nvshmem's tests compare it with desync.Check's words.
 */
#ifndef SD_DESYNC_H
#define SD_DESYNC_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "symddp_cuda.h"

/* One fingerprint, decoded (desync.Call). */
typedef struct {
    uint64_t seq;
    int coll, red, kind; /* desync.Coll, comm.Op, comm.Kind */
    uint32_t root; /* the root, or a reducescatter-part's sharding (desync.Call.Sharding) */
    uint64_t buf;
    int64_t off, n;
} sd_call;

/* Decodes the words of one fingerprint; the root counts only for the
 * collectives that have one (reduce, broadcast), and the same word carries a
 * reducescatter-part's sharding, as in desync.Decode(Encode). */
static inline sd_call sd_call_decode(const uint64_t *w) {
    sd_call c;
    c.seq = w[0];
    c.coll = (int)(w[1] & 0xff);
    c.red = (int)((w[1] >> 8) & 0xff);
    c.kind = (int)((w[1] >> 16) & 0xff);
    c.root = (c.coll == 3 || c.coll == 4 || c.coll == 10) ? (uint32_t)(w[1] >> 32) : 0;
    c.buf = w[2];
    c.off = (int64_t)w[3];
    c.n = (int64_t)w[4];
    return c;
}

static inline int sd_call_equal(const sd_call *a, const sd_call *b) {
    return a->seq == b->seq && a->coll == b->coll && a->red == b->red && a->kind == b->kind &&
           a->root == b->root && a->buf == b->buf && a->off == b->off && a->n == b->n;
}

/* A growing string in a fixed buffer; writes past the end are dropped. */
typedef struct {
    char *p;
    size_t cap, len;
} sd_text;

static inline void sd_textf(sd_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void sd_textf(sd_text *t, const char *fmt, ...) {
    if (t->len + 1 >= t->cap) return;
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (k > 0) t->len = t->len + (size_t)k < t->cap ? t->len + (size_t)k : t->cap - 1;
}

/* Appends the call as desync.Call.String writes it. */
static inline void sd_call_text(sd_text *t, const sd_call *c) {
    static const char *const colls[] = {"",          "barrier",       "allreduce", "reduce",
                                        "broadcast", "reducescatter", "allgather", "alloc",
                                        "free",      "close",         "reducescatter-part"};
    static const char *const reds[] = {"", "sum", "mean", "max", "min"};
    static const char *const kinds[] = {"", "float32", "bfloat16", "byte", "uint64"};
    static const int sizes[] = {0, 4, 2, 1, 8};
    if (c->coll > 0 && c->coll < (int)(sizeof colls / sizeof colls[0]))
        sd_textf(t, "%s(", colls[c->coll]);
    else
        sd_textf(t, "collective %d(", c->coll);
    const char *sep = "";
    if (c->red != 0) {
        if (c->red < (int)(sizeof reds / sizeof reds[0]))
            sd_textf(t, "%s", reds[c->red]);
        else
            sd_textf(t, "Op(%d)", c->red);
        sep = ", ";
    }
    if (c->coll == 3 || c->coll == 4) {
        sd_textf(t, "%sroot %" PRIu32, sep, c->root);
        sep = ", ";
    }
    if (c->coll == 10) {
        sd_textf(t, "%ssharding %08" PRIx32, sep, c->root);
        sep = ", ";
    }
    if (c->kind != 0) {
        const int known = c->kind < (int)(sizeof kinds / sizeof kinds[0]);
        const int64_t size = known ? sizes[c->kind] : 0;
        sd_textf(t, "%s%" PRId64 " bytes: ", sep, c->n * size);
        if (known)
            sd_textf(t, "%s", kinds[c->kind]);
        else
            sd_textf(t, "Kind(%d)", c->kind);
        sd_textf(t, " [%" PRId64 ", %" PRId64 ") of buffer #%" PRIu64, c->off, c->off + c->n, c->buf);
    }
    sd_textf(t, ")");
}

/*
 * Writes into out[cap] what desync.Check writes between its prefix and the
 * error it wraps: "collective #N: " and every distinct call with the PEs
 * that made it, in order of each call's first PE ("PEs 0, 2 call ...; PE 1
 * calls ..."); "a collective: " and " as its collective #N" after each call
 * when their numbers differ. words holds npes fingerprints. Returns 1 when
 * the calls differ, 0 (and out "") when they are all the same.
 */
static inline int sd_desync_describe(char *out, size_t cap, const uint64_t *words, int npes) {
    sd_text t = {out, cap, 0};
    if (cap) out[0] = 0;
    if (npes <= 0 || cap == 0) return 0;
    int differ = 0, seqs = 0;
    const sd_call first = sd_call_decode(words);
    for (int p = 1; p < npes; p++) {
        const sd_call c = sd_call_decode(words + (size_t)p * SD_CALL_WORDS);
        if (!sd_call_equal(&c, &first)) differ = 1;
    }
    if (!differ) return 0;
    /* distinct calls in order of their first PE; seqs: their numbers differ */
    for (int p = 1; p < npes; p++)
        if (sd_call_decode(words + (size_t)p * SD_CALL_WORDS).seq != first.seq) seqs = 1;
    if (seqs)
        sd_textf(&t, "a collective: ");
    else
        sd_textf(&t, "collective #%" PRIu64 ": ", first.seq);
    int parts = 0;
    for (int p = 0; p < npes; p++) {
        const sd_call c = sd_call_decode(words + (size_t)p * SD_CALL_WORDS);
        int seen = 0, count = 0;
        for (int q = 0; q < p && !seen; q++) {
            const sd_call d = sd_call_decode(words + (size_t)q * SD_CALL_WORDS);
            seen = sd_call_equal(&c, &d);
        }
        if (seen) continue; /* described with its first PE */
        for (int q = p; q < npes; q++) {
            const sd_call d = sd_call_decode(words + (size_t)q * SD_CALL_WORDS);
            if (sd_call_equal(&c, &d)) count++;
        }
        sd_textf(&t, "%s%s", parts++ ? "; " : "", count > 1 ? "PEs " : "PE ");
        int listed = 0;
        for (int q = p; q < npes; q++) {
            const sd_call d = sd_call_decode(words + (size_t)q * SD_CALL_WORDS);
            if (sd_call_equal(&c, &d)) sd_textf(&t, "%s%d", listed++ ? ", " : "", q);
        }
        sd_textf(&t, " %s ", count > 1 ? "call" : "calls");
        sd_call_text(&t, &c);
        if (seqs) sd_textf(&t, " as its collective #%" PRIu64, c.seq);
    }
    return 1;
}

#endif /* SD_DESYNC_H */
