# SPDX-License-Identifier: MIT
# tilewave Python binding: runtimes, jobs, errors and the operations over numpy arrays or files.
import atexit
import contextvars
import ctypes
import os
import threading
import weakref

import numpy as np

from . import _lib
from ._lib import lib


class Error(Exception):
    """A tilewave failure: ``status`` is the tw_status name ("TW_E_INVALID"), ``code`` its
    number, ``message`` the library's one-line message."""

    def __init__(self, status, message):
        self.code = int(status)
        self.status = (_lib.STATUS_NAMES[self.code] if 0 <= self.code < len(_lib.STATUS_NAMES)
                       else f"tw_status {self.code}")
        self.message = message
        super().__init__(f"{self.status}: {message}" if message else self.status)


class Canceled(Error):
    """The job was canceled (TW_E_CANCELED)."""


def _raise(status, message):
    if status == _lib.TW_E_CANCELED:
        raise Canceled(status, message or "job canceled")
    raise Error(status, message)


def _check(status, err=None, what=""):
    if status != _lib.TW_OK:
        msg = err.message.decode(errors="replace") if err is not None else ""
        _raise(status, msg or what)


def _enc(path):
    return None if path is None else os.fsencode(path)


def _is_path(x):
    return isinstance(x, (str, bytes, os.PathLike))


def version():
    """Version string of the loaded library, e.g. "0.3.0"."""
    return lib.tw_version_string().decode()


def build_has_cuda():
    """True when the loaded library was built with CUDA (a GPU may still be absent)."""
    return bool(lib.tw_build_has_cuda())


# ---------------------------------------------------------------------------- config

def _config_keys():
    cfg = ctypes.c_void_p()
    _check(lib.tw_config_create(ctypes.byref(cfg)), what="config: out of memory")
    try:
        keys = []
        e = _lib.ConfigEntry()
        for i in range(lib.tw_config_count()):
            if lib.tw_config_describe(cfg, i, ctypes.byref(e)) == _lib.TW_OK:
                keys.append(e.key.decode())
        return keys
    finally:
        lib.tw_config_destroy(cfg)


_KEYS = None


def _key_name(name):
    """Map a Python keyword to a config key: cpu_workers -> runtime.cpu_workers,
    tile_size -> tile.size, edt_tile_size -> edt.tile_size; dotted names are kept."""
    global _KEYS
    if _KEYS is None:
        _KEYS = set(_config_keys())
    if "." in name:
        return name
    if "runtime." + name in _KEYS:
        return "runtime." + name
    if "_" in name:
        dotted = name.replace("_", ".", 1)
        if dotted in _KEYS:
            return dotted
    raise Error(_lib.TW_E_INVALID, f"config: unknown key '{name}' (neither runtime.{name} "
                "nor a section.key; pass dotted keys in a dict as config=)")


def _value_text(v):
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return f"{int(v[0])}x{int(v[1])}"
    return str(v)


# ---------------------------------------------------------------------------- runtime

_current = contextvars.ContextVar("tilewave_runtime", default=None)
_default = None
_default_lock = threading.Lock()


class Runtime:
    """The tilewave runtime: worker threads pinned to cores (and GPUs).

    ``config``: None, the path of an INI file, or a dict of dotted keys
    ({"tile.size": "256x256"}). ``keys``: runtime keys by their short name
    (``cpu_workers=2, gpus="none"``) or section_key (``tile_size=(256, 256)``).
    TILEWAVE_* environment variables apply as for the CLI (below explicit keys).
    A ``with`` block makes it the runtime that operations use by default.
    """

    def __init__(self, config=None, **keys):
        self._rt = None
        self._jobs = weakref.WeakSet()
        self._lock = threading.Lock()
        self._tokens = []
        cfg = ctypes.c_void_p()
        _check(lib.tw_config_create(ctypes.byref(cfg)), what="config: out of memory")
        err = _lib.Error()
        try:
            settings = {}
            if isinstance(config, dict):
                settings.update({str(k): v for k, v in config.items()})
            elif config is not None:
                if not _is_path(config):
                    raise TypeError("tilewave.Runtime: config must be None, a path to an INI "
                                    f"file or a dict, not {type(config).__name__}")
                _check(lib.tw_config_load_file(cfg, _enc(config), ctypes.byref(err)), err)
            _check(lib.tw_config_load_env(cfg, ctypes.byref(err)), err)
            for k, v in keys.items():
                settings[_key_name(k)] = v
            for k, v in settings.items():
                _check(lib.tw_config_set(cfg, k.encode(), _value_text(v).encode(),
                                         _lib.TW_CONFIG_SET, ctypes.byref(err)), err)
            rt = ctypes.c_void_p()
            _check(lib.tw_runtime_create(cfg, ctypes.byref(rt), ctypes.byref(err)), err)
            self._rt = rt
        finally:
            lib.tw_config_destroy(cfg)

    @property
    def closed(self):
        return self._rt is None

    def _handle(self):
        if self._rt is None:
            raise Error(_lib.TW_E_INVALID, "runtime: closed")
        return self._rt

    @property
    def workers(self):
        """Number of worker threads."""
        return lib.tw_runtime_get_worker_count(self._handle())

    @property
    def config(self):
        """The configuration in effect: {key: value text}."""
        cfg = lib.tw_runtime_get_config(self._handle())
        out = {}
        e = _lib.ConfigEntry()
        for i in range(lib.tw_config_count()):
            if lib.tw_config_describe(cfg, i, ctypes.byref(e)) == _lib.TW_OK:
                out[e.key.decode()] = e.value.decode() if e.value else ""
        return out

    def close(self):
        """Cancel and destroy this runtime's unfinished jobs, then stop the workers."""
        with self._lock:
            rt, self._rt = self._rt, None
        if rt is None:
            return
        for job in list(self._jobs):
            job._destroy()
        lib.tw_runtime_destroy(rt)

    def __enter__(self):
        self._tokens.append(_current.set(self))
        return self

    def __exit__(self, *exc):
        if self._tokens:
            _current.reset(self._tokens.pop())
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<tilewave.Runtime closed>" if self.closed else \
            f"<tilewave.Runtime {self.workers} workers>"


def default_runtime():
    """The runtime operations use outside a ``with Runtime()`` block: created on first use
    with the defaults and the TILEWAVE_* environment, closed at exit."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Runtime()
        return _default


@atexit.register
def _close_default():
    if _default is not None:
        _default.close()


def _runtime(rt):
    if rt is not None:
        if not isinstance(rt, Runtime):
            raise TypeError(f"tilewave: runtime must be a tilewave.Runtime, not "
                            f"{type(rt).__name__}")
        return rt
    cur = _current.get()
    if cur is not None and not cur.closed:
        return cur
    return default_runtime()


# ---------------------------------------------------------------------------- jobs

class Job:
    """A submitted operation. ``wait()`` returns its result (a numpy array, a tuple of them,
    or None for file outputs) or raises Error / Canceled; ``cancel()`` asks it to stop.
    It holds the input and output arrays until it is closed."""

    def __init__(self, runtime, submit, opts, keep, result, progress, interval_ms):
        self._runtime = runtime
        self._keep = (opts, keep)       # the C side reads these until the job ends
        self._result = result
        self._progress_fn = progress
        self._cb = None
        self._cb_error = None
        self._last_done = -1
        self._cb_lock = threading.Lock()
        self._status = None
        self._job = None
        err = _lib.Error()
        job = ctypes.c_void_p()
        _check(submit(runtime._handle(), ctypes.byref(opts), ctypes.byref(job),
                      ctypes.byref(err)), err)
        self._job = job
        runtime._jobs.add(self)
        if progress is not None:
            self._cb = _lib.PROGRESS_FN(self._on_progress)
            st = lib.tw_job_set_progress_callback(job, self._cb, None, int(interval_ms))
            if st != _lib.TW_OK:
                self._destroy()
                _raise(st, "job: cannot set the progress callback")

    def _on_progress(self, _job, p, _user):
        # Runs on a runtime thread (ctypes takes the GIL). Periodic calls may overlap or come
        # out of order; only increasing `done` values (and the final call) reach the user.
        try:
            pr = p.contents
            done, total, eta, fin = pr.done, pr.total, pr.eta_s, pr.finished
            with self._cb_lock:
                if done < self._last_done or (done == self._last_done and not fin):
                    return
                self._last_done = done
                ret = self._progress_fn(int(done), int(total), eta if eta >= 0 else None)
            if ret is False and not fin:
                lib.tw_job_cancel(_job)
        except BaseException as e:  # an exception cannot cross into C: cancel, re-raise later
            if self._cb_error is None:
                self._cb_error = e
            lib.tw_job_cancel(_job)

    @property
    def done(self):
        """True once the job has ended (successfully or not)."""
        if self._status is not None:
            return True
        if self._job is None:
            return True
        return lib.tw_job_wait(self._job, 0) != _lib.TW_E_TIMEOUT

    def progress(self):
        """(done, total, eta_seconds or None) now."""
        if self._job is None:
            return (0, 0, None)
        p = _lib.Progress()
        lib.tw_job_get_progress(self._job, ctypes.byref(p))
        return (int(p.done), int(p.total), p.eta_s if p.eta_s >= 0 else None)

    def cancel(self):
        """Ask the job to stop; wait() then raises Canceled. Returns at once."""
        if self._job is not None and self._status is None:
            lib.tw_job_cancel(self._job)

    def wait(self, timeout=None):
        """Wait for the end and return the result. With ``timeout`` (seconds) raise
        TimeoutError when it runs out first (the job goes on). Ctrl-C cancels the job."""
        if self._status is None:
            if self._job is None:
                raise Error(_lib.TW_E_INVALID, "job: closed")
            import time
            end = None if timeout is None else time.monotonic() + timeout
            while True:
                slice_ms = 200
                if end is not None:
                    left = end - time.monotonic()
                    if left <= 0:
                        raise TimeoutError("tilewave: job still running")
                    slice_ms = max(1, min(slice_ms, int(left * 1000)))
                try:
                    st = lib.tw_job_wait(self._job, slice_ms)  # the GIL is released here
                except KeyboardInterrupt:
                    self.cancel()
                    lib.tw_job_wait(self._job, -1)
                    raise
                if st != _lib.TW_E_TIMEOUT:
                    break
            msg = lib.tw_job_get_error(self._job)
            self._message = msg.decode(errors="replace") if msg else ""
            self._status = st
        if self._cb_error is not None:
            raise self._cb_error
        if self._status != _lib.TW_OK:
            _raise(self._status, self._message)
        return self._result

    result = wait

    def _destroy(self):
        job, self._job = self._job, None
        if job is not None:
            lib.tw_job_destroy(job)   # cancels and waits when unfinished
        self._keep = None

    def close(self):
        """Destroy the job (canceling it if unfinished) and drop its buffers."""
        self._destroy()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self._destroy()
        except Exception:
            pass


def _run(runtime, submit, opts, keep, result, progress, wait, interval=0.05):
    if progress is not None and not callable(progress):
        raise TypeError("tilewave: progress must be callable(done, total, eta)")
    if not interval >= 0:
        raise ValueError(f"tilewave: progress_interval must be >= 0 seconds (got {interval})")
    job = Job(_runtime(runtime), submit, opts, keep, result, progress, int(interval * 1000))
    if not wait:
        return job
    try:
        return job.wait()
    finally:
        job.close()


# ---------------------------------------------------------------------------- images

_TYPES = {np.dtype(np.uint8): _lib.TW_U8, np.dtype(np.uint16): _lib.TW_U16,
          np.dtype(np.uint32): _lib.TW_U32, np.dtype(np.float32): _lib.TW_F32,
          np.dtype(np.uint64): _lib.TW_U64}
_DTYPES = {v: k for k, v in _TYPES.items()}


def _array(op, name, a, allowed):
    """A C-contiguous native-order 2-D array of an allowed dtype, or a clear error."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"tilewave.{op}: {name} must be a numpy array or a path, not "
                        f"{type(a).__name__}")
    if a.ndim != 2:
        raise ValueError(f"tilewave.{op}: {name} must be 2-D (one channel), got shape "
                         f"{a.shape}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"tilewave.{op}: {name} is empty (shape {a.shape})")
    if a.dtype == np.bool_ and np.dtype(np.uint8) in allowed:
        a = a.view(np.uint8)  # masks: False/True -> 0/1
    dt = a.dtype.newbyteorder("=") if a.dtype.byteorder not in "=|" else a.dtype
    if dt not in allowed:
        raise TypeError(f"tilewave.{op}: {name} dtype {a.dtype} is not supported (use "
                        + ", ".join(str(np.dtype(d)) for d in allowed) + ")")
    return np.ascontiguousarray(a, dtype=dt)


def _host(a):
    h = _lib.HostImage()
    h.data = a.ctypes.data
    h.h, h.w = a.shape
    h.stride = a.strides[0]
    h.type = _TYPES[a.dtype]
    return h


def _parse(fn, what, name):
    v = ctypes.c_int()
    if fn(str(name).encode(), ctypes.byref(v)) != _lib.TW_OK:
        raise ValueError(f"tilewave: unknown {what} '{name}'")
    return v.value


def _tile(opts, tile):
    if tile is None:
        return
    if isinstance(tile, int):
        tile = (tile, tile)
    opts.tile_w, opts.tile_h = int(tile[0]), int(tile[1])


def _init(init, cls):
    o = cls()
    init(ctypes.byref(o))
    if o.struct_size != ctypes.sizeof(cls):
        raise ImportError(f"tilewave: {cls.__name__} is {o.struct_size} bytes in the library, "
                          f"{ctypes.sizeof(cls)} in the binding (headers out of step)")
    return o


def _set_input(inp, path, level):
    inp.path = _enc(path)
    inp.level = int(level)


def _set_output(out, path, compression):
    out.path = _enc(path)
    if compression is not None:
        out.compression = _parse(lib.tw_compression_parse, "compression", compression)
        out.compression_set = True


def info(path):
    """Describe a slide or TIFF: {"format", "levels": [(w, h, downsample)...], "channels",
    "dtype", "mpp": (x, y)}."""
    s = _open(path)
    try:
        levels = []
        li = _lib.LevelInfo()
        for k in range(lib.tw_slide_get_level_count(s)):
            _check(lib.tw_slide_get_level(s, k, ctypes.byref(li)))
            levels.append((int(li.w), int(li.h), float(li.downsample)))
        mx, my = ctypes.c_double(), ctypes.c_double()
        lib.tw_slide_get_mpp(s, ctypes.byref(mx), ctypes.byref(my))
        return {"format": lib.tw_slide_get_format(s).decode(), "levels": levels,
                "channels": lib.tw_slide_get_channels(s),
                "dtype": _DTYPES.get(lib.tw_slide_get_sample_type(s)),
                "mpp": (mx.value, my.value)}
    finally:
        lib.tw_slide_close(s)


def _open(path):
    s = ctypes.c_void_p()
    err = _lib.Error()
    _check(lib.tw_slide_open(_enc(path), 0, ctypes.byref(s), ctypes.byref(err)), err)
    return s


def read(path, level=0):
    """Read a whole level of a slide or TIFF: (h, w) or (h, w, channels) array."""
    s = _open(path)
    try:
        li = _lib.LevelInfo()
        if lib.tw_slide_get_level(s, int(level), ctypes.byref(li)) != _lib.TW_OK:
            raise ValueError(f"tilewave.read: no level {level} in '{os.fsdecode(path)}'")
        ch = lib.tw_slide_get_channels(s)
        dt = _DTYPES[lib.tw_slide_get_sample_type(s)]
        shape = (li.h, li.w) if ch == 1 else (li.h, li.w, ch)
        a = np.empty(shape, dtype=dt)
        err = _lib.Error()
        _check(lib.tw_slide_read_region(s, int(level), 0, 0, li.w, li.h, a.ctypes.data,
                                        a.strides[0], ctypes.byref(err)), err)
        return a
    finally:
        lib.tw_slide_close(s)


def _gray_shape(path, level):
    """Size and one-channel dtype of a level as the operations read it (RGB -> gray)."""
    d = info(path)
    if not 0 <= level < len(d["levels"]):
        raise ValueError(f"tilewave: no level {level} in '{os.fsdecode(path)}'")
    w, h, _ = d["levels"][level]
    return (h, w), d["dtype"]


def sample(path, size=(8192, 6144), seed=1, tile=256, compression="deflate"):
    """Write the deterministic synthetic tissue-like slide (8-bit RGB pyramid) to ``path``."""
    o = _init(lib.tw_sample_opts_init, _lib.SampleOpts)
    o.w, o.h = int(size[0]), int(size[1])
    o.seed = int(seed)
    o.tile = int(tile)
    o.compression = _parse(lib.tw_compression_parse, "compression", compression)
    err = _lib.Error()
    _check(lib.tw_sample_write(_enc(path), ctypes.byref(o), ctypes.byref(err)), err)


# ---------------------------------------------------------------------------- operations

_U8_U16 = (np.dtype(np.uint8), np.dtype(np.uint16))
_EDT_IN = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.float32))
_COMMON_DOC = """
    Inputs are 2-D numpy arrays or paths of slides/TIFFs (``level`` picks the level; colour is
    converted to luminance). ``out``: None returns a numpy array; a path writes a tiled BigTIFF
    there (``compression`` as the CLI's) and returns None. ``runtime``: the runtime (default:
    the innermost ``with Runtime()`` block, else default_runtime()). ``progress``:
    callable(done, total, eta_seconds_or_None), called from a runtime thread with increasing
    ``done``, at most every ``progress_interval`` seconds (0: every step) and once at the end;
    returning False cancels the job (which then raises Canceled). ``wait=False``
    returns a Job instead of the result. ``tile``: the tile size (int or (w, h)).
"""


def _src(op, name, a, allowed, inp, img, level):
    """Point an input at a path or an array; return (array or None, shape, dtype)."""
    if _is_path(a):
        _set_input(inp, a, level)
        shape, dt = _gray_shape(a, level)
        return None, shape, dt
    arr = _array(op, name, a, allowed)
    img_fields = _host(arr)
    ctypes.memmove(ctypes.addressof(img), ctypes.addressof(img_fields), ctypes.sizeof(img))
    return arr, arr.shape, arr.dtype


def _dst(o_output, o_result, out, compression, shape, dtype):
    if out is not None:
        if not _is_path(out):
            raise TypeError(f"tilewave: out must be a path or None, not {type(out).__name__}")
        _set_output(o_output, out, compression)
        return None
    res = np.empty(shape, dtype=dtype)
    h = _host(res)
    ctypes.memmove(ctypes.addressof(o_result), ctypes.addressof(h), ctypes.sizeof(h))
    return res


def reconstruct(marker, mask, out=None, *, method="dilation", conn=8, clamp=False, level=0,
                tile=None, compression=None, runtime=None, progress=None,
                progress_interval=0.05, wait=True):
    """Grayscale morphological reconstruction of ``marker`` under ``mask`` (by dilation, or
    ``method="erosion"``), 4- or 8-connected; uint8 or uint16, the same shape and dtype.
    Equal to scikit-image ``reconstruction``."""
    o = _init(lib.tw_mrecon_opts_init, _lib.MreconOpts)
    mk, mshape, mdt = _src("reconstruct", "marker", marker, _U8_U16, o.marker,
                           o.marker_image, level)
    ms, shape, dt = _src("reconstruct", "mask", mask, _U8_U16, o.mask, o.mask_image, level)
    if mk is not None and ms is not None:
        if mk.shape != ms.shape:
            raise ValueError(f"tilewave.reconstruct: marker shape {mk.shape} != mask shape "
                             f"{ms.shape}")
        if mk.dtype != ms.dtype:
            raise TypeError(f"tilewave.reconstruct: marker dtype {mk.dtype} != mask dtype "
                            f"{ms.dtype}")
    o.method = _parse(lib.tw_mrecon_method_parse, "reconstruction method", method)
    o.conn = int(conn)
    o.clamp_marker = bool(clamp)
    _tile(o, tile)
    res = _dst(o.output, o.result, out, compression, shape, dt)
    return _run(runtime, lib.tw_mrecon_submit, o, (mk, ms, res), res, progress, wait,
                progress_interval)


def _rfilter(op, submit, image, out, result_dtype, conn, level, tile, compression, runtime,
             progress, wait, progress_interval, **fields):
    o = _init(lib.tw_rfilter_opts_init, _lib.RfilterOpts)
    arr, shape, dt = _src(op, "image", image, _U8_U16, o.input, o.image, level)
    for k, v in fields.items():
        setattr(o, k, v)
    o.conn = int(conn)
    _tile(o, tile)
    res = _dst(o.output, o.result, out, compression, shape, result_dtype or dt)
    return _run(runtime, submit, o, (arr, res), res, progress, wait, progress_interval)


def fill_holes(image, out=None, *, conn=0, level=0, tile=None, compression=None, runtime=None,
               progress=None, progress_interval=0.05, wait=True):
    """Fill the holes (regional minima not connected to the border); uint8/uint16."""
    return _rfilter("fill_holes", lib.tw_fill_holes_submit, image, out, None, conn, level,
                    tile, compression, runtime, progress, wait, progress_interval)


def hmax(image, h, out=None, *, dome=False, conn=0, level=0, tile=None, compression=None,
         runtime=None, progress=None, progress_interval=0.05, wait=True):
    """h-maxima (uint8 0/1 image), or the h-dome image with ``dome=True``."""
    if int(h) < 1:
        raise ValueError(f"tilewave.hmax: h must be >= 1 (got {h})")
    return _rfilter("hmax", lib.tw_hmax_submit, image, out, None if dome else np.uint8, conn,
                    level, tile, compression, runtime, progress, wait, progress_interval,
                    h=int(h), dome=bool(dome))


def regional_max(image, out=None, *, conn=0, level=0, tile=None, compression=None,
                 runtime=None, progress=None, progress_interval=0.05, wait=True):
    """Regional maxima (uint8 0/1 image)."""
    return _rfilter("regional_max", lib.tw_regional_max_submit, image, out, np.uint8, conn,
                    level, tile, compression, runtime, progress, wait, progress_interval)


def open_rec(image, radius, out=None, *, conn=0, level=0, tile=None, compression=None,
             runtime=None, progress=None, progress_interval=0.05, wait=True):
    """Opening by reconstruction with the (2 radius + 1) square."""
    return _rfilter("open_rec", lib.tw_open_rec_submit, image, out, None, conn, level, tile,
                    compression, runtime, progress, wait, progress_interval,
                    radius=int(radius))


def close_rec(image, radius, out=None, *, conn=0, level=0, tile=None, compression=None,
              runtime=None, progress=None, progress_interval=0.05, wait=True):
    """Closing by reconstruction with the (2 radius + 1) square."""
    return _rfilter("close_rec", lib.tw_close_rec_submit, image, out, None, conn, level, tile,
                    compression, runtime, progress, wait, progress_interval,
                    radius=int(radius))


_EDT_DTYPES = {0: np.float32, 1: np.uint16, 2: np.uint32}


def edt(image, out=None, *, threshold=0.0, otsu=False, invert=False, spacing=None,
        format="f32", method="exact", indices=False, level=0, tile=None, compression=None,
        runtime=None, progress=None, progress_interval=0.05, wait=True):
    """Exact Euclidean distance transform of the foreground (value > ``threshold``, or Otsu's
    threshold with ``otsu=True``; ``invert`` swaps): equal to SciPy
    ``distance_transform_edt(image > threshold, sampling=(sy, sx))``. ``spacing``: a number,
    (sx, sy) or "auto" (the slide's mpp). ``format``: "f32" (float32), "u16" or "sq32" (exact
    squared distances, uint32). ``indices=True`` also returns the nearest background pixel
    of every pixel as a (h, w, 2) uint32 array (row, column); with ``out`` a path,
    ``indices`` may be a path too."""
    o = _init(lib.tw_edt_opts_init, _lib.EdtOpts)
    arr, shape, _ = _src("edt", "image", image, _EDT_IN, o.input, o.image, level)
    o.threshold = float(threshold)
    o.threshold_otsu = bool(otsu)
    o.invert = bool(invert)
    if spacing == "auto":
        o.spacing_auto = True
    elif spacing is not None:
        sx, sy = (spacing, spacing) if np.isscalar(spacing) else spacing
        o.spacing_x, o.spacing_y = float(sx), float(sy)
    o.format = _parse(lib.tw_edt_format_parse, "EDT format", format)
    o.method = _parse(lib.tw_edt_method_parse, "EDT method", method)
    _tile(o, tile)
    res = _dst(o.output, o.result, out, compression, shape, _EDT_DTYPES[o.format])
    idx = None
    if _is_path(indices):
        o.indices_path = _enc(indices)
    elif indices:
        idx = np.empty((shape[0], shape[1], 2), dtype=np.uint32)
        o.indices.data = idx.ctypes.data
        o.indices.h, o.indices.w = shape
        o.indices.stride = idx.strides[0]
        o.indices.type = _lib.TW_U32
    result = (res, idx) if idx is not None else res
    return _run(runtime, lib.tw_edt_submit, o, (arr, res, idx), result, progress, wait,
                progress_interval)


def attr_filter(image, filter, threshold, out=None, *, conn=4, level=0, tile=None,
                compression=None, runtime=None, progress=None, progress_interval=0.05,
                wait=True):
    """Attribute filter ``filter`` ("area-open", "area-close", "height-open",
    "height-close") with ``threshold`` (pixels or levels); uint8/uint16."""
    o = _init(lib.tw_attr_filter_opts_init, _lib.AttrFilterOpts)
    arr, shape, dt = _src("attr_filter", "image", image, _U8_U16, o.input, o.image, level)
    o.filter = _parse(lib.tw_attr_filter_parse, "attribute filter", filter)
    if int(threshold) < 0:
        raise ValueError(f"tilewave.attr_filter: threshold must be >= 0 (got {threshold})")
    o.threshold = int(threshold)
    o.connectivity = int(conn)
    _tile(o, tile)
    res = _dst(o.output, o.result, out, compression, shape, dt)
    return _run(runtime, lib.tw_attr_filter_submit, o, (arr, res), res, progress, wait,
                progress_interval)


def area_open(image, area, out=None, **kw):
    """Area opening: bright components smaller than ``area`` pixels are flattened (=
    scikit-image ``area_opening(image, area, connectivity=1 for conn=4)``)."""
    return attr_filter(image, "area-open", area, out, **kw)


def area_close(image, area, out=None, **kw):
    """Area closing, the dual of area_open (= scikit-image ``area_closing``)."""
    return attr_filter(image, "area-close", area, out, **kw)


def gray(in_path, out_path, *, mode="luminance", level=0, tile=None, compression=None,
         runtime=None, progress=None, progress_interval=0.05, wait=True):
    """One channel of a slide ("luminance", "r", "g", "b", "hematoxylin", "eosin") written
    to ``out_path`` as a tiled BigTIFF (files only)."""
    if not _is_path(in_path) or not _is_path(out_path):
        raise TypeError("tilewave.gray: in_path and out_path must be paths")
    o = _init(lib.tw_gray_opts_init, _lib.GrayOpts)
    _set_input(o.input, in_path, level)
    _set_output(o.output, out_path, compression)
    o.mode = _parse(lib.tw_gray_mode_parse, "gray mode", mode)
    _tile(o, tile)
    return _run(runtime, lib.tw_gray_submit, o, (), None, progress, wait, progress_interval)


for _f in (reconstruct, fill_holes, hmax, regional_max, open_rec, close_rec, edt, attr_filter,
           gray):
    _f.__doc__ += _COMMON_DOC
