"""A PyTorch DDP comm hook that runs each gradient bucket through hipress.

    from hipress.torch import allreduce_hook
    ddp = torch.nn.parallel.DistributedDataParallel(model)      # process group gloo, CPU tensors
    ddp.register_comm_hook(None, allreduce_hook)

in a job started under mpirun (doc/recipes.md).  Each bucket is summed over
the ranks by hipress' compressed collective over MPI (HIPRESS_COMPRESSOR and
every other HIPRESS_* setting apply, as do HIPRESS_STATS), with error
feedback kept per bucket, and divided by the number of ranks, as DDP's own
hooks average.  The exchange runs on a thread of its own, in bucket order:
the hook returns a future at once, so the exchange overlaps the rest of the
backward pass.  Every rank ends with the same bits.

Buckets that are not float32 CPU tensors go to DDP's own allreduce
(process group) unchanged; CUDA buckets are refused (use libhipress_nccl.so
under torchrun for those).  A rank whose buckets differ from the others'
(another layout, a bucket more or less) fails the step on every rank with
HipressError instead of hanging; so does any failed exchange, and the hook
then refuses further buckets.
"""
import atexit
import ctypes
import queue
import threading

import torch
import torch.distributed as dist

from ._lib import HipressError, mpi_ready

__all__ = ["allreduce_hook", "HipressError"]


class _Exchange:
    """The progress thread: opens the hook's communicator, then runs the
    buckets handed to it, one at a time, in the order they came."""

    def __init__(self):
        self.lib = mpi_ready()
        self.jobs = queue.SimpleQueue()
        self.opened = threading.Event()
        self.error = None
        self.hook = ctypes.c_void_p()
        self.rank = self.size = None
        self.thread = threading.Thread(target=self._run, name="hipress-ddp", daemon=True)
        self.thread.start()
        self.opened.wait()
        if self.error is not None:
            raise self.error
        atexit.register(self.close)

    def _run(self):
        lib = self.lib
        st = lib.hipress_hook_open(ctypes.byref(self.hook))
        if st != 0:
            self.error = HipressError("hipress: the DDP hook could not start: %s (see the hipress warning above)"
                                      % lib.hipress_status_string(st).decode())
            self.opened.set()
            return
        r, n = ctypes.c_int(), ctypes.c_int()
        lib.hipress_hook_size(self.hook, ctypes.byref(r), ctypes.byref(n))
        self.rank, self.size = r.value, n.value
        self.opened.set()
        while True:
            job = self.jobs.get()
            if job is None:
                break
            fut, buf, index, last, layout = job
            if self.error is None:
                st = lib.hipress_hook_allreduce(self.hook, ctypes.c_void_p(buf.data_ptr()), buf.numel(), index,
                                                int(last), layout, 1)
                if st != 0:
                    self.error = HipressError(
                        "hipress: the exchange of DDP bucket %d (%d floats) failed on every rank: %s; every rank's "
                        "buckets must be the same (see the hipress warning above)"
                        % (index, buf.numel(), lib.hipress_status_string(st).decode()))
            if self.error is not None:
                fut.set_exception(self.error)
            else:
                fut.set_result(buf)
        lib.hipress_hook_close(self.hook)

    def submit(self, buf, index, last, layout):
        fut = torch.futures.Future()
        self.jobs.put((fut, buf, index, last, layout))
        return fut

    def close(self):
        if self.thread.is_alive():
            self.jobs.put(None)
            self.thread.join()


_exchange = None
_exchange_lock = threading.Lock()


def _get_exchange():
    global _exchange
    with _exchange_lock:
        if _exchange is None:
            _exchange = _Exchange()
        return _exchange


def _ddp_default(process_group, buf):
    """DDP's own allreduce of a bucket hipress does not take: the mean"""
    group = process_group if process_group is not None else dist.group.WORLD
    buf.div_(group.size())
    return dist.all_reduce(buf, group=group, async_op=True).get_future().then(lambda f: f.value()[0])


def allreduce_hook(process_group, bucket):
    """DDP comm hook: the mean of the bucket over the ranks, through hipress.

    ``process_group`` (the state given to ``register_comm_hook``): None for
    the whole job, or the DDP model's process group; it must span every
    rank of the mpirun job.  Returns a future at once; the bucket is reduced
    on hipress' progress thread.
    """
    buf = bucket.buffer()
    if buf.device.type != "cpu":
        raise HipressError("hipress.torch.allreduce_hook reduces CPU tensors (a gloo job under mpirun); this "
                           "bucket is on %s: for GPU tensors preload libhipress_nccl.so under torchrun "
                           "(doc/recipes.md)" % buf.device)
    if buf.dtype != torch.float32 or not buf.is_contiguous():
        return _ddp_default(process_group, buf)
    ex = _get_exchange()
    group_size = (process_group if process_group is not None else dist.group.WORLD).size()
    if group_size != ex.size:
        raise HipressError("hipress.torch.allreduce_hook: the DDP process group has %d ranks, the mpirun job %d; "
                           "the hook reduces over the whole job" % (group_size, ex.size))
    return ex.submit(buf, bucket.index(), bucket.is_last(), _layout(bucket))


def _layout(bucket):
    """a value that changes when DDP puts other tensors, or the same in
    another order, into the bucket (its rebuild after the first iteration):
    the error feedback of a bucket laid out again starts afresh"""
    h = 0
    for p in bucket.parameters():
        h = (h * 1000003 + p.data_ptr() * 31 + p.numel()) & 0xFFFFFFFFFFFFFFFF
    return h
