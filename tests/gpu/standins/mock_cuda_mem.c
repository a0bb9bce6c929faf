/*
 * The stand-in driver's device memory (see mock_cuda.c): its regions, their
 * host shadows, and CUDA IPC.
 *
 * A region is a device address range -- a mapping with no access rights,
 * so that any host read or write of it crashes, as a real device pointer
 * does in a non-CUDA-aware MPI -- and its shadow, the host bytes that the
 * copies, the sets, the stream memory operations and the emulated kernels
 * use (mock_shadow).  With MOCK_CUDA_HOST_ACCESSIBLE=1 the range is
 * ordinary memory and is its own shadow.
 *
 * CUDA IPC: cuIpcGetMemHandle moves the allocation's shadow into a POSIX
 * shared-memory segment (/hpmock-ipc-PID-N, the same bytes; once no entry
 * is running, so that none writes the old copy), and the handle names the
 * segment.  cuIpcOpenMemHandle_v2 in another process maps the segment as a
 * region of its own: a device address of that process, the same bytes, so
 * a copy, a flag written or a kernel there is seen by the exporter and by
 * every other process that opened it.  Opening registers the two processes
 * with each other in the wait-for graph (mock_cuda_wfg.c: who may write a
 * flag another waits for).  The segment's name goes when the exporter frees
 * the allocation or ends; a mapping stays valid until it is closed.
 *
 * Stream-ordered memory (cuMemAllocAsync) remembers its stream and the
 * entry that allocated it.  Freed (cuMemFree at once, cuMemFreeAsync when
 * its stream reaches the free), it stays a tombstone -- its addresses
 * reserved, its shadow kept -- so that an entry that touches it after the
 * free stops the process with a line naming the use and the free, where a
 * GPU would read memory the pool has handed to someone else.  The oldest
 * tombstones go once there are more than TOMB_MAX, with no entry running.
 * Until the host has seen its allocation complete (a synchronisation of
 * its stream, of an event after it, of the device), such memory may be
 * used only by its stream's later entries and by those of streams ordered
 * after the allocation by an event wait (directly or through others): an
 * entry of any other stream that touches it stops the process.
 */
#include "mock_cuda_int.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { IPC_NONE, IPC_EXPORTED, IPC_OPENED };
#define IPC_MAGIC 0x6870697063686e64ULL   /* "hpipchnd" */
#define IPC_PREFIX "hpmock-ipc-"

#define MAX_REGIONS 4096
#define TOMB_MAX 256
static struct region {
    char     *base;
    size_t    len;
    char     *shadow;
    int       device;
    int       managed;
    int       ipc;      /* IPC_*: an exported region's shadow is its segment, an opened one's a peer's */
    int       pid;      /* the exporter (IPC_OPENED) */
    unsigned  serial;   /* the segment's number in the exporter */
    int       refs;     /* IPC_OPENED: opens not yet closed */
    mstream_t *astream; /* stream-ordered memory: its stream (NULL: synchronous memory) */
    unsigned long long amark;   /* ... and its allocation's entry there */
    int       global;   /* ... known complete to the host: valid on every stream */
    int       nvalid;   /* ... the other streams ordered after the allocation: their entries after `from` */
    struct { mstream_t *s; unsigned long long from; } valid[16];
    unsigned long long tomb;    /* freed stream-ordered memory: its rank among the tombstones (0: live) */
    char      by[160];  /* a tombstone: what freed it */
} regions[MAX_REGIONS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned next_serial;
static unsigned long long ntombs, tombs_made;

/* What a CUipcMemHandle (64 bytes) holds. */
typedef struct {
    uint64_t magic;
    int32_t  pid;
    uint32_t serial;
    uint64_t len;      /* the allocation's bytes */
    uint64_t offset;   /* of the pointer exported, within it */
} ipc_handle_t;
typedef struct {
    unsigned char b[64];
} cu_ipc_handle_t;

static size_t page_round(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static int host_accessible(void)
{
    const char *s = getenv("MOCK_CUDA_HOST_ACCESSIBLE");
    return s != NULL && atoi(s) != 0;
}

static void seg_name(char *buf, size_t len, int pid, unsigned serial)
{
    snprintf(buf, len, "/" IPC_PREFIX "%d-%u", pid, serial);
}

/* The region holding [p, p + n), a tombstone included, or NULL (under lock). */
static struct region *find_any(uintptr_t p, size_t n)
{
    for (int i = 0; i < MAX_REGIONS; i++) {
        uintptr_t b = (uintptr_t)regions[i].base;
        if (regions[i].base != NULL && p >= b && p - b < regions[i].len && n <= regions[i].len - (p - b))
            return &regions[i];
    }
    return NULL;
}

/* The live region holding [p, p + n), or NULL (under lock). */
static struct region *find_locked(uintptr_t p, size_t n)
{
    struct region *r = find_any(p, n);
    return r != NULL && r->tomb == 0 ? r : NULL;
}

/* The host address of [p, p + n) of device memory, or NULL. */
static char *shadow_range(const void *p, size_t n)
{
    struct region *r;
    char *h = NULL;
    pthread_mutex_lock(&lock);
    if ((r = find_locked((uintptr_t)p, n)) != NULL)
        h = r->shadow + ((const char *)p - r->base);
    pthread_mutex_unlock(&lock);
    return h;
}

int mock_is_device(const void *p, size_t n)
{
    return shadow_range(p, n) != NULL;
}

int mock_region_info(const void *p, int *device_p, int *managed_p)
{
    struct region *r;
    pthread_mutex_lock(&lock);
    if ((r = find_locked((uintptr_t)p, 0)) != NULL) {
        *device_p = r->device;
        *managed_p = r->managed;
    }
    pthread_mutex_unlock(&lock);
    return r != NULL;
}

static void region_drop(struct region *r);

/* The oldest tombstones go, down to half of TOMB_MAX, with no entry
 * running (one may be reading a shadow). */
static void tombs_trim(void)
{
    mock_quiesce(1);
    pthread_mutex_lock(&lock);
    while (ntombs > TOMB_MAX / 2) {
        struct region *old = NULL;
        for (int i = 0; i < MAX_REGIONS; i++)
            if (regions[i].base != NULL && regions[i].tomb != 0 && (old == NULL || regions[i].tomb < old->tomb))
                old = &regions[i];
        if (old == NULL)
            break;
        region_drop(old);
        ntombs--;
    }
    pthread_mutex_unlock(&lock);
    mock_quiesce(0);
}

/* A region for base and shadow (NULL when the table is full). */
static struct region *region_add(char *base, size_t len, char *shadow, int device, int managed)
{
    if (__atomic_load_n(&ntombs, __ATOMIC_RELAXED) > TOMB_MAX)
        tombs_trim();
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_REGIONS; i++)
        if (regions[i].base == NULL) {
            memset(&regions[i], 0, sizeof(regions[i]));
            regions[i].base = base;
            regions[i].len = len;
            regions[i].shadow = shadow;
            regions[i].device = device;
            regions[i].managed = managed;
            pthread_mutex_unlock(&lock);
            return &regions[i];
        }
    pthread_mutex_unlock(&lock);
    return NULL;
}

void mock_region_async(void *p, mstream_t *s, unsigned long long mark)
{
    struct region *r;
    pthread_mutex_lock(&lock);
    if ((r = find_locked((uintptr_t)p, 1)) != NULL) {
        r->astream = s;
        r->amark = mark;
    }
    pthread_mutex_unlock(&lock);
}

/* Whether r's allocation is ordered before s's entries after `seq`; its
 * from in *from_p (under lock). */
static int ordered_on(const struct region *r, const mstream_t *s, unsigned long long seq, unsigned long long *from_p)
{
    unsigned long long from = ~0ULL;
    if (r->astream == s)
        from = r->amark;
    for (int i = 0; i < r->nvalid; i++)
        if (r->valid[i].s == s && r->valid[i].from < from)
            from = r->valid[i].from;
    if (from_p != NULL)
        *from_p = from;
    return from != ~0ULL && seq >= from;
}

void mock_order_wait(mstream_t *t, unsigned long long tseq, mstream_t *u, unsigned long long useq)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_REGIONS; i++) {
        struct region *r = &regions[i];
        unsigned long long from;
        if (r->base == NULL || r->tomb != 0 || r->astream == NULL || r->global || !ordered_on(r, u, useq, NULL))
            continue;
        if (ordered_on(r, t, tseq, &from) || (from != ~0ULL && from <= tseq))
            continue;
        if (r->nvalid == (int)(sizeof(r->valid) / sizeof(r->valid[0])))
            r->global = 1;   /* (more streams than the record holds: no longer checked) */
        else
            r->valid[r->nvalid].s = t, r->valid[r->nvalid++].from = tseq;
    }
    pthread_mutex_unlock(&lock);
}

void mock_order_seen(mstream_t *u, unsigned long long upto)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_REGIONS; i++) {
        struct region *r = &regions[i];
        if (r->base != NULL && r->astream != NULL && (u == NULL || ordered_on(r, u, upto, NULL)))
            r->global = 1;
    }
    pthread_mutex_unlock(&lock);
}

int mock_region_async_of(const void *p, void **base_p, size_t *len_p, mstream_t **s_p)
{
    struct region *r;
    int yes;
    pthread_mutex_lock(&lock);
    r = find_locked((uintptr_t)p, 1);
    yes = r != NULL && r->astream != NULL;
    if (yes) {
        *base_p = r->base;
        *len_p = r->len;
        *s_p = r->astream;
    }
    pthread_mutex_unlock(&lock);
    return yes;
}

/*
 * Every allocation of device memory, synchronous or stream-ordered: a
 * mapping that crashes on host access (unless MOCK_CUDA_HOST_ACCESSIBLE),
 * its zeroed shadow, and its region.  The one place that decides what
 * device memory is.
 */
void *mock_region_new(size_t bytes, int device, int managed)
{
    int open = host_accessible();
    size_t len = bytes ? bytes : 1;
    char *base = mmap(NULL, len, open ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *shadow;
    if (base == MAP_FAILED)
        return NULL;
    shadow = open ? base : calloc(1, len);
    if (shadow == NULL || region_add(base, len, shadow, device, managed) == NULL) {
        if (!open)
            free(shadow);
        munmap(base, len);
        return NULL;
    }
    __atomic_store_n(&mock_initialized, 1, __ATOMIC_RELAXED);   /* as cudaMalloc initialises the driver */
    return base;
}

/* An opened region's mappings go only with its last close. */
static void region_drop(struct region *r)
{
    char name[64];
    if (r->ipc == IPC_NONE && r->shadow != r->base)
        free(r->shadow);
    if (r->ipc != IPC_NONE && r->shadow != r->base)
        munmap(r->shadow, page_round(r->len));
    if (r->ipc == IPC_EXPORTED) {
        seg_name(name, sizeof(name), (int)getpid(), r->serial);
        shm_unlink(name);
    }
    munmap(r->base, r->len);
    r->base = NULL;
}

int mock_region_free(void *p, const char *by)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_REGIONS && p != NULL; i++) {
        struct region *r = &regions[i];
        if (r->base != p || r->tomb != 0)
            continue;
        if (r->ipc == IPC_OPENED) {
            rc = -1;
        } else if (r->astream != NULL) {
            char name[64];
            r->tomb = ++tombs_made;
            ntombs++;
            snprintf(r->by, sizeof(r->by), "%s", by);
            if (r->ipc == IPC_EXPORTED) {   /* (its peers keep their maps) */
                seg_name(name, sizeof(name), (int)getpid(), r->serial);
                shm_unlink(name);
            }
        } else {
            region_drop(r);
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* ---------------------------------------------------------------- IPC */

/* The process ends: its segments' names go (its peers keep their maps). */
void mock_ipc_unlink(void)
{
    char name[64];
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_REGIONS; i++)
        if (regions[i].base != NULL && regions[i].ipc == IPC_EXPORTED) {
            seg_name(name, sizeof(name), (int)getpid(), regions[i].serial);
            shm_unlink(name);
        }
    pthread_mutex_unlock(&lock);
}

int mock_pid_gone(int pid)
{
    char path[64], line[256], *p;
    FILE *f;
    int zombie = 0;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fgets(line, sizeof(line), f) != NULL && (p = strrchr(line, ')')) != NULL)
        zombie = p[1] == ' ' && p[2] == 'Z';
    fclose(f);
    return zombie;
}

void mock_shm_sweep(const char *prefix)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    size_t n = strlen(prefix);
    while (d != NULL && (e = readdir(d)) != NULL) {
        char name[300];
        int pid = strncmp(e->d_name, prefix, n) == 0 ? atoi(e->d_name + n) : 0;
        if (pid > 0 && mock_pid_gone(pid)) {
            snprintf(name, sizeof(name), "/%s", e->d_name);
            shm_unlink(name);
        }
    }
    if (d != NULL)
        closedir(d);
}

/* Move r's shadow into a new shared-memory segment (under lock, with no
 * entry running). */
static CUresult share(struct region *r)
{
    static int first = 1;
    size_t maplen = page_round(r->len);
    char name[64], *m;
    int fd, flags = MAP_SHARED | (r->shadow == r->base ? MAP_FIXED : 0);
    if (first) {
        first = 0;
        mock_shm_sweep(IPC_PREFIX);
        atexit(mock_ipc_unlink);
    }
    r->serial = ++next_serial;
    seg_name(name, sizeof(name), (int)getpid(), r->serial);
    shm_unlink(name);
    if ((fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600)) < 0)
        return ERR_OUT_OF_MEMORY;
    if (ftruncate(fd, (off_t)maplen) != 0 ||
        (m = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        close(fd);
        shm_unlink(name);
        return ERR_OUT_OF_MEMORY;
    }
    memcpy(m, r->shadow, r->len);
    if (flags & MAP_FIXED) {
        /* host-accessible memory keeps its address: the segment over it */
        munmap(m, maplen);
        m = mmap(r->base, maplen, PROT_READ | PROT_WRITE, flags, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            shm_unlink(name);
            return ERR_OUT_OF_MEMORY;
        }
    } else {
        free(r->shadow);
    }
    close(fd);
    r->shadow = m;
    r->ipc = IPC_EXPORTED;
    return SUCCESS;
}

API CUresult cuIpcGetMemHandle(cu_ipc_handle_t *h, CUdeviceptr p)
{
    struct region *r;
    ipc_handle_t ih = {.magic = IPC_MAGIC, .pid = (int32_t)getpid()};
    CUresult rc = SUCCESS;
    if (h == NULL)
        return ERR_INVALID_VALUE;
    mock_wfg_open();
    mock_quiesce(1);
    pthread_mutex_lock(&lock);
    r = find_locked((uintptr_t)p, 1);
    if (r == NULL || r->ipc == IPC_OPENED)
        rc = ERR_INVALID_VALUE;
    else if (r->ipc == IPC_NONE)
        rc = share(r);
    if (rc == SUCCESS) {
        ih.serial = r->serial;
        ih.len = r->len;
        ih.offset = (uint64_t)((uintptr_t)p - (uintptr_t)r->base);
    }
    pthread_mutex_unlock(&lock);
    mock_quiesce(0);
    if (rc != SUCCESS)
        return rc;
    memset(h, 0, sizeof(*h));
    memcpy(h->b, &ih, sizeof(ih));
    return SUCCESS;
}

API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, cu_ipc_handle_t h, unsigned int flags)
{
    ipc_handle_t ih;
    struct region *r = NULL;
    char name[64], *base, *shadow;
    size_t maplen;
    struct stat st;
    int fd;
    (void)flags;   /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: one device */
    memcpy(&ih, h.b, sizeof(ih));
    if (p == NULL || ih.magic != IPC_MAGIC || ih.offset >= ih.len)
        return ERR_INVALID_VALUE;
    if (mock_current() == NULL)
        return ERR_INVALID_CONTEXT;
    if (ih.pid == (int32_t)getpid())
        return ERR_INVALID_CONTEXT;   /* as the driver: not in the exporting process */
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_REGIONS && r == NULL; i++)
        if (regions[i].base != NULL && regions[i].ipc == IPC_OPENED && regions[i].pid == ih.pid &&
            regions[i].serial == ih.serial)
            r = &regions[i];
    if (r != NULL) {   /* opened before: the same mapping, counted */
        r->refs++;
        *p = (CUdeviceptr)(uintptr_t)(r->base + ih.offset);
        pthread_mutex_unlock(&lock);
        return SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    seg_name(name, sizeof(name), ih.pid, ih.serial);
    maplen = page_round((size_t)ih.len);
    if ((fd = shm_open(name, O_RDWR, 0)) < 0)
        return ERR_INVALID_HANDLE;   /* freed, or its process ended */
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < maplen ||
        (shadow = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        close(fd);
        return ERR_INVALID_HANDLE;
    }
    close(fd);
    base = host_accessible() ? shadow : mmap(NULL, maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED || (r = region_add(base, (size_t)ih.len, shadow, mock_ctx_device(mock_current()), 0)) == NULL) {
        if (base != MAP_FAILED && base != shadow)
            munmap(base, maplen);
        munmap(shadow, maplen);
        return ERR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&lock);
    r->ipc = IPC_OPENED;
    r->pid = ih.pid;
    r->serial = ih.serial;
    r->refs = 1;
    pthread_mutex_unlock(&lock);
    mock_wfg_peer(ih.pid);
    *p = (CUdeviceptr)(uintptr_t)(base + ih.offset);
    return SUCCESS;
}

API CUresult cuIpcCloseMemHandle(CUdeviceptr p)
{
    struct region *r;
    CUresult rc = ERR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    r = find_locked((uintptr_t)p, 1);
    if (r != NULL && r->ipc == IPC_OPENED) {
        rc = SUCCESS;
        if (--r->refs == 0)
            region_drop(r);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* ------------------------------------------------------------ test API */

API void *mock_cuda_malloc_managed(size_t bytes, int device, int managed)
{
    return mock_region_new(bytes, device, managed);
}

API void *mock_cuda_malloc(size_t bytes, int device)
{
    return mock_region_new(bytes, device, 0);
}

/* As cudaFree: a device-wide synchronisation first. */
API void mock_cuda_free(void *p)
{
    mock_device_sync("cudaFree");
    mock_region_free(p, "cudaFree");
}

/* Host-side access to device memory, for the tests' checks: only what has
 * run is there (nothing is run for it; wait for the stream first). */
API int mock_cuda_write(void *dev, const void *src, size_t n)
{
    char *h = shadow_range(dev, n);
    if (h == NULL)
        return -1;
    memcpy(h, src, n);
    return 0;
}

API int mock_cuda_read(void *dst, const void *dev, size_t n)
{
    char *h = shadow_range(dev, n);
    if (h == NULL)
        return -1;
    memcpy(dst, h, n);
    return 0;
}

/* The host shadow of a device address (p itself for host memory): the
 * emulated CUDA module (tests/gpu/emu/hp_kern_emu.c) runs its kernels on it, the
 * stand-in NCCL moves its bytes.  Freed stream-ordered memory stops the
 * process, naming the entry that touches it and the free. */
API void *mock_cuda_shadow(const void *p)
{
    struct region *r;
    char *h = NULL, by[160], who[240];
    const mstream_t *s = NULL;
    unsigned long long seq = 0, mark = 0;
    int unordered = 0, aid = 0;
    mock_running_entry(&s, &seq);
    pthread_mutex_lock(&lock);
    if ((r = find_any((uintptr_t)p, 1)) != NULL) {
        h = r->shadow + ((const char *)p - r->base);
        if (r->tomb != 0) {
            snprintf(by, sizeof(by), "%s", r->by);
            h = NULL;
        } else if (r->astream != NULL && !r->global && s != NULL && !ordered_on(r, s, seq, NULL)) {
            unordered = 1;
            aid = r->astream->id;
            mark = r->amark;
        }
    }
    pthread_mutex_unlock(&lock);
    if (r != NULL && (h == NULL || unordered))
        mock_running(who, sizeof(who));
    if (r != NULL && h == NULL)
        mock_rule_broken("%s uses device memory at %p after its free (%s): stream-ordered memory may be "
                         "accessed only between its allocation and its free in stream order (CUDA Driver API, "
                         "Stream Ordered Memory Allocator)", who, p, by);
    if (unordered)
        mock_rule_broken("%s uses device memory at %p, allocated by cuMemAllocAsync on stream %d (its entry #%llu), "
                         "with no event ordering it after the allocation and no host synchronisation since: memory "
                         "of the stream-ordered allocator is valid only in its stream's order (CUDA Driver API, "
                         "cuMemAllocAsync; CUDA Programming Guide, Stream-Ordered Memory Allocator)", who, p, aid,
                         mark);
    return h != NULL ? h : (void *)(uintptr_t)p;
}

void *mock_shadow(const void *p)
{
    return mock_cuda_shadow(p);
}
