/* A tracing shim for studying what a framework passes to MPI (used for
 * doc/measured/horovod-layouts.md).  Not part of the library and not built by make:
 *
 *   mpicc -shared -fPIC -O2 -o libhvdtrace.so tests/study/hvd_trace_shim.c -lpthread
 *   mpirun -np 4 -x LD_PRELOAD=$PWD/libhvdtrace.so -x HVD_TRACE_DIR=/tmp/t python ...
 *
 * Preloaded instead of libhipress.so, it wraps MPI_Allreduce and the
 * collectives Horovod's MPI controller uses, writes one line per call to
 * $HVD_TRACE_DIR/trace.<world rank>, then calls the PMPI function.
 *
 * Line format (space separated):
 *   seq t_us func comm sendbuf recvbuf count datatype op [extra]
 * sendbuf is IN_PLACE for MPI_IN_PLACE; addresses in hex; t_us is the time
 * since the first traced call.  For a float32 MPI_Allreduce, [extra] is
 * "layout=a,b,c" naming, in buffer order, the tensors the buffer held before
 * the reduction, when the program registered them (below); "?" marks a
 * stretch that matched no registered tensor.
 *
 * Registration, from the program (Python: ctypes.CDLL(path)):
 *   void hvdtrace_register(int id, const void *ptr, long count)
 *       tensor `id` currently lives at ptr and holds count floats (call it
 *       from a gradient hook, before the framework reads the gradient);
 *   void hvdtrace_reset(void)
{
    pthread_mutex_lock(&lock);
    memset(reg, 0, sizeof reg);
    pthread_mutex_unlock(&lock);
}

void hvdtrace_mark(const char *text)
 *       writes "# text" into the trace (step boundaries);
 *   void hvdtrace_reset(void)
 *       forgets every registration (call it at the start of each step: a
 *       gradient freed since, with zero_grad(set_to_none=True), must not be
 *       read).
 * A registered tensor is matched when the buffer holds the same bytes at the
 * current offset (or is the tensor itself).
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define MAX_TENSORS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static long seq;
static double t0 = -1;
static struct {
    const void *ptr;
    long count;
} reg[MAX_TENSORS];

static double now_us(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec * 1e6 + tv.tv_usec;
}

/* caller holds lock */
static FILE *trace_file(void)
{
    if (out)
        return out;
    int init = 0, fin = 0, rank = 0;
    PMPI_Initialized(&init);
    PMPI_Finalized(&fin);
    if (!init || fin)
        return NULL;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *dir = getenv("HVD_TRACE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/trace.%d", dir && *dir ? dir : ".", rank);
    out = fopen(path, "w");
    if (!out) {
        perror(path);
        abort();
    }
    setvbuf(out, NULL, _IOFBF, 1 << 20);
    t0 = now_us();
    return out;
}

static const char *type_name(MPI_Datatype t, char *buf)
{
    int len = 0;
    if (t == MPI_DATATYPE_NULL)
        return "NULL";
    buf[0] = 0;
    if (PMPI_Type_get_name(t, buf, &len) != MPI_SUCCESS || !buf[0])
        snprintf(buf, MPI_MAX_OBJECT_NAME, "derived");
    return buf;
}

static const char *op_name(MPI_Op op)
{
    static const struct {
        MPI_Op op;
        const char *name;
    } ops[] = {{MPI_SUM, "SUM"}, {MPI_MAX, "MAX"},   {MPI_MIN, "MIN"},   {MPI_PROD, "PROD"},
               {MPI_BAND, "BAND"}, {MPI_BOR, "BOR"}, {MPI_BXOR, "BXOR"}, {MPI_LAND, "LAND"},
               {MPI_LOR, "LOR"}, {MPI_REPLACE, "REPLACE"}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i].op == op)
            return ops[i].name;
    return "user";
}

static void comm_tag(MPI_Comm c, char *buf)
{
    if (c == MPI_COMM_WORLD)
        snprintf(buf, 32, "WORLD");
    else
        snprintf(buf, 32, "%p", (void *)c);
}

static void addr(const void *p, char *buf)
{
    if (p == MPI_IN_PLACE)
        snprintf(buf, 32, "IN_PLACE");
    else
        snprintf(buf, 32, "%p", p);
}

/* caller holds lock: which registered tensors the float buffer holds */
static void layout(const float *buf, long count, char *s, size_t cap)
{
    size_t n = 0;
    long off = 0;
    s[0] = 0;
    n += snprintf(s + n, cap - n, " layout=");
    while (off < count && n + 16 < cap) {
        int found = -1;
        for (int id = 0; id < MAX_TENSORS; id++) {
            if (!reg[id].ptr || reg[id].count > count - off)
                continue;
            if ((const float *)reg[id].ptr == buf + off ||
                memcmp(buf + off, reg[id].ptr, (size_t)reg[id].count * sizeof(float)) == 0) {
                /* prefer the tensor whose memory this is, then the longest */
                if (found < 0 || (const float *)reg[id].ptr == buf + off || reg[id].count > reg[found].count)
                    found = id;
                if ((const float *)reg[id].ptr == buf + off)
                    break;
            }
        }
        if (found < 0) {
            n += snprintf(s + n, cap - n, "%s?%ld", off ? "," : "", count - off);
            break;
        }
        n += snprintf(s + n, cap - n, "%s%d", off ? "," : "", found);
        off += reg[found].count;
    }
}

static void log_call(const char *func, MPI_Comm comm, const void *sb, const void *rb, long count,
                     MPI_Datatype dt, const char *op, const char *extra)
{
    char c[32], s[32], r[32], t[MPI_MAX_OBJECT_NAME + 1];
    pthread_mutex_lock(&lock);
    FILE *f = trace_file();
    if (f) {
        comm_tag(comm, c);
        addr(sb, s);
        addr(rb, r);
        fprintf(f, "%ld %.0f %s %s %s %s %ld %s %s%s\n", seq++, now_us() - t0, func, c, s, r, count,
                type_name(dt, t), op, extra ? extra : "");
    }
    pthread_mutex_unlock(&lock);
}

void hvdtrace_register(int id, const void *ptr, long count)
{
    if (id < 0 || id >= MAX_TENSORS)
        return;
    pthread_mutex_lock(&lock);
    reg[id].ptr = ptr;
    reg[id].count = count;
    pthread_mutex_unlock(&lock);
}

void hvdtrace_reset(void)
{
    pthread_mutex_lock(&lock);
    memset(reg, 0, sizeof reg);
    pthread_mutex_unlock(&lock);
}

void hvdtrace_mark(const char *text)
{
    pthread_mutex_lock(&lock);
    FILE *f = trace_file();
    if (f)
        fprintf(f, "# %s\n", text);
    pthread_mutex_unlock(&lock);
}

int MPI_Allreduce(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    char extra[4096];
    extra[0] = 0;
    if (dt == MPI_FLOAT && count > 0) {
        const float *data = sb == MPI_IN_PLACE ? rb : sb;
        pthread_mutex_lock(&lock);
        layout(data, count, extra, sizeof extra);
        pthread_mutex_unlock(&lock);
    }
    log_call("Allreduce", comm, sb, rb, count, dt, op_name(op), extra);
    return PMPI_Allreduce(sb, rb, count, dt, op, comm);
}

int MPI_Bcast(void *b, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    log_call("Bcast", comm, b, b, count, dt, "-", NULL);
    return PMPI_Bcast(b, count, dt, root, comm);
}

int MPI_Gather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root,
               MPI_Comm comm)
{
    log_call("Gather", comm, sb, rb, sc, st, "-", NULL);
    return PMPI_Gather(sb, sc, st, rb, rc, rt, root, comm);
}

int MPI_Gatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rc[], const int dis[],
                MPI_Datatype rt, int root, MPI_Comm comm)
{
    log_call("Gatherv", comm, sb, rb, sc, st, "-", NULL);
    return PMPI_Gatherv(sb, sc, st, rb, rc, dis, rt, root, comm);
}

int MPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm)
{
    log_call("Allgather", comm, sb, rb, sb == MPI_IN_PLACE ? rc : sc, sb == MPI_IN_PLACE ? rt : st, "-", NULL);
    return PMPI_Allgather(sb, sc, st, rb, rc, rt, comm);
}

int MPI_Allgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rc[], const int dis[],
                   MPI_Datatype rt, MPI_Comm comm)
{
    log_call("Allgatherv", comm, sb, rb, sc, sb == MPI_IN_PLACE ? rt : st, "-", NULL);
    return PMPI_Allgatherv(sb, sc, st, rb, rc, dis, rt, comm);
}

int MPI_Alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm)
{
    log_call("Alltoall", comm, sb, rb, sc, st, "-", NULL);
    return PMPI_Alltoall(sb, sc, st, rb, rc, rt, comm);
}

int MPI_Barrier(MPI_Comm comm)
{
    log_call("Barrier", comm, NULL, NULL, 0, MPI_DATATYPE_NULL, "-", NULL);
    return PMPI_Barrier(comm);
}

int MPI_Comm_free(MPI_Comm *comm)
{
    log_call("Comm_free", *comm, NULL, NULL, 0, MPI_DATATYPE_NULL, "-", NULL);
    return PMPI_Comm_free(comm);
}

int MPI_Finalize(void)
{
    log_call("Finalize", MPI_COMM_WORLD, NULL, NULL, 0, MPI_DATATYPE_NULL, "-", NULL);
    pthread_mutex_lock(&lock);
    if (out) {
        fclose(out);
        out = NULL;
    }
    pthread_mutex_unlock(&lock);
    return PMPI_Finalize();
}
