"""hipress for Python programs.

hipress compresses the gradient allreduce of data-parallel training.  Most
jobs only preload ``libhipress.so`` under ``mpirun``; this package is for
clients that hand their gradients to a hook of their own instead of calling
``MPI_Allreduce``:

* ``hipress.torch.allreduce_hook``: a PyTorch DDP comm hook
  (``ddp.register_comm_hook(None, allreduce_hook)``) for CPU tensors, in a
  job started under ``mpirun``.

``hipress.library()`` is the loaded ``libhipress.so`` (a ``ctypes.CDLL``).
"""
from ._lib import HipressError, library, status_string  # noqa: F401

__all__ = ["HipressError", "library", "status_string"]
