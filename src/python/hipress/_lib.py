"""Loading libhipress.so and initialising MPI through it."""
import atexit
import ctypes
import os
import threading

try:
    from ._paths import LIBDIR
except ImportError:   # a copy outside the build tree or the installation
    LIBDIR = None

_MPI_THREAD_SERIALIZED = 2   # the MPI standard's order: SINGLE, FUNNELED, SERIALIZED, MULTIPLE
_MPI_THREAD_MULTIPLE = 3
_lock = threading.Lock()
_lib = None


class HipressError(RuntimeError):
    """A hipress call failed; the message says which and why."""


def _loaded_in_process():
    """libhipress.so where it is loaded already (LD_PRELOAD), else None"""
    proc = ctypes.CDLL(None)
    try:
        proc.hipress_hook_open
    except AttributeError:
        return None
    return proc


def _load():
    lib = _loaded_in_process()
    if lib is not None:
        return lib
    names = []
    if LIBDIR:
        names.append(os.path.join(LIBDIR, "libhipress.so"))
    names.append("libhipress.so")
    errors = []
    for name in names:
        try:
            # RTLD_GLOBAL: the MPI library it brings serves the whole process
            return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append(str(e))
    raise HipressError("hipress: cannot load libhipress.so (%s); preload it (mpirun -x LD_PRELOAD=.../libhipress.so) "
                       "or install hipress with its Python package" % "; ".join(errors))


def _declare(lib):
    c = ctypes
    sigs = {
        "hipress_status_string": (c.c_char_p, [c.c_int]),
        "hipress_library": (c.c_char_p, []),
        "hipress_hook_open": (c.c_int, [c.POINTER(c.c_void_p)]),
        "hipress_hook_size": (c.c_int, [c.c_void_p, c.POINTER(c.c_int), c.POINTER(c.c_int)]),
        "hipress_hook_allreduce": (c.c_int, [c.c_void_p, c.c_void_p, c.c_size_t, c.c_int, c.c_int, c.c_ulonglong,
                                             c.c_int]),
        "hipress_hook_close": (c.c_int, [c.c_void_p]),
        "MPI_Initialized": (c.c_int, [c.POINTER(c.c_int)]),
        "MPI_Finalized": (c.c_int, [c.POINTER(c.c_int)]),
        "MPI_Query_thread": (c.c_int, [c.POINTER(c.c_int)]),
        "MPI_Init_thread": (c.c_int, [c.c_void_p, c.c_void_p, c.c_int, c.POINTER(c.c_int)]),
        "MPI_Finalize": (c.c_int, []),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args


def library():
    """The loaded libhipress.so (ctypes.CDLL), loaded on first use."""
    global _lib
    with _lock:
        if _lib is None:
            lib = _load()
            try:
                _declare(lib)
            except AttributeError as e:
                raise HipressError("hipress: the loaded library is not libhipress.so built with MPI (%s); "
                                   "libhipress_nccl.so has no MPI" % e) from None
            _lib = lib
        return _lib


def status_string(status):
    """hipress' description of a status code"""
    return library().hipress_status_string(status).decode()


def _under_mpirun():
    return any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"))


def mpi_ready():
    """MPI initialised at MPI_THREAD_SERIALIZED or above, through hipress.

    Initialises MPI (MPI_THREAD_MULTIPLE, finalised at exit) when the job was
    started under mpirun and nobody has yet; raises HipressError when the job
    was not started under mpirun, or MPI was initialised at a lower level.
    """
    lib = library()
    flag = ctypes.c_int(0)
    lib.MPI_Finalized(ctypes.byref(flag))
    if flag.value:
        raise HipressError("hipress: MPI is already finalised")
    lib.MPI_Initialized(ctypes.byref(flag))
    if not flag.value:
        if not _under_mpirun():
            raise HipressError("hipress: MPI is not initialised and this process was not started by mpirun; "
                               "start the job under mpirun (mpirun -np N -x LD_PRELOAD=.../libhipress.so python ...)")
        provided = ctypes.c_int(0)
        rc = lib.MPI_Init_thread(None, None, _MPI_THREAD_MULTIPLE, ctypes.byref(provided))
        if rc != 0:
            raise HipressError("hipress: MPI_Init_thread failed (error %d)" % rc)
        atexit.register(_finalize)
    level = ctypes.c_int(0)
    lib.MPI_Query_thread(ctypes.byref(level))
    if level.value < _MPI_THREAD_SERIALIZED:
        raise HipressError("hipress: MPI was initialised at thread level %d; the hook runs its exchanges on a thread "
                           "of its own and needs MPI_THREAD_SERIALIZED (2) or above: initialise MPI with "
                           "MPI_Init_thread (mpi4py does, with MPI_THREAD_MULTIPLE), or let hipress do it"
                           % level.value)
    return lib


def _finalize():
    lib = _lib
    if lib is None:
        return
    flag = ctypes.c_int(0)
    lib.MPI_Finalized(ctypes.byref(flag))
    if not flag.value:
        lib.MPI_Finalize()
