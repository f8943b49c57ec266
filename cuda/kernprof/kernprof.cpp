// kernprof: a kernel-time profile of any CUDA process, for GPU hosts without
// Nsight Systems. CUDA loads it into every process that initialises the
// driver with CUDA_INJECTION64_PATH set to this library (the launcher's PEs
// inherit the variable), and CUPTI's activity API hands it each kernel's
// start and end, graph-launched kernels included. It sums them by kernel
// name and rewrites a table every SDPROF_EVERY_MS milliseconds (default 500)
// and at exit:
//
//   SDPROF_OUT    file prefix; each process writes PREFIX.PID.txt (default
//                 /tmp/kernprof)
//   SDPROF_SKIP_S seconds after the process's first kernel whose kernels are
//                 not counted (warm-up, tuning, plan builds; default 0)
//   SDPROF_TAIL   N: also the last N kernels that ended on each stream, after
//                 the table (default 0: none). A process that hangs keeps
//                 rewriting its file, so the tails say where each stream
//                 stopped: the kernel after a stream's last one is the one
//                 that did not end (or never started). CUPTI hands records
//                 over in batches, not in time order: the tail is the last N
//                 by their end of the last 4N handed over. With it every
//                 rewrite forces CUPTI to hand over the records it holds, so
//                 the tails are current to the rewrite.
//
// A process started as a PE (SYMDDP_PE set) names its PE in the header.
//
// The table's lines: total microseconds, launches, mean microseconds, the
// demangled name; sorted by total, with the sum of all kernels' time and the
// time from the first counted kernel's start to the last one's end on top.
// A Go process leaves without running atexit handlers, hence the periodic
// rewrite: the last table is at most SDPROF_EVERY_MS old.
//
// Built on the GPU host by scripts/gpu-kernprof.sh, against that host's CUPTI.
// SD_KERNEL_RECORD names the header's newest kernel record type (its start,
// end and name fields are the ones read; every version has them).
#include <cupti.h>
#include <cxxabi.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#ifndef SD_KERNEL_RECORD
#define SD_KERNEL_RECORD CUpti_ActivityKernel4
#endif

namespace {

struct Sum {
    uint64_t ns = 0;
    uint64_t launches = 0;
};

std::mutex mu;        // the sums
std::mutex write_mu;  // the table's file: the writer thread and the exit handler
std::unordered_map<std::string, Sum> sums;
uint64_t first_start = 0;  // the first record's start (0: none yet)
uint64_t lo = UINT64_MAX, hi = 0, busy = 0;
uint64_t skip_ns = 0;
unsigned every_ms = 500;
// The last kernels that ended on each stream (SDPROF_TAIL), by stream id.
struct Ended {
    std::string name;
    uint64_t start, end;
};
size_t tail_n = 0;
std::map<uint32_t, std::deque<Ended>> tails;
std::string out_path;

const size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = static_cast<uint8_t *>(aligned_alloc(8, kBufferBytes));
    *size = *buf ? kBufferBytes : 0;
    *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid) {
    CUpti_Activity *rec = nullptr;
    {
        std::lock_guard<std::mutex> g(mu);
        while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
            if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
            const auto *k = reinterpret_cast<const SD_KERNEL_RECORD *>(rec);
            if (first_start == 0) first_start = k->start;
            if (tail_n > 0 && k->end >= k->start) {
                auto &t = tails[k->streamId];
                t.push_back({k->name ? k->name : "?", k->start, k->end});
                if (t.size() > 4 * tail_n) t.pop_front(); /* records come in batches, not in time order */
            }
            if (k->start < first_start + skip_ns || k->end < k->start) continue;
            Sum &s = sums[k->name ? k->name : "?"];
            s.ns += k->end - k->start;
            s.launches++;
            busy += k->end - k->start;
            lo = std::min<uint64_t>(lo, k->start);
            hi = std::max<uint64_t>(hi, k->end);
        }
    }
    free(buf);
}

std::string demangle(const std::string &name) {
    int status = 0;
    char *d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    if (status != 0 || !d) return name;
    std::string s(d);
    free(d);
    return s;
}

// write rewrites the table (a temporary file renamed over the last one, so a
// reader never sees half of it).
void write_table() {
    std::vector<std::pair<std::string, Sum>> rows;
    std::map<uint32_t, std::deque<Ended>> last;
    uint64_t span = 0, total = 0;
    {
        std::lock_guard<std::mutex> g(mu);
        rows.assign(sums.begin(), sums.end());
        span = hi > lo ? hi - lo : 0;
        total = busy;
        last = tails;
    }
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) { return a.second.ns > b.second.ns; });
    std::lock_guard<std::mutex> w(write_mu);
    std::string tmp = out_path + ".tmp";
    FILE *f = fopen(tmp.c_str(), "w");
    if (!f) return;
    const char *pe = getenv("SYMDDP_PE");
    fprintf(f, "# kernprof pid %d%s%s: kernels %.1f us in all over a span of %.1f us (first %.1f s skipped)\n",
            static_cast<int>(getpid()), pe ? ", PE " : "", pe ? pe : "", total / 1e3, span / 1e3, skip_ns / 1e9);
    fprintf(f, "# total_us launches mean_us name\n");
    for (const auto &r : rows) {
        fprintf(f, "%12.1f %9llu %10.2f %s\n", r.second.ns / 1e3, static_cast<unsigned long long>(r.second.launches),
                r.second.ns / 1e3 / static_cast<double>(r.second.launches), demangle(r.first).c_str());
    }
    for (auto &s : last) {
        std::vector<Ended> ks(s.second.begin(), s.second.end());
        std::sort(ks.begin(), ks.end(), [](const Ended &a, const Ended &b) { return a.end < b.end; });
        if (ks.size() > tail_n) ks.erase(ks.begin(), ks.end() - static_cast<long>(tail_n));
        fprintf(f, "# stream %u: its last %zu kernels (start and end in ms of the GPU's clock modulo 10^6, the same in "
                   "every process of the GPU)\n",
                s.first, ks.size());
        for (const auto &k : ks)
            fprintf(f, "#   %12.3f %12.3f %s\n", static_cast<double>(k.start % 1000000000000ull) / 1e6,
                    static_cast<double>(k.end % 1000000000000ull) / 1e6, demangle(k.name).c_str());
    }
    fclose(f);
    rename(tmp.c_str(), out_path.c_str());
}

void flush_and_write() {
    cuptiActivityFlushAll(tail_n > 0 ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    write_table();
}

void *writer(void *) {
    for (;;) {
        usleep(every_ms * 1000u);
        flush_and_write();
    }
    return nullptr;
}

void at_exit() { flush_and_write(); }

}  // namespace

// InitializeInjection is what the CUDA driver calls in a process whose
// CUDA_INJECTION64_PATH names this library; a non-zero return is success.
extern "C" int InitializeInjection(void) {
    const char *prefix = getenv("SDPROF_OUT");
    out_path = std::string(prefix && *prefix ? prefix : "/tmp/kernprof") + "." + std::to_string(getpid()) + ".txt";
    if (const char *s = getenv("SDPROF_SKIP_S")) skip_ns = static_cast<uint64_t>(atof(s) * 1e9);
    if (const char *s = getenv("SDPROF_EVERY_MS")) every_ms = std::max(50, atoi(s));
    if (const char *s = getenv("SDPROF_TAIL")) tail_n = static_cast<size_t>(std::max(0, atoi(s)));
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        fprintf(stderr, "kernprof: CUPTI's activity API refused; no profile for pid %d\n", static_cast<int>(getpid()));
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, nullptr, writer, nullptr) == 0) pthread_detach(t);
    atexit(at_exit);
    return 1;
}
