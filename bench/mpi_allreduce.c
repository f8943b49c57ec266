//go:build ignore

// (The line above keeps the go command from compiling this file into package
// bench, which only embeds it.)

/*
 * mpi_allreduce: the Open MPI side of `symbench allreduce`.
 *
 * For every size from min_bytes to max_bytes (multiplying by step) it times an
 * in-place float32 MPI_SUM MPI_Allreduce exactly the way symbench times the
 * shm backend: two warm-up calls; then 1, 2, 4, ... calls until they take a
 * quarter of target_seconds, which sizes a repetition (calls enough for
 * target_seconds); then each of reps repetitions is a barrier and that many
 * calls. A time per call is always the maximum over the ranks, so every rank
 * takes the same decisions; rank 0 prints the median over the repetitions:
 *
 *     result <bytes> <iterations> <seconds per call>
 *
 * usage: mpi_allreduce min_bytes max_bytes step reps target_seconds
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* MAX_ITERS bounds the calls of one repetition. */
#define MAX_ITERS 100000L

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* time_calls returns the maximum over ranks of the mean time of one of iters
 * allreduces of n floats, after a barrier. */
static double time_calls(float *buf, int n, long iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double t = (MPI_Wtime() - t0) / (double)iters, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 6) {
        if (rank == 0) {
            fprintf(stderr, "usage: %s min_bytes max_bytes step reps target_seconds\n", argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    long min_bytes = atol(argv[1]), max_bytes = atol(argv[2]);
    long step = atol(argv[3]);
    int reps = atoi(argv[4]);
    double target = atof(argv[5]);
    if (min_bytes < 4 || max_bytes < min_bytes || step < 2 || reps < 1 || target <= 0) {
        if (rank == 0) {
            fprintf(stderr, "%s: bad arguments\n", argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    float *buf = malloc((size_t)max_bytes);
    double *times = malloc(sizeof(double) * (size_t)reps);
    if (buf == NULL || times == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < max_bytes / 4; i++) {
        buf[i] = 1.0f;
    }
    for (long bytes = min_bytes; bytes <= max_bytes; bytes *= step) {
        int n = (int)(bytes / 4);
        time_calls(buf, n, 2);
        long iters = 1;
        double t;
        for (;;) {
            t = time_calls(buf, n, iters);
            if (t * (double)iters >= target / 4 || iters >= MAX_ITERS) {
                break;
            }
            iters *= 2;
        }
        iters = (long)(target / t) + 1;
        if (iters > MAX_ITERS) {
            iters = MAX_ITERS;
        }
        for (int r = 0; r < reps; r++) {
            times[r] = time_calls(buf, n, iters);
        }
        qsort(times, (size_t)reps, sizeof(double), cmp_double);
        if (rank == 0) {
            printf("result %ld %ld %.9g\n", bytes, iters, times[reps / 2]);
            fflush(stdout);
        }
    }
    free(times);
    free(buf);
    MPI_Finalize();
    return 0;
}
