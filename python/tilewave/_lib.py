# SPDX-License-Identifier: MIT
# tilewave Python binding: finding libtilewave.so and the ctypes mirror of the public C API.
"""Loads libtilewave and declares the structs and prototypes of include/tilewave/*.h.

The structs here must match the C headers field for field: every ``*_opts_init`` call is
checked against ``ctypes.sizeof`` (the C side writes ``sizeof`` into ``struct_size``), so a
library built from other headers fails loudly instead of corrupting memory.
"""
import ctypes
import ctypes.util
import os

c_int, c_int32, c_int64 = ctypes.c_int, ctypes.c_int32, ctypes.c_int64
c_uint64, c_size_t, c_double = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_double
c_bool, c_char_p, c_void_p = ctypes.c_bool, ctypes.c_char_p, ctypes.c_void_p

TW_ERROR_MAX = 512

# tw_status, in the order of include/tilewave/common.h.
STATUS_NAMES = ["TW_OK", "TW_E_INVALID", "TW_E_NOMEM", "TW_E_IO", "TW_E_FORMAT", "TW_E_NODEV",
                "TW_E_DEVICE", "TW_E_CANCELED", "TW_E_TIMEOUT", "TW_E_INTERNAL"]
TW_OK, TW_E_INVALID, TW_E_CANCELED, TW_E_TIMEOUT = 0, 1, 7, 8

# tw_sample_type
TW_U8, TW_U16, TW_U32, TW_F32, TW_U64 = 1, 2, 3, 4, 5
# tw_config_source
TW_CONFIG_SET = 3
# tw_threshold_mode
TW_THRESHOLD_NONE, TW_THRESHOLD_VALUE, TW_THRESHOLD_OTSU = 0, 1, 2


class Error(ctypes.Structure):
    _fields_ = [("status", c_int), ("message", ctypes.c_char * TW_ERROR_MAX)]


class InputReport(ctypes.Structure):
    _fields_ = [("threshold", c_double), ("otsu_level", c_int), ("tissue_fraction", c_double),
                ("reads", c_int64), ("skipped", c_int64), ("level", c_int), ("reduce", c_int),
                ("mpp_x", c_double), ("mpp_y", c_double), ("tissue_level", c_int)]


class Input(ctypes.Structure):
    _fields_ = [("path", c_char_p), ("reader", c_int), ("level", c_int),
                ("x", c_int64), ("y", c_int64), ("w", c_int64), ("h", c_int64),
                ("gray", c_int), ("stains_set", c_bool), ("stains", c_double * 9),
                ("threshold_mode", c_int), ("threshold", c_double), ("invert", c_bool),
                ("tissue", c_bool), ("tissue_mask_path", c_char_p),
                ("report", ctypes.POINTER(InputReport)), ("mpp", c_double),
                ("magnification", c_double), ("channel", c_char_p)]


class Output(ctypes.Structure):
    _fields_ = [("path", c_char_p), ("compression", c_int), ("compression_set", c_bool),
                ("pyramid", c_bool), ("layout", c_int), ("layout_set", c_bool),
                ("quality", c_int), ("description", c_char_p), ("overlay", c_char_p),
                ("overlay_deflate", c_bool)]


class HostImage(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("w", c_int64), ("h", c_int64), ("stride", c_size_t),
                ("type", c_int)]


class Progress(ctypes.Structure):
    _fields_ = [("done", c_int64), ("total", c_int64), ("elapsed_s", c_double),
                ("eta_s", c_double), ("finished", c_bool)]


class GrayOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("input", Input), ("output", Output),
                ("mode", c_int), ("tile_w", c_int32), ("tile_h", c_int32)]


class MreconOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("marker", Input), ("mask", Input),
                ("marker_image", HostImage), ("mask_image", HostImage), ("output", Output),
                ("result", HostImage), ("method", c_int), ("conn", c_int),
                ("clamp_marker", c_bool), ("tile_w", c_int32), ("tile_h", c_int32),
                ("queue_capacity", c_int64), ("stats", c_void_p)]


class MreconFilterOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("input", Input), ("image", HostImage),
                ("output", Output), ("result", HostImage), ("conn", c_int), ("h", c_int64),
                ("dome", c_bool), ("radius", c_int32), ("tile_w", c_int32),
                ("tile_h", c_int32), ("queue_capacity", c_int64), ("stats", c_void_p)]


class EdtOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("input", Input), ("image", HostImage),
                ("output", Output), ("result", HostImage), ("indices_path", c_char_p),
                ("indices", HostImage), ("threshold", c_double), ("threshold_otsu", c_bool),
                ("invert", c_bool), ("spacing_x", c_double), ("spacing_y", c_double),
                ("spacing_auto", c_bool), ("format", c_int), ("method", c_int),
                ("tile_w", c_int32), ("tile_h", c_int32), ("report", c_void_p),
                ("step", c_double)]


class AttrFilterOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("input", Input), ("image", HostImage),
                ("output", Output), ("result", HostImage), ("filter", c_int),
                ("threshold", c_uint64), ("connectivity", c_int), ("tile_w", c_int32),
                ("tile_h", c_int32), ("report", c_void_p)]


class MaxtreeOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("input", Input), ("image", HostImage),
                ("output", Output), ("parent", HostImage), ("area_path", c_char_p),
                ("area", HostImage), ("connectivity", c_int), ("index_bits", c_int)]


class TosOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("input", Input), ("image", HostImage),
                ("output", Output), ("parent", HostImage), ("area_path", c_char_p),
                ("area", HostImage), ("report", c_void_p)]


class GrainOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("input", Input), ("image", HostImage),
                ("output", Output), ("result", HostImage), ("area", c_uint64),
                ("report", c_void_p)]


class LabelReport(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("objects", c_uint64), ("label_bits", c_int),
                ("tiles", c_int64), ("tile_w", c_int32), ("tile_h", c_int32),
                ("border_labels", c_int64), ("tp_cpu", c_int64), ("tp_cuda", c_int64),
                ("label_s", c_double), ("merge_s", c_double), ("write_s", c_double)]


class LabelOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("input", Input), ("image", HostImage),
                ("output", Output), ("result", HostImage), ("connectivity", c_int),
                ("label_bits", c_int), ("tile_w", c_int32), ("tile_h", c_int32),
                ("report", c_void_p)]


class ObjectsReport(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("objects", c_uint64), ("max_active", c_int64),
                ("bands", c_int64), ("band_h", c_int32)]


class ObjectsOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("labels", Input), ("intensity", Input),
                ("output", c_char_p), ("format", c_int), ("classification", c_char_p),
                ("downsample", c_double), ("offset_x", c_double), ("offset_y", c_double),
                ("mpp_x", c_double), ("mpp_y", c_double), ("band_h", c_int32),
                ("report", c_void_p)]


class WatershedOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("input", Input), ("image", HostImage),
                ("markers", Input), ("markers_image", HostImage), ("mask", Input),
                ("mask_image", HostImage), ("output", Output), ("result", HostImage),
                ("conn", c_int), ("lines", c_bool), ("negate", c_bool), ("tile_w", c_int32),
                ("tile_h", c_int32), ("rounds", c_void_p)]


class ConvertOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("input", Input), ("output", Output),
                ("tile_w", c_int32), ("tile_h", c_int32)]


class SampleOpts(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("w", c_int64), ("h", c_int64), ("seed", c_uint64),
                ("tile", c_int32), ("compression", c_int)]


class GpuInfo(ctypes.Structure):
    _fields_ = [("ordinal", c_int), ("name", ctypes.c_char * 128),
                ("pci_bus_id", ctypes.c_char * 32), ("cc_major", c_int), ("cc_minor", c_int),
                ("total_mem", c_uint64), ("near_cpuset", ctypes.c_char * 256)]


class LevelInfo(ctypes.Structure):
    _fields_ = [("w", c_int64), ("h", c_int64), ("downsample", c_double),
                ("tile_w", c_int32), ("tile_h", c_int32)]


class LevelChoice(ctypes.Structure):
    _fields_ = [("level", c_int), ("reduce", c_int), ("w", c_int64), ("h", c_int64),
                ("mpp_x", c_double), ("mpp_y", c_double), ("magnification", c_double)]


class ConfigEntry(ctypes.Structure):
    _fields_ = [("key", c_char_p), ("type", c_int), ("value", c_char_p),
                ("default_value", c_char_p), ("range", c_char_p), ("help", c_char_p),
                ("source", c_int), ("origin", c_char_p)]


PROGRESS_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(Progress), c_void_p)

_P = ctypes.POINTER
_E = _P(Error)
# name: (restype, argtypes)
_PROTOS = {
    "tw_status_string": (c_char_p, [c_int]),
    "tw_version_string": (c_char_p, []),
    "tw_build_has_cuda": (c_int, []),
    "tw_config_create": (c_int, [_P(c_void_p)]),
    "tw_config_destroy": (None, [c_void_p]),
    "tw_config_load_file": (c_int, [c_void_p, c_char_p, _E]),
    "tw_config_load_env": (c_int, [c_void_p, _E]),
    "tw_config_set": (c_int, [c_void_p, c_char_p, c_char_p, c_int, _E]),
    "tw_config_count": (c_size_t, []),
    "tw_config_describe": (c_int, [c_void_p, c_size_t, _P(ConfigEntry)]),
    "tw_runtime_create": (c_int, [c_void_p, _P(c_void_p), _E]),
    "tw_runtime_destroy": (None, [c_void_p]),
    "tw_runtime_get_config": (c_void_p, [c_void_p]),
    "tw_runtime_get_worker_count": (c_int, [c_void_p]),
    "tw_runtime_get_gpu": (c_int, [c_void_p, c_int, _P(GpuInfo)]),
    "tw_job_wait": (c_int, [c_void_p, c_int64]),
    "tw_job_cancel": (None, [c_void_p]),
    "tw_job_get_error": (c_char_p, [c_void_p]),
    "tw_job_get_progress": (None, [c_void_p, _P(Progress)]),
    "tw_job_set_progress_callback": (c_int, [c_void_p, PROGRESS_FN, c_void_p, c_int64]),
    "tw_job_destroy": (None, [c_void_p]),
    "tw_slide_open": (c_int, [c_char_p, c_int, _P(c_void_p), _E]),
    "tw_slide_close": (None, [c_void_p]),
    "tw_slide_get_format": (c_char_p, [c_void_p]),
    "tw_slide_get_level_count": (c_int, [c_void_p]),
    "tw_slide_get_level": (c_int, [c_void_p, c_int, _P(LevelInfo)]),
    "tw_slide_get_channels": (c_int, [c_void_p]),
    "tw_slide_get_channel_count": (c_int, [c_void_p]),
    "tw_slide_get_channel_name": (c_char_p, [c_void_p, c_int]),
    "tw_slide_set_channel": (c_int, [c_void_p, c_char_p, _E]),
    "tw_slide_get_sample_type": (c_int, [c_void_p]),
    "tw_slide_get_mpp": (None, [c_void_p, _P(c_double), _P(c_double)]),
    "tw_slide_get_objective_power": (c_double, [c_void_p]),
    "tw_slide_choose_level": (c_int, [c_void_p, c_double, c_double, _P(LevelChoice),
                                      _P(Error)]),
    "tw_slide_read_region": (c_int, [c_void_p, c_int, c_int64, c_int64, c_int64, c_int64,
                                     c_void_p, c_size_t, _E]),
    "tw_compression_parse": (c_int, [c_char_p, _P(c_int)]),
    "tw_layout_parse": (c_int, [c_char_p, _P(c_int)]),
    "tw_gray_mode_parse": (c_int, [c_char_p, _P(c_int)]),
    "tw_mrecon_method_parse": (c_int, [c_char_p, _P(c_int)]),
    "tw_edt_format_parse": (c_int, [c_char_p, _P(c_int)]),
    "tw_edt_method_parse": (c_int, [c_char_p, _P(c_int)]),
    "tw_attr_filter_parse": (c_int, [c_char_p, _P(c_int)]),
    "tw_gray_opts_init": (None, [_P(GrayOpts)]),
    "tw_gray_submit": (c_int, [c_void_p, _P(GrayOpts), _P(c_void_p), _E]),
    "tw_mrecon_opts_init": (None, [_P(MreconOpts)]),
    "tw_mrecon_submit": (c_int, [c_void_p, _P(MreconOpts), _P(c_void_p), _E]),
    "tw_mrecon_filter_opts_init": (None, [_P(MreconFilterOpts)]),
    "tw_fill_holes_submit": (c_int, [c_void_p, _P(MreconFilterOpts), _P(c_void_p), _E]),
    "tw_hmax_submit": (c_int, [c_void_p, _P(MreconFilterOpts), _P(c_void_p), _E]),
    "tw_regional_max_submit": (c_int, [c_void_p, _P(MreconFilterOpts), _P(c_void_p), _E]),
    "tw_open_rec_submit": (c_int, [c_void_p, _P(MreconFilterOpts), _P(c_void_p), _E]),
    "tw_close_rec_submit": (c_int, [c_void_p, _P(MreconFilterOpts), _P(c_void_p), _E]),
    "tw_edt_opts_init": (None, [_P(EdtOpts)]),
    "tw_edt_submit": (c_int, [c_void_p, _P(EdtOpts), _P(c_void_p), _E]),
    "tw_attr_filter_opts_init": (None, [_P(AttrFilterOpts)]),
    "tw_attr_filter_submit": (c_int, [c_void_p, _P(AttrFilterOpts), _P(c_void_p), _E]),
    "tw_maxtree_opts_init": (None, [_P(MaxtreeOpts)]),
    "tw_maxtree_submit": (c_int, [c_void_p, _P(MaxtreeOpts), _P(c_void_p), _E]),
    "tw_tos_opts_init": (None, [_P(TosOpts)]),
    "tw_tos_submit": (c_int, [c_void_p, _P(TosOpts), _P(c_void_p), _E]),
    "tw_grain_opts_init": (None, [_P(GrainOpts)]),
    "tw_grain_submit": (c_int, [c_void_p, _P(GrainOpts), _P(c_void_p), _E]),
    "tw_label_opts_init": (None, [_P(LabelOpts)]),
    "tw_label_report_init": (None, [_P(LabelReport)]),
    "tw_label_submit": (c_int, [c_void_p, _P(LabelOpts), _P(c_void_p), _E]),
    "tw_objects_opts_init": (None, [_P(ObjectsOpts)]),
    "tw_objects_report_init": (None, [_P(ObjectsReport)]),
    "tw_objects_submit": (c_int, [c_void_p, _P(ObjectsOpts), _P(c_void_p), _E]),
    "tw_watershed_opts_init": (None, [_P(WatershedOpts)]),
    "tw_watershed_submit": (c_int, [c_void_p, _P(WatershedOpts), _P(c_void_p), _E]),
    "tw_convert_opts_init": (None, [_P(ConvertOpts)]),
    "tw_convert_submit": (c_int, [c_void_p, _P(ConvertOpts), _P(c_void_p), _E]),
    "tw_sample_opts_init": (None, [_P(SampleOpts)]),
    "tw_sample_write": (c_int, [c_char_p, _P(SampleOpts), _E]),
}

# Names tried after TILEWAVE_LIBRARY, in order.
_CANDIDATES = ["libtilewave.so", "libtilewave.so.0", "libtilewave.dylib"]


def _load():
    tried = []
    env = os.environ.get("TILEWAVE_LIBRARY")
    names = []
    if env:
        names.append(("TILEWAVE_LIBRARY=" + env, env))
    found = ctypes.util.find_library("tilewave")
    if found:
        names.append(("find_library('tilewave') -> " + found, found))
    else:
        tried.append("find_library('tilewave'): not found")
    names += [(n, n) for n in _CANDIDATES]
    for label, name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            tried.append(f"{label}: {e}")
            if label.startswith("TILEWAVE_LIBRARY"):
                break  # an explicit choice: do not silently fall back to another library
            continue
        missing = [f for f in _PROTOS if not hasattr(lib, f)]
        if missing:
            tried.append(f"{label}: lacks {', '.join(missing[:3])} (an older tilewave?)")
            if label.startswith("TILEWAVE_LIBRARY"):
                break  # an explicit choice: do not silently fall back to another library
            continue
        for fname, (res, args) in _PROTOS.items():
            fn = getattr(lib, fname)
            fn.restype = res
            fn.argtypes = args
        return lib
    raise ImportError("tilewave: cannot load libtilewave; tried: " + "; ".join(tried) +
                      ". Set TILEWAVE_LIBRARY to the full path of libtilewave.so.")


lib = _load()
