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
    """Version string of the loaded library, e.g. "0.6.0"."""
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
    def gpus(self):
        """The GPUs the runtime drives: [{"ordinal", "name", "memory"}] (bytes), [] for none."""
        out, g = [], _lib.GpuInfo()
        while lib.tw_runtime_get_gpu(self._handle(), len(out), ctypes.byref(g)) == _lib.TW_OK:
            out.append({"ordinal": g.ordinal, "name": g.name.decode(errors="replace"),
                        "memory": int(g.total_mem)})
        return out

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

    def __init__(self, runtime, submit, opts, keep, result, progress, interval_ms, finish=None):
        self._runtime = runtime
        self._keep = (opts, keep)       # the C side reads these until the job ends
        self._result = result
        self._finish = finish           # called once when the job has ended: (ok) -> result
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
            self._run_finish()
        if self._cb_error is not None:
            raise self._cb_error
        if self._status != _lib.TW_OK:
            _raise(self._status, self._message)
        return self._result

    result = wait

    def _run_finish(self):
        # Input reports, results read back from temporary files: once, after the end.
        fin, self._finish = self._finish, None
        if fin is not None:
            res = fin(self._status == _lib.TW_OK and self._cb_error is None)
            if res is not None:
                self._result = res

    def _destroy(self):
        job = self._job
        if job is not None and self._status is None:
            st = lib.tw_job_wait(job, 0)
            if st == _lib.TW_E_TIMEOUT:
                self._status, self._message = _lib.TW_E_CANCELED, "job closed before it ended"
            else:
                msg = lib.tw_job_get_error(job)
                self._status, self._message = st, msg.decode(errors="replace") if msg else ""
        self._job = None
        if job is not None:
            lib.tw_job_destroy(job)   # cancels and waits when unfinished
            self._run_finish()
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


def _run(runtime, submit, opts, keep, result, progress, wait, interval=0.05, finish=None):
    if progress is not None and not callable(progress):
        raise TypeError("tilewave: progress must be callable(done, total, eta)")
    if not interval >= 0:
        raise ValueError(f"tilewave: progress_interval must be >= 0 seconds (got {interval})")
    try:
        job = Job(_runtime(runtime), submit, opts, keep, result, progress, int(interval * 1000),
                  finish)
    except BaseException:
        if finish is not None:
            finish(False)  # refused at submission: remove temporary files
        raise
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


_CHOICES = {"compression": "deflate, zstd, lzw, none, jpeg", "layout": "tiff, ome",
            "gray mode": "luminance, r, g, b, hematoxylin, eosin",
            "reconstruction method": "dilation, erosion", "EDT format": "f32, u16, sq32, u8",
            "EDT method": "exact, wavefront",
            "attribute filter": "area-open, area-close, height-open, height-close"}


def _parse(fn, what, name, op=None):
    v = ctypes.c_int()
    if not isinstance(name, str) or fn(name.encode(), ctypes.byref(v)) != _lib.TW_OK:
        choices = f" ({_CHOICES[what]})" if what in _CHOICES else ""
        raise ValueError(f"tilewave{'.' + op if op else ''}: unknown {what} '{name}'{choices}")
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


# ---------------------------------------------------------------------------- inputs, outputs

_READERS = {"auto": 0, "openslide": 1, "tiff": 2}
# Keyword options of the inputs (tw_input) and outputs (tw_output), named as the CLI flags
# (--region, --reader, --channel, --gray, --stain-vectors, --threshold, --invert, --tissue,
# --tissue-mask; --quality, --pyramid, --layout, --overlay). `level` and `compression` are
# named parameters.
_IN_ALL = ("region", "reader", "channel", "gray", "stains", "threshold", "invert", "tissue",
           "tissue_mask", "input_report", "mpp", "magnification")
_OUT_ALL = ("quality", "pyramid", "layout", "overlay", "overlay_deflate", "description")


def _is_number(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _channel_arg(op, c):
    """A channel of a multi-channel image (``channel=``): its index (int) or name (str), as
    the C API takes it (text)."""
    if isinstance(c, (int, np.integer)) and not isinstance(c, bool) and int(c) >= 0:
        return str(int(c))
    if isinstance(c, str) and c:
        return c
    raise ValueError(f"tilewave.{op}: channel must be an index >= 0 or a name, got {c!r}")


def _options(op, kw, in_keys, out_keys):
    """Split and check the keyword options of ``op``: (input options, output options).
    Unknown names are TypeError; bad values ValueError, each naming the op and option."""
    bad = [k for k in kw if k not in in_keys and k not in out_keys]
    if bad:
        known = ", ".join(sorted(set(in_keys) | set(out_keys)))
        raise TypeError(f"tilewave.{op}: unexpected keyword argument '{bad[0]}' (options: "
                        f"{known})")
    inp = {k: v for k, v in kw.items() if k in in_keys and v is not None}
    out = {k: v for k, v in kw.items() if k in out_keys and v is not None}
    if "region" in inp:
        r = inp["region"]
        try:
            vals = [int(v) for v in r]
            ok = len(vals) == 4 and all(_is_number(v) and int(v) == v for v in r)
        except (TypeError, ValueError):
            ok = False
        if not ok or vals[0] < 0 or vals[1] < 0 or vals[2] < 1 or vals[3] < 1:
            raise ValueError(f"tilewave.{op}: region must be (x, y, w, h) integers with x, y "
                             f">= 0 and w, h >= 1, got {r!r}")
        inp["region"] = tuple(vals)
    if "reader" in inp and inp["reader"] not in _READERS:
        raise ValueError(f"tilewave.{op}: unknown reader {inp['reader']!r} (auto, openslide "
                         "or tiff)")
    if "channel" in inp:
        inp["channel"] = _channel_arg(op, inp["channel"])
    if "gray" in inp:
        inp["gray"] = _parse(lib.tw_gray_mode_parse, "gray mode", inp["gray"], op)
    if "stains" in inp:
        try:
            st = np.asarray(inp["stains"], dtype=np.float64).ravel()
        except (TypeError, ValueError):
            st = np.zeros(0)
        if st.size != 9 or not np.isfinite(st).all():
            raise ValueError(f"tilewave.{op}: stains must be 9 finite numbers (hematoxylin, "
                             "eosin, residual: R, G, B optical densities each; a 3x3 array "
                             f"works), got {inp['stains']!r}")
        inp["stains"] = st
    if "threshold" in inp:
        t = inp["threshold"]
        if not (t == "otsu" or (_is_number(t) and np.isfinite(t))):
            raise ValueError(f"tilewave.{op}: threshold must be a finite number or 'otsu', "
                             f"got {t!r}")
    if inp.get("invert") and "threshold" not in inp:
        raise ValueError(f"tilewave.{op}: invert applies with a threshold (threshold=N or "
                         "'otsu')")
    if "tissue_mask" in inp:
        if not _is_path(inp["tissue_mask"]):
            raise TypeError(f"tilewave.{op}: tissue_mask must be a path")
        inp["tissue"] = True
    for k in ("mpp", "magnification"):
        if k in inp and not (_is_number(inp[k]) and np.isfinite(inp[k]) and inp[k] > 0):
            raise ValueError(f"tilewave.{op}: {k} must be a positive number, got {inp[k]!r}")
    if "mpp" in inp and "magnification" in inp:
        raise ValueError(f"tilewave.{op}: mpp and magnification cannot both be given")
    rep = inp.get("input_report")
    if rep is not None and not isinstance(rep, dict):
        raise TypeError(f"tilewave.{op}: input_report must be a dict (filled when the job "
                        f"ends), not {type(rep).__name__}")
    if "quality" in out:
        q = out["quality"]
        if not (_is_number(q) and int(q) == q and 1 <= q <= 100):
            raise ValueError(f"tilewave.{op}: quality must be an integer 1..100 (JPEG), got "
                             f"{q!r}")
    if "layout" in out:
        out["layout"] = _parse(lib.tw_layout_parse, "layout", out["layout"], op)
    if "overlay" in out and not _is_path(out["overlay"]):
        raise TypeError(f"tilewave.{op}: overlay must be a path")
    for k in ("invert", "tissue", "pyramid", "overlay_deflate"):
        d = inp if k in inp else out
        if k in d and not isinstance(d[k], (bool, np.bool_)):
            raise TypeError(f"tilewave.{op}: {k} must be True or False, not {d[k]!r}")
    return inp, out


def _input_used(op, inp, any_path, level=0):
    """Input options need a slide path: on arrays they would be silently ignored."""
    names = sorted(list(inp) + (["level"] if level != 0 else []))
    if names and not any_path:
        raise ValueError(f"tilewave.{op}: {', '.join(names)} apply to path inputs only (the "
                         "input is an array)")


def _set_input(inp, path, level, opts, keep):
    """Fill a tw_input from a path and checked options; return its report (or None)."""
    inp.path = _enc(path)
    if int(level) < 0:
        raise ValueError(f"tilewave: level must be >= 0 (got {level})")
    if int(level) != 0 and ("mpp" in opts or "magnification" in opts):
        raise ValueError("tilewave: level and mpp (or magnification) cannot both be given: "
                         "mpp chooses the level")
    inp.level = int(level)
    inp.mpp = float(opts.get("mpp", 0))
    inp.magnification = float(opts.get("magnification", 0))
    if "region" in opts:
        inp.x, inp.y, inp.w, inp.h = opts["region"]
    if "reader" in opts:
        inp.reader = _READERS[opts["reader"]]
    if "channel" in opts:
        inp.channel = opts["channel"].encode()
    if "gray" in opts:
        inp.gray = opts["gray"]
    if "stains" in opts:
        inp.stains_set = True
        for i, v in enumerate(opts["stains"]):
            inp.stains[i] = float(v)
    if "threshold" in opts:
        t = opts["threshold"]
        if t == "otsu":
            inp.threshold_mode = _lib.TW_THRESHOLD_OTSU
        else:
            inp.threshold_mode = _lib.TW_THRESHOLD_VALUE
            inp.threshold = float(t)
    inp.invert = bool(opts.get("invert", False))
    inp.tissue = bool(opts.get("tissue", False))
    if "tissue_mask" in opts:
        inp.tissue_mask_path = _enc(opts["tissue_mask"])
    rep = None
    if opts.get("input_report") is not None:
        rep = _lib.InputReport()
        keep.append(rep)
        inp.report = ctypes.pointer(rep)
    return rep


def _report_filler(reports, target):
    """A Job finish hook copying the C input reports into the caller's dict."""
    if target is None or not reports:
        return None

    def fill(_ok):
        r = reports[0]
        target.update({"threshold": None if r.threshold < 0 else float(r.threshold),
                       "otsu_level": int(r.otsu_level),
                       "tissue_level": int(r.tissue_level),
                       "tissue_fraction": float(r.tissue_fraction),
                       "reads": int(r.reads), "skipped": int(r.skipped),
                       "level": int(r.level), "reduce": int(r.reduce),
                       "mpp": (float(r.mpp_x), float(r.mpp_y))})
    return fill


def _set_output(op, out, path, compression, opts, input_is_path=True):
    """Fill a tw_output; with ``path`` None every output option is an error (nothing is
    written)."""
    given = sorted(list(opts) + (["compression"] if compression is not None else []))
    if path is None:
        if given:
            raise ValueError(f"tilewave.{op}: {', '.join(given)} apply to out=PATH only (the "
                             "result is returned as an array)")
        return
    out.path = _enc(path)
    if compression is not None:
        out.compression = _parse(lib.tw_compression_parse, "compression", compression, op)
        out.compression_set = True
    if "quality" in opts:
        out.quality = int(opts["quality"])
    if "pyramid" in opts:
        out.pyramid = bool(opts["pyramid"])
    if "layout" in opts:
        out.layout = opts["layout"]
        out.layout_set = True
    if "overlay" in opts:
        if not input_is_path:
            raise ValueError(f"tilewave.{op}: overlay needs a slide path as input (it blends "
                             "the result over the slide)")
        out.overlay = _enc(opts["overlay"])
    if "overlay_deflate" in opts:
        out.overlay_deflate = bool(opts["overlay_deflate"])
    if "description" in opts:
        out.description = str(opts["description"]).encode()


def info(path):
    """Describe a slide or TIFF: {"format", "levels": [(w, h, downsample)...], "channels",
    "channel_names", "dtype", "mpp": (x, y), "objective_power"} (mpp (0, 0) and objective_power
    0: unknown). "channels" is what a read gives per pixel (1, 3; 1 for a multi-channel image,
    one channel at a time); "channel_names" lists the channels of a multi-channel image
    (fluorescence qptiff, OME-TIFF; "" where unnamed), [] otherwise."""
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
                "channel_names": [lib.tw_slide_get_channel_name(s, c).decode()
                                  for c in range(lib.tw_slide_get_channel_count(s))],
                "dtype": _DTYPES.get(lib.tw_slide_get_sample_type(s)),
                "mpp": (mx.value, my.value),
                "objective_power": float(lib.tw_slide_get_objective_power(s))}
    finally:
        lib.tw_slide_close(s)


def _open(path, reader="auto"):
    if reader not in _READERS:
        raise ValueError(f"tilewave: unknown reader {reader!r} (auto, openslide or tiff)")
    s = ctypes.c_void_p()
    err = _lib.Error()
    _check(lib.tw_slide_open(_enc(path), _READERS[reader], ctypes.byref(s), ctypes.byref(err)),
           err)
    return s


def read(path, level=0, region=None, *, reader="auto", channel=None):
    """Read a level of a slide or TIFF, or ``region`` (x, y, w, h) of it: an (h, w) or
    (h, w, channels) array. ``channel`` (index or name) picks one channel of a multi-channel
    image, which is refused without it."""
    if region is not None:
        region = _options("read", {"region": region}, ("region",), ())[0]["region"]
    if channel is not None:
        channel = _channel_arg("read", channel)
    s = _open(path, reader)
    try:
        if channel is not None:
            err = _lib.Error()
            _check(lib.tw_slide_set_channel(s, channel.encode(), ctypes.byref(err)), err)
        li = _lib.LevelInfo()
        if int(level) < 0 or lib.tw_slide_get_level(s, int(level), ctypes.byref(li)) != \
                _lib.TW_OK:
            raise ValueError(f"tilewave.read: no level {level} in '{os.fsdecode(path)}'")
        x, y, w, h = region if region is not None else (0, 0, li.w, li.h)
        if x + w > li.w or y + h > li.h:
            raise ValueError(f"tilewave.read: region {region} is outside level {level} "
                             f"({li.w}x{li.h})")
        ch = lib.tw_slide_get_channels(s)
        dt = _DTYPES[lib.tw_slide_get_sample_type(s)]
        shape = (h, w) if ch == 1 else (h, w, ch)
        a = np.empty(shape, dtype=dt)
        err = _lib.Error()
        _check(lib.tw_slide_read_region(s, int(level), x, y, w, h, a.ctypes.data,
                                        a.strides[0], ctypes.byref(err)), err)
        return a
    finally:
        lib.tw_slide_close(s)


def choose_level(path, mpp=None, magnification=None, *, reader="auto"):
    """The level the operations read for ``mpp`` (microns per pixel) or ``magnification``
    (give one): {"level", "reduce" (1, or k: the level is reduced k x k by area average),
    "size": (w, h), "mpp": (x, y), "magnification"} (docs/io.md, "Resolution and metadata")."""
    if (mpp is None) == (magnification is None):
        raise ValueError("tilewave.choose_level: give either mpp or magnification")
    s = _open(path, reader)
    try:
        c = _lib.LevelChoice()
        err = _lib.Error()
        _check(lib.tw_slide_choose_level(s, float(mpp or 0), float(magnification or 0),
                                         ctypes.byref(c), ctypes.byref(err)), err)
        return {"level": int(c.level), "reduce": int(c.reduce), "size": (int(c.w), int(c.h)),
                "mpp": (float(c.mpp_x), float(c.mpp_y)), "magnification": float(c.magnification)}
    finally:
        lib.tw_slide_close(s)


def _gray_shape(path, level, opts=None):
    """Size and one-channel dtype of a level (or its region) as the operations read it."""
    if opts and ("mpp" in opts or "magnification" in opts):
        c = choose_level(path, opts.get("mpp"), opts.get("magnification"),
                         reader=opts.get("reader", "auto"))
        w, h = c["size"]
        if "region" in opts:
            w, h = opts["region"][2:]
        return (h, w), info(path)["dtype"]
    d = info(path)
    if not 0 <= level < len(d["levels"]):
        raise ValueError(f"tilewave: no level {level} in '{os.fsdecode(path)}'")
    w, h, _ = d["levels"][level]
    if opts and "region" in opts:
        w, h = opts["region"][2:]
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
    Inputs are 2-D numpy arrays or paths of slides/TIFFs. ``out``: None returns a numpy array;
    a path writes a tiled BigTIFF there and returns None. ``runtime``: the runtime (default:
    the innermost ``with Runtime()`` block, else default_runtime()). ``progress``:
    callable(done, total, eta_seconds_or_None), called from a runtime thread with increasing
    ``done``, at most every ``progress_interval`` seconds (0: every step) and once at the end;
    returning False cancels the job (which then raises Canceled). ``wait=False``
    returns a Job instead of the result. ``tile``: the tile size (int or (w, h)).

    Path inputs (the CLI's input flags): ``level``; ``region=(x, y, w, h)`` of that level;
    ``reader`` ("auto", "openslide", "tiff"); ``gray`` (how RGB becomes one channel:
    "luminance", "r", "g", "b", "hematoxylin", "eosin"); ``stains`` (9 numbers or a 3x3
    array: hematoxylin, eosin, residual optical densities); ``threshold`` (a number or
    "otsu": the input becomes a 0 / type-maximum mask of gray > threshold) and ``invert``
    (gray <= threshold instead); ``tissue=True`` (regions without tissue are not read);
    ``tissue_mask=PATH`` (also write the low-resolution tissue mask; implies tissue);
    ``input_report`` (a dict, filled when the job ends with "threshold", "otsu_level",
    "tissue_fraction", "reads", "skipped", "level", "reduce", "mpp"); ``mpp=X`` or
    ``magnification=M`` instead of ``level`` (the coarsest level at least as fine, reduced
    k x k by area average when k >= 2 times finer; see choose_level()). docs/io.md describes
    them.

    File outputs (``out=PATH``; the CLI's output flags): ``compression`` ("deflate", "zstd",
    "lzw", "none", "jpeg"), ``quality`` (JPEG 1..100), ``pyramid=True``, ``layout`` ("tiff" or
    "ome"), ``overlay=PATH`` (the result blended over the input slide, an RGB pyramid;
    ``overlay_deflate=True`` for deflate instead of JPEG), ``description`` (kept in the file's
    metadata).
"""


def _src(op, name, a, allowed, inp, img, level, opts, keep):
    """Point an input at a path or an array; return (array or None, shape, dtype, report)."""
    if _is_path(a):
        rep = _set_input(inp, a, level, opts, keep)
        shape, dt = _gray_shape(a, level, opts)
        return None, shape, dt, rep
    arr = _array(op, name, a, allowed)
    img_fields = _host(arr)
    ctypes.memmove(ctypes.addressof(img), ctypes.addressof(img_fields), ctypes.sizeof(img))
    return arr, arr.shape, arr.dtype, None


def _dst(op, o_output, o_result, out, compression, outopts, shape, dtype, input_is_path):
    if out is not None:
        if not _is_path(out):
            raise TypeError(f"tilewave.{op}: out must be a path or None, not "
                            f"{type(out).__name__}")
        _set_output(op, o_output, out, compression, outopts, input_is_path)
        return None
    _set_output(op, o_output, None, compression, outopts)
    res = np.empty(shape, dtype=dtype)
    h = _host(res)
    ctypes.memmove(ctypes.addressof(o_result), ctypes.addressof(h), ctypes.sizeof(h))
    return res


def reconstruct(marker, mask, out=None, *, method="dilation", conn=8, clamp=False, level=0,
                tile=None, compression=None, runtime=None, progress=None,
                progress_interval=0.05, wait=True, **options):
    """Grayscale morphological reconstruction of ``marker`` under ``mask`` (by dilation, or
    ``method="erosion"``), 4- or 8-connected; uint8 or uint16, the same shape and dtype.
    Equal to scikit-image ``reconstruction``. Input options apply to both when paths (as the
    CLI's); ``overlay`` blends over the mask."""
    inopts, outopts = _options("reconstruct", options, _IN_ALL, _OUT_ALL)
    _input_used("reconstruct", inopts, _is_path(marker) or _is_path(mask), level)
    o = _init(lib.tw_mrecon_opts_init, _lib.MreconOpts)
    keep = []
    mk, mshape, mdt, r1 = _src("reconstruct", "marker", marker, _U8_U16, o.marker,
                               o.marker_image, level, inopts, keep)
    ms, shape, dt, r2 = _src("reconstruct", "mask", mask, _U8_U16, o.mask, o.mask_image, level,
                             inopts, keep)
    if r1 is not None and r2 is not None:
        o.mask.report = o.marker.report  # counts add up: one report for both (ops.h)
    if mk is not None and ms is not None:
        if mk.shape != ms.shape:
            raise ValueError(f"tilewave.reconstruct: marker shape {mk.shape} != mask shape "
                             f"{ms.shape}")
        if mk.dtype != ms.dtype:
            raise TypeError(f"tilewave.reconstruct: marker dtype {mk.dtype} != mask dtype "
                            f"{ms.dtype}")
    o.method = _parse(lib.tw_mrecon_method_parse, "reconstruction method", method,
                      "reconstruct")
    o.conn = int(conn)
    o.clamp_marker = bool(clamp)
    _tile(o, tile)
    res = _dst("reconstruct", o.output, o.result, out, compression, outopts, shape, dt,
               _is_path(mask))
    return _run(runtime, lib.tw_mrecon_submit, o, (mk, ms, res, keep), res, progress, wait,
                progress_interval,
                _report_filler([r for r in (r1, r2) if r is not None],
                               inopts.get("input_report")))


def _mrecon_filter(op, submit, image, out, result_dtype, conn, level, tile, compression, runtime,
             progress, wait, progress_interval, options, **fields):
    inopts, outopts = _options(op, options, _IN_ALL, _OUT_ALL)
    _input_used(op, inopts, _is_path(image), level)
    o = _init(lib.tw_mrecon_filter_opts_init, _lib.MreconFilterOpts)
    keep = []
    arr, shape, dt, rep = _src(op, "image", image, _U8_U16, o.input, o.image, level, inopts,
                               keep)
    for k, v in fields.items():
        setattr(o, k, v)
    o.conn = int(conn)
    _tile(o, tile)
    res = _dst(op, o.output, o.result, out, compression, outopts, shape, result_dtype or dt,
               _is_path(image))
    return _run(runtime, submit, o, (arr, res, keep), res, progress, wait, progress_interval,
                _report_filler([rep] if rep else [], inopts.get("input_report")))


def fill_holes(image, out=None, *, conn=0, level=0, tile=None, compression=None, runtime=None,
               progress=None, progress_interval=0.05, wait=True, **options):
    """Fill the holes (regional minima not connected to the border); uint8/uint16."""
    return _mrecon_filter("fill_holes", lib.tw_fill_holes_submit, image, out, None, conn, level,
                    tile, compression, runtime, progress, wait, progress_interval, options)


def hmax(image, h, out=None, *, dome=False, conn=0, level=0, tile=None, compression=None,
         runtime=None, progress=None, progress_interval=0.05, wait=True, **options):
    """h-maxima (uint8 0/1 array; 0/255 in a file, docs/io.md "Masks"), or the h-dome
    image with ``dome=True``."""
    if int(h) < 1:
        raise ValueError(f"tilewave.hmax: h must be >= 1 (got {h})")
    return _mrecon_filter("hmax", lib.tw_hmax_submit, image, out, None if dome else np.uint8, conn,
                    level, tile, compression, runtime, progress, wait, progress_interval,
                    options, h=int(h), dome=bool(dome))


def regional_max(image, out=None, *, conn=0, level=0, tile=None, compression=None,
                 runtime=None, progress=None, progress_interval=0.05, wait=True, **options):
    """Regional maxima (uint8 0/1 array; 0/255 in a file, docs/io.md "Masks")."""
    return _mrecon_filter("regional_max", lib.tw_regional_max_submit, image, out, np.uint8, conn,
                    level, tile, compression, runtime, progress, wait, progress_interval,
                    options)


def open_rec(image, radius, out=None, *, conn=0, level=0, tile=None, compression=None,
             runtime=None, progress=None, progress_interval=0.05, wait=True, **options):
    """Opening by reconstruction with the (2 radius + 1) square."""
    return _mrecon_filter("open_rec", lib.tw_open_rec_submit, image, out, None, conn, level, tile,
                    compression, runtime, progress, wait, progress_interval, options,
                    radius=int(radius))


def close_rec(image, radius, out=None, *, conn=0, level=0, tile=None, compression=None,
              runtime=None, progress=None, progress_interval=0.05, wait=True, **options):
    """Closing by reconstruction with the (2 radius + 1) square."""
    return _mrecon_filter("close_rec", lib.tw_close_rec_submit, image, out, None, conn, level, tile,
                    compression, runtime, progress, wait, progress_interval, options,
                    radius=int(radius))


_EDT_DTYPES = {0: np.float32, 1: np.uint16, 2: np.uint32, 3: np.uint8}
# edt has its own threshold and invert (applied to its gray input), as the CLI's edt.
_EDT_IN_KEYS = tuple(k for k in _IN_ALL if k not in ("threshold", "invert"))


def edt(image, out=None, *, threshold=0.0, otsu=False, invert=False, spacing=None,
        format="f32", method="exact", indices=False, level=0, tile=None, compression=None,
        runtime=None, progress=None, progress_interval=0.05, wait=True, step=1.0, **options):
    """Exact Euclidean distance transform of the foreground (value > ``threshold``, or Otsu's
    threshold with ``otsu=True`` or ``threshold="otsu"``; ``invert`` swaps): equal to SciPy
    ``distance_transform_edt(image > threshold, sampling=(sy, sx))``. ``spacing``: a number,
    (sx, sy) or "auto" (the slide's mpp). ``format``: "f32" (float32), "u16", "sq32" (exact
    squared distances, uint32) or "u8" (a map for viewers, saturating at 255); ``step``
    (u8, u16): distance units a grey level. ``indices=True`` also returns the nearest background pixel
    of every pixel as a (h, w, 2) uint32 array (row, column); with ``out`` a path,
    ``indices`` may be a path too. The threshold is edt's own (as the CLI's ``edt
    --threshold``): the input options take no threshold or invert."""
    inopts, outopts = _options("edt", options, _EDT_IN_KEYS, _OUT_ALL)
    _input_used("edt", inopts, _is_path(image), level)
    o = _init(lib.tw_edt_opts_init, _lib.EdtOpts)
    keep = []
    arr, shape, _, rep = _src("edt", "image", image, _EDT_IN, o.input, o.image, level, inopts,
                              keep)
    if threshold == "otsu":
        otsu, threshold = True, 0.0
    if not (_is_number(threshold) and np.isfinite(threshold)):
        raise ValueError(f"tilewave.edt: threshold must be a finite number or 'otsu', got "
                         f"{threshold!r}")
    o.threshold = float(threshold)
    o.threshold_otsu = bool(otsu)
    o.invert = bool(invert)
    if isinstance(spacing, str):
        if spacing != "auto":
            raise ValueError(f"tilewave.edt: spacing must be a number, (sx, sy) or 'auto', got "
                             f"{spacing!r}")
        o.spacing_auto = True
    elif spacing is not None:
        sx, sy = (spacing, spacing) if np.isscalar(spacing) else spacing
        o.spacing_x, o.spacing_y = float(sx), float(sy)
    o.format = _parse(lib.tw_edt_format_parse, "EDT format", format, "edt")
    if not (_is_number(step) and np.isfinite(step) and step > 0):
        raise ValueError(f"tilewave.edt: step must be a positive number, got {step!r}")
    o.step = float(step)
    o.method = _parse(lib.tw_edt_method_parse, "EDT method", method, "edt")
    _tile(o, tile)
    res = _dst("edt", o.output, o.result, out, compression, outopts, shape,
               _EDT_DTYPES[o.format], _is_path(image))
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
    return _run(runtime, lib.tw_edt_submit, o, (arr, res, idx, keep), result, progress, wait,
                progress_interval, _report_filler([rep] if rep else [],
                                                  inopts.get("input_report")))


def _area_out(op, o, area, out, shape, dtype):
    """The optional per-pixel node area of maxtree() and tos(): ``area=True`` returns a new
    array (set into o.area), a path writes it there (o.area_path), False or None nothing."""
    if _is_path(area):
        if out is not None and os.fsdecode(area) == os.fsdecode(out):
            raise ValueError(f"tilewave.{op}: area and out are the same file")
        o.area_path = _enc(area)
        return None
    if area is True:
        ar = np.empty(shape, dtype=dtype)
        h = _host(ar)
        ctypes.memmove(ctypes.addressof(o.area), ctypes.addressof(h), ctypes.sizeof(h))
        return ar
    if area is not False and area is not None:
        raise TypeError(f"tilewave.{op}: area must be True, False or a path, not {area!r}")
    return None


def maxtree(image, out=None, *, area=False, conn=4, index_bits=0, level=0, compression=None,
            runtime=None, progress=None, progress_interval=0.05, wait=True, **options):
    """Canonical max-tree of a uint8/uint16 image as a parent image: every pixel holds the
    raster index (y * w + x) of its parent; the root points to itself (ops.h, `tilewave
    maxtree`). ``index_bits``: 0 (32-bit indices up to 2^32 - 1 pixels, else 64), 32 or 64;
    the arrays are uint32 / uint64. ``area=True`` also returns the area (pixels) of each
    pixel's node, ``area=PATH`` writes it there. Returns the parent array (``out=None``), the
    area array (``area=True``), both as (parent, area), or None when everything went to
    files. ``conn``: 4 (default) or 8. No tiles: the whole image is built at once."""
    inopts, outopts = _options("maxtree", options, _IN_ALL, _OUT_ALL)
    _input_used("maxtree", inopts, _is_path(image), level)
    if index_bits not in (0, 32, 64):
        raise ValueError(f"tilewave.maxtree: index_bits must be 0, 32 or 64 (got {index_bits!r})")
    o = _init(lib.tw_maxtree_opts_init, _lib.MaxtreeOpts)
    keep = []
    arr, shape, _, rep = _src("maxtree", "image", image, _U8_U16, o.input, o.image, level,
                              inopts, keep)
    n = int(shape[0]) * int(shape[1])
    pdt = np.uint64 if index_bits == 64 or (index_bits == 0 and n > 2 ** 32 - 1) else np.uint32
    o.index_bits = int(index_bits)
    o.connectivity = int(conn)
    res = _dst("maxtree", o.output, o.parent, out, compression, outopts, shape, pdt,
               _is_path(image))
    ar = _area_out("maxtree", o, area, out, shape, pdt)
    got = [a for a in (res, ar) if a is not None]
    result = None if not got else got[0] if len(got) == 1 else tuple(got)
    return _run(runtime, lib.tw_maxtree_submit, o, (arr, res, ar, keep), result, progress,
                wait, progress_interval,
                _report_filler([rep] if rep else [], inopts.get("input_report")))


def tos(image, out=None, *, area=False, level=0, compression=None, runtime=None,
        progress=None, progress_interval=0.05, wait=True, **options):
    """Tree of shapes of a uint8/uint16 image in memory (docs/tos.md, `tilewave tos`) as a
    uint32 parent image: every pixel holds the raster index of its node's canonical pixel (the
    node's largest index), which holds its parent node's; the root points to itself (with an
    implicit root, its children do). ``area=True`` also returns each pixel's node area,
    ``area=PATH`` writes it there. Returns the parent array (``out=None``), the area array,
    both as (parent, area), or None when everything went to files."""
    inopts, outopts = _options("tos", options, _IN_ALL, _OUT_ALL)
    _input_used("tos", inopts, _is_path(image), level)
    o = _init(lib.tw_tos_opts_init, _lib.TosOpts)
    keep = []
    arr, shape, _, rep = _src("tos", "image", image, _U8_U16, o.input, o.image, level, inopts,
                              keep)
    res = _dst("tos", o.output, o.parent, out, compression, outopts, shape, np.uint32,
               _is_path(image))
    ar = _area_out("tos", o, area, out, shape, np.uint32)
    got = [a for a in (res, ar) if a is not None]
    result = None if not got else got[0] if len(got) == 1 else tuple(got)
    return _run(runtime, lib.tw_tos_submit, o, (arr, res, ar, keep), result, progress, wait,
                progress_interval,
                _report_filler([rep] if rep else [], inopts.get("input_report")))


def grain(image, area, out=None, *, level=0, compression=None, runtime=None, progress=None,
          progress_interval=0.05, wait=True, **options):
    """Grain filter, the self-dual area filter (`tilewave grain`): every shape of the tree of
    shapes with fewer than ``area`` pixels is removed (= Higra's reconstruct_leaf_data on its
    tree of shapes with attribute_area < area). uint8/uint16, in memory."""
    inopts, outopts = _options("grain", options, _IN_ALL, _OUT_ALL)
    _input_used("grain", inopts, _is_path(image), level)
    if not (_is_number(area) and int(area) == area and area >= 1):
        raise ValueError(f"tilewave.grain: the area must be an integer >= 1 (got {area!r})")
    o = _init(lib.tw_grain_opts_init, _lib.GrainOpts)
    keep = []
    arr, shape, dt, rep = _src("grain", "image", image, _U8_U16, o.input, o.image, level,
                               inopts, keep)
    o.area = int(area)
    res = _dst("grain", o.output, o.result, out, compression, outopts, shape, dt,
               _is_path(image))
    return _run(runtime, lib.tw_grain_submit, o, (arr, res, keep), res, progress, wait,
                progress_interval, _report_filler([rep] if rep else [],
                                                  inopts.get("input_report")))


_WS_IN = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.float32))
_WS_MARKERS = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32))


def watershed(image, markers, out=None, *, mask=None, conn=8, lines=False, negate=False,
              level=0, tile=None, compression=None, runtime=None, progress=None,
              progress_interval=0.05, wait=True, **options):
    """Marker-controlled watershed (`tilewave watershed`): ``image`` (uint8/uint16/float32)
    flooded from the labels of ``markers`` (uint8/uint16/uint32, 0 = none) inside ``mask``
    (nonzero = flooded; None: everywhere); uint32 labels, 0 where no marker reaches, outside
    the mask and, with ``lines``, on the watershed lines. ``negate`` floods -image (a distance
    map as it is). Close to scikit-image ``watershed(image, markers, mask=mask,
    connectivity=1 if conn == 4 else 2)``; the tie rule is docs/watershed.md's. Input options
    apply to ``image`` when a path."""
    inopts, outopts = _options("watershed", options, _IN_ALL, _OUT_ALL)
    _input_used("watershed", inopts, _is_path(image), level)
    o = _init(lib.tw_watershed_opts_init, _lib.WatershedOpts)
    keep = []
    arr, shape, _, rep = _src("watershed", "image", image, _WS_IN, o.input, o.image, level,
                              inopts, keep)
    mk, mshape, _, _ = _src("watershed", "markers", markers, _WS_MARKERS, o.markers,
                            o.markers_image, level, {}, keep)
    ms = None
    if mask is not None:
        ms, kshape, _, _ = _src("watershed", "mask", mask, _U8_U16, o.mask, o.mask_image,
                                level, {}, keep)
        if ms is not None and arr is not None and kshape != shape:
            raise ValueError(f"tilewave.watershed: mask shape {kshape} != image shape {shape}")
    if mk is not None and arr is not None and mshape != shape:
        raise ValueError(f"tilewave.watershed: markers shape {mshape} != image shape {shape}")
    o.conn = int(conn)
    o.lines = bool(lines)
    o.negate = bool(negate)
    _tile(o, tile)
    res = _dst("watershed", o.output, o.result, out, compression, outopts, shape,
               np.dtype(np.uint32), _is_path(image))
    return _run(runtime, lib.tw_watershed_submit, o, (arr, mk, ms, res, keep), res, progress,
                wait, progress_interval,
                _report_filler([rep] if rep else [], inopts.get("input_report")))


def attr_filter(image, filter, value, /, out=None, *, conn=4, level=0, tile=None,
                compression=None, runtime=None, progress=None, progress_interval=0.05,
                wait=True, **options):
    """Attribute filter ``filter`` ("area-open", "area-close", "height-open",
    "height-close") keeping the nodes whose attribute is >= ``value`` (an area in pixels or a
    height in levels); uint8/uint16. The first three arguments are positional: the keyword
    ``threshold`` is the input option (a mask of the slide), as for every operation."""
    inopts, outopts = _options("attr_filter", options, _IN_ALL, _OUT_ALL)
    _input_used("attr_filter", inopts, _is_path(image), level)
    o = _init(lib.tw_attr_filter_opts_init, _lib.AttrFilterOpts)
    keep = []
    arr, shape, dt, rep = _src("attr_filter", "image", image, _U8_U16, o.input, o.image, level,
                               inopts, keep)
    o.filter = _parse(lib.tw_attr_filter_parse, "attribute filter", filter, "attr_filter")
    if not (_is_number(value) and int(value) == value and value >= 0):
        raise ValueError(f"tilewave.{filter.replace('-', '_')}: the area or height must be an "
                         f"integer >= 0 (got {value!r})")
    o.threshold = int(value)
    o.connectivity = int(conn)
    _tile(o, tile)
    res = _dst("attr_filter", o.output, o.result, out, compression, outopts, shape, dt,
               _is_path(image))
    return _run(runtime, lib.tw_attr_filter_submit, o, (arr, res, keep), res, progress, wait,
                progress_interval, _report_filler([rep] if rep else [],
                                                  inopts.get("input_report")))


def area_open(image, area, out=None, **kw):
    """Area opening: bright components smaller than ``area`` pixels are flattened (=
    scikit-image ``area_opening(image, area, connectivity=1 for conn=4)``)."""
    return attr_filter(image, "area-open", area, out, **kw)


def area_close(image, area, out=None, **kw):
    """Area closing, the dual of area_open (= scikit-image ``area_closing``)."""
    return attr_filter(image, "area-close", area, out, **kw)


def height_open(image, height, out=None, **kw):
    """Height (contrast) opening: bright peaks rising less than ``height`` levels above where
    they merge with their surroundings are flattened (a max-tree node survives iff its
    highest level minus its parent's level is >= height; `tilewave height-open`)."""
    return attr_filter(image, "height-open", height, out, **kw)


def height_close(image, height, out=None, **kw):
    """Height closing, the dual of height_open: dark basins shallower than ``height`` levels
    are filled (`tilewave height-close`)."""
    return attr_filter(image, "height-close", height, out, **kw)


def label(image, out=None, *, conn=8, label_bits=0, level=0, tile=None, compression=None,
          return_num=False, runtime=None, progress=None, progress_interval=0.05, wait=True,
          **options):
    """Connected components of a mask (nonzero pixels of a uint8/uint16 array or slide; with
    ``threshold=N`` of any slide), numbered as ``skimage.measure.label(mask,
    connectivity=1 for conn=4, 2 for conn=8)`` numbers them: 1, 2, ... in raster order of each
    component's first pixel, 0 the background (docs/objects.md, `tilewave label`). Exact for
    any ``tile``. Returns a uint32 array (uint64 with ``label_bits=64``, or when the image could
    hold more than 2^32 - 1 components), or None with ``out=PATH``; with ``return_num=True``
    the pair (labels, number of components)."""
    inopts, outopts = _options("label", options, _IN_ALL, _OUT_ALL)
    _input_used("label", inopts, _is_path(image), level)
    if label_bits not in (0, 32, 64):
        raise ValueError(f"tilewave.label: label_bits must be 0, 32 or 64 (got {label_bits!r})")
    o = _init(lib.tw_label_opts_init, _lib.LabelOpts)
    rep = _init(lib.tw_label_report_init, _lib.LabelReport)
    keep = [rep]
    arr, shape, _, irep = _src("label", "image", image, _U8_U16, o.input, o.image, level,
                               inopts, keep)
    h, w = int(shape[0]), int(shape[1])
    most = (h * w + 1) // 2 if conn == 4 else ((w + 1) // 2) * ((h + 1) // 2)
    dt = np.uint64 if label_bits == 64 or (label_bits == 0 and most > 2 ** 32 - 1) else np.uint32
    o.connectivity = int(conn)
    o.label_bits = int(label_bits)
    o.report = ctypes.cast(ctypes.pointer(rep), ctypes.c_void_p)
    _tile(o, tile)
    res = _dst("label", o.output, o.result, out, compression, outopts, shape, dt,
               _is_path(image))

    def num(ok):
        if return_num and ok:
            return (res, int(rep.objects))
        return None
    return _run(runtime, lib.tw_label_submit, o, (arr, res, keep), res, progress, wait,
                progress_interval,
                _chain(_report_filler([irep] if irep else [], inopts.get("input_report")), num))


def objects(labels, out, *, intensity=None, format=None, classification=None, level=0,
            region=None, gray="luminance", downsample=0.0, offset=(0.0, 0.0), band=0,
            pixel_size=None, runtime=None, progress=None, progress_interval=0.05, wait=True):
    """Write the table of the objects of a label image file (as `label` writes it) to
    ``out``: GeoJSON (QuPath detections with their outlines, in level-0 pixels) or CSV, from
    the name or ``format`` ("geojson", "csv"). Per object: label, area (and um^2 with an mpp),
    centroid, bounding box, perimeter, and with ``intensity`` (a path of the same size) its
    mean, minimum and maximum (docs/objects.md, `tilewave objects`). ``pixel_size``: microns
    per pixel of the labels' level 0 (a number or (x, y)) for the areas in um^2, when their
    file has none or another. Returns the number of objects written."""
    if not _is_path(labels) or not _is_path(out) or (intensity is not None and
                                                     not _is_path(intensity)):
        raise TypeError("tilewave.objects: labels, out and intensity are paths")
    fmts = {None: 0, "geojson": 1, "csv": 2}
    if format not in fmts:
        raise ValueError(f"tilewave.objects: unknown format {format!r} (geojson, csv)")
    o = _init(lib.tw_objects_opts_init, _lib.ObjectsOpts)
    rep = _init(lib.tw_objects_report_init, _lib.ObjectsReport)
    keep = [rep]
    for inp, path in ((o.labels, labels), (o.intensity, intensity)):
        if path is None:
            continue
        inp.path = _enc(path)
        inp.level = int(level)
        if region is not None:
            inp.x, inp.y, inp.w, inp.h = (int(v) for v in region)
    o.intensity.gray = _parse(lib.tw_gray_mode_parse, "gray mode", gray, "objects")
    o.output = _enc(out)
    o.format = fmts[format]
    if classification is not None:
        o.classification = str(classification).encode()
    o.downsample = float(downsample)
    o.offset_x, o.offset_y = float(offset[0]), float(offset[1])
    o.band_h = int(band)
    if pixel_size is not None:
        px = pixel_size if isinstance(pixel_size, (tuple, list)) else (pixel_size, pixel_size)
        if len(px) != 2 or not all(_is_number(v) and 0 < v < 1e300 for v in px):
            raise ValueError("tilewave.objects: pixel_size must be a number or (x, y) above 0 "
                             f"(got {pixel_size!r})")
        o.mpp_x, o.mpp_y = float(px[0]), float(px[1])
    o.report = ctypes.cast(ctypes.pointer(rep), ctypes.c_void_p)
    return _run(runtime, lib.tw_objects_submit, o, keep, None, progress, wait,
                progress_interval, lambda ok: int(rep.objects) if ok else None)


def _temp_output(op):
    """A temporary file for an operation that only writes files; its finish hook reads the
    result back (on success) and removes the folder."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix=f"tilewave-{op}-")
    path = os.path.join(d, "out.tif")

    def finish(ok):
        try:
            return read(path) if ok and os.path.exists(path) else None
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return path, finish


def _chain(*fns):
    fns = [f for f in fns if f is not None]
    if not fns:
        return None

    def run(ok):
        res = None
        for f in fns:
            r = f(ok)
            res = r if r is not None else res
        return res
    return run


_GRAY_IN_KEYS = tuple(k for k in _IN_ALL if k != "gray")  # gray has its own `mode`


def gray(in_path, out_path=None, *, mode="luminance", level=0, tile=None, compression=None,
         runtime=None, progress=None, progress_interval=0.05, wait=True, **options):
    """One channel of a slide ("luminance", "r", "g", "b", "hematoxylin", "eosin"; ``stains``
    replaces the stain vectors of the last two) written to ``out_path`` as a tiled BigTIFF,
    or returned as an array when ``out_path`` is None (through a temporary file). The input
    options but ``gray`` apply (``threshold`` makes it a mask, as `tilewave gray
    --threshold`)."""
    if not _is_path(in_path) or (out_path is not None and not _is_path(out_path)):
        raise TypeError("tilewave.gray: in_path must be a path, out_path a path or None")
    inopts, outopts = _options("gray", options, _GRAY_IN_KEYS, _OUT_ALL)
    if out_path is None:
        _set_output("gray", _lib.Output(), None, compression, outopts)
    o = _init(lib.tw_gray_opts_init, _lib.GrayOpts)
    keep = []
    rep = _set_input(o.input, in_path, level, inopts, keep)
    o.mode = _parse(lib.tw_gray_mode_parse, "gray mode", mode, "gray")
    _tile(o, tile)
    fin = None
    path = out_path
    if path is None:
        path, fin = _temp_output("gray")
    _set_output("gray", o.output, path, compression, outopts)
    return _run(runtime, lib.tw_gray_submit, o, keep, None, progress, wait, progress_interval,
                _chain(_report_filler([rep] if rep else [], inopts.get("input_report")), fin))


def convert(in_path, out_path, *, level=0, tile=None, compression=None, runtime=None,
            progress=None, progress_interval=0.05, wait=True, **options):
    """Copy a level (or ``region``) of any slide tilewave reads into a tiled BigTIFF at
    ``out_path``, pixels as read (RGB stays RGB, 16-bit stays 16-bit), optionally as a
    ``pyramid`` with ``layout`` "tiff" or "ome" (`tilewave convert`). Input options: level,
    region, reader, channel, mpp, magnification, input_report (no gray, threshold or tissue);
    output options: compression, quality, pyramid, layout, description (no overlay)."""
    if not _is_path(in_path) or not _is_path(out_path):
        raise TypeError("tilewave.convert: in_path and out_path must be paths")
    inopts, outopts = _options("convert", options, ("region", "reader", "channel", "mpp",
                                                    "magnification", "input_report"),
                               ("quality", "pyramid", "layout", "description"))
    o = _init(lib.tw_convert_opts_init, _lib.ConvertOpts)
    keep = []
    rep = _set_input(o.input, in_path, level, inopts, keep)
    _tile(o, tile)
    _set_output("convert", o.output, out_path, compression, outopts)
    return _run(runtime, lib.tw_convert_submit, o, keep, None, progress, wait,
                progress_interval,
                _report_filler([rep] if rep else [], inopts.get("input_report")))


for _f in (reconstruct, fill_holes, hmax, regional_max, open_rec, close_rec, edt, maxtree,
           attr_filter, gray, convert):
    _f.__doc__ += _COMMON_DOC
