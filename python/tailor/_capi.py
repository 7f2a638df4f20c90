"""The C API of libtailor_runtime (runtime/include/tailor/runtime.h) through
ctypes: the library, its structs and its function signatures. Everything else
in the package goes through `lib()` and `check()`."""

import ctypes
import ctypes.util
import os

import numpy as np

API_VERSION = 5
MAX_RANK = 8

OK = 0
STATUS_NAMES = {
    1: "invalid argument",
    2: "unavailable",
    3: "internal error",
    4: "invalid plan",
    5: "I/O error",
    6: "execution error",
}

# tailor_dtype -> NumPy dtype (bf16 has none: its bytes come back as uint16).
DTYPES = {
    0: np.dtype(np.float32),
    1: np.dtype(np.float64),
    2: np.dtype(np.float16),
    3: np.dtype(np.uint16),
    4: np.dtype(np.int64),
    5: np.dtype(np.int32),
    6: np.dtype(np.int16),
    7: np.dtype(np.int8),
    8: np.dtype(np.uint8),
    9: np.dtype(np.bool_),
}
# onnxruntime's type strings for NodeArg.type.
ORT_TYPES = {
    0: "tensor(float)", 1: "tensor(double)", 2: "tensor(float16)",
    3: "tensor(bfloat16)", 4: "tensor(int64)", 5: "tensor(int32)",
    6: "tensor(int16)", 7: "tensor(int8)", 8: "tensor(uint8)",
    9: "tensor(bool)",
}


class Handle:
    """A C API handle a Python object owns: freed by close(), at garbage
    collection, or at the end of a `with` block. Subclasses name their C
    free function (`_free`) and what they are (`_what`, for errors)."""

    _free = None
    _what = "handle"

    def __init__(self):
        self._handle = ctypes.c_void_p()

    def close(self):
        if getattr(self, "_handle", None):
            getattr(lib(), self._free)(self._handle)
            self._handle = ctypes.c_void_p()

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self):
        """The handle, or ValueError once closed."""
        if not getattr(self, "_handle", None):
            raise ValueError(f"the {self._what} is closed")
        return self._handle


class TailorError(RuntimeError):
    """A failed runtime call: `status` (tailor_status) and the message."""

    def __init__(self, status, message):
        self.status = status
        kind = STATUS_NAMES.get(status, f"status {status}")
        super().__init__(f"{message} ({kind})" if message else kind)


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int), ("shape", ctypes.c_int64 * MAX_RANK),
                ("bytes", ctypes.c_uint64)]


class ParameterInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("file_name", ctypes.c_char_p),
                ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_RANK),
                ("bytes", ctypes.c_uint64), ("trainable", ctypes.c_int),
                ("quantized", ctypes.c_int), ("sharded", ctypes.c_int),
                ("transposed", ctypes.c_int)]


class StateInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("parameter", ctypes.c_char_p),
                ("kind", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int), ("shape", ctypes.c_int64 * MAX_RANK),
                ("bytes", ctypes.c_uint64), ("sharded", ctypes.c_int)]


class SessionOptions(ctypes.Structure):
    _fields_ = [("num_threads", ctypes.c_int)]


class TrainerOptions(ctypes.Structure):
    _fields_ = [("data_path", ctypes.c_char_p),
                ("data_dtype", ctypes.c_char_p),
                ("eval_data_path", ctypes.c_char_p),
                ("output_dir", ctypes.c_char_p),
                ("resume", ctypes.c_char_p),
                ("init_adapter", ctypes.c_char_p),
                ("trace_path", ctypes.c_char_p),
                ("trace_steps", ctypes.c_int64),
                ("max_steps", ctypes.c_int64),
                ("save_steps", ctypes.c_int64),
                ("num_threads", ctypes.c_int),
                ("print_progress", ctypes.c_int),
                ("handle_signals", ctypes.c_int)]


class TrainMetrics(ctypes.Structure):
    _fields_ = [("step", ctypes.c_int64), ("loss", ctypes.c_double),
                ("lr", ctypes.c_double), ("grad_norm", ctypes.c_double),
                ("tokens_per_s", ctypes.c_double),
                ("seconds", ctypes.c_double), ("epoch", ctypes.c_double),
                ("has_eval_loss", ctypes.c_int),
                ("eval_loss", ctypes.c_double), ("stopped", ctypes.c_int),
                ("loss_scale", ctypes.c_double), ("skipped", ctypes.c_int)]


class TrainerState(ctypes.Structure):
    _fields_ = [("step", ctypes.c_int64), ("max_steps", ctypes.c_int64),
                ("tokens_per_step", ctypes.c_int64),
                ("trains_adapter", ctypes.c_int),
                ("has_validation", ctypes.c_int),
                ("interrupted", ctypes.c_int)]


class GenerationInfo(ctypes.Structure):
    _fields_ = [("max_seq_len", ctypes.c_int), ("batch", ctypes.c_int),
                ("vocab_size", ctypes.c_int64), ("eos_count", ctypes.c_int),
                ("eos_token_ids", ctypes.c_int64 * 8),
                ("prefill_chunk", ctypes.c_int)]


class SamplingOptions(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_double), ("top_k", ctypes.c_int64),
                ("top_p", ctypes.c_double), ("seed", ctypes.c_uint64)]


TRAIN_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(TrainMetrics),
                                  ctypes.c_void_p)

P = ctypes.c_void_p
S = ctypes.c_int  # tailor_status
STR = ctypes.c_char_p
I64P = ctypes.POINTER(ctypes.c_int64)

# name: (restype, argtypes)
SIGNATURES = {
    "tailor_version": (STR, []),
    "tailor_last_error": (STR, []),
    "tailor_built_with_cuda": (ctypes.c_int, []),
    "tailor_plan_load": (S, [STR, ctypes.POINTER(P)]),
    "tailor_plan_free": (None, [P]),
    "tailor_plan_input_count": (ctypes.c_int, [P]),
    "tailor_plan_output_count": (ctypes.c_int, [P]),
    "tailor_plan_input_info": (S, [P, ctypes.c_int, ctypes.POINTER(TensorInfo)]),
    "tailor_plan_output_info": (S, [P, ctypes.c_int, ctypes.POINTER(TensorInfo)]),
    "tailor_plan_entry_count": (ctypes.c_int, [P]),
    "tailor_plan_entry_name": (STR, [P, ctypes.c_int]),
    "tailor_plan_input_entry": (ctypes.c_int, [P, ctypes.c_int]),
    "tailor_plan_output_entry": (ctypes.c_int, [P, ctypes.c_int]),
    "tailor_plan_parameter_count": (ctypes.c_int, [P]),
    "tailor_plan_parameter_info": (S, [P, ctypes.c_int,
                                       ctypes.POINTER(ParameterInfo)]),
    "tailor_plan_state_count": (ctypes.c_int, [P]),
    "tailor_plan_state_info": (S, [P, ctypes.c_int, ctypes.POINTER(StateInfo)]),
    "tailor_session_create": (S, [P, ctypes.POINTER(SessionOptions),
                                  ctypes.POINTER(P)]),
    "tailor_session_free": (None, [P]),
    "tailor_session_set_input": (S, [P, STR, ctypes.c_int, I64P, ctypes.c_int,
                                     P, ctypes.c_size_t]),
    "tailor_session_run": (S, [P]),
    "tailor_session_run_entry": (S, [P, STR]),
    "tailor_session_output": (S, [P, STR, ctypes.POINTER(P),
                                  ctypes.POINTER(TensorInfo)]),
    "tailor_session_tensor": (S, [P, STR, ctypes.POINTER(P),
                                  ctypes.POINTER(TensorInfo)]),
    "tailor_session_tensor_upload": (S, [P, STR]),
    "tailor_session_set_parameter": (S, [P, STR, ctypes.c_int, I64P,
                                         ctypes.c_int, P, ctypes.c_size_t]),
    "tailor_session_load_safetensors": (S, [P, STR,
                                            ctypes.POINTER(ctypes.c_int)]),
    "tailor_session_apply_adapter": (S, [P, STR]),
    "tailor_plan_generation_info": (S, [P, ctypes.POINTER(GenerationInfo)]),
    "tailor_sampling_options_init": (None, [ctypes.POINTER(SamplingOptions)]),
    "tailor_sampling_probabilities": (S, [P, ctypes.c_int64,
                                          ctypes.POINTER(SamplingOptions), P]),
    "tailor_generator_create": (S, [P, ctypes.POINTER(SessionOptions),
                                    ctypes.POINTER(SamplingOptions),
                                    ctypes.POINTER(P)]),
    "tailor_generator_free": (None, [P]),
    "tailor_generator_apply_adapter": (S, [P, STR]),
    "tailor_generator_set_sampling": (S, [P, ctypes.POINTER(SamplingOptions)]),
    "tailor_generator_prefill": (S, [P, I64P, ctypes.c_size_t]),
    "tailor_generator_decode": (S, [P, ctypes.c_int64]),
    "tailor_generator_sample": (S, [P, I64P]),
    "tailor_generator_logits": (S, [P, ctypes.POINTER(
        ctypes.POINTER(ctypes.c_float)), I64P]),
    "tailor_generator_position": (S, [P, ctypes.POINTER(ctypes.c_int)]),
    "tailor_generator_reset": (S, [P]),
    "tailor_generator_is_eos": (ctypes.c_int, [P, ctypes.c_int64]),
    "tailor_tokenizer_load": (S, [STR, ctypes.POINTER(P)]),
    "tailor_tokenizer_free": (None, [P]),
    "tailor_tokenizer_size": (ctypes.c_int64, [P]),
    "tailor_tokenizer_encode": (S, [P, STR, ctypes.c_size_t,
                                    ctypes.POINTER(I64P),
                                    ctypes.POINTER(ctypes.c_size_t)]),
    "tailor_tokenizer_decode": (S, [P, I64P, ctypes.c_size_t, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_void_p),
                                    ctypes.POINTER(ctypes.c_size_t)]),
    "tailor_trainer_options_init": (None, [ctypes.POINTER(TrainerOptions)]),
    "tailor_trainer_create": (S, [P, ctypes.POINTER(TrainerOptions),
                                  ctypes.POINTER(P)]),
    "tailor_trainer_create_from_file": (S, [STR, ctypes.POINTER(TrainerOptions),
                                            ctypes.POINTER(P)]),
    "tailor_trainer_free": (None, [P]),
    "tailor_trainer_step": (S, [P, ctypes.POINTER(TrainMetrics)]),
    "tailor_trainer_step_batch": (S, [P, I64P, I64P, ctypes.c_int64,
                                      ctypes.c_int64,
                                      ctypes.POINTER(TrainMetrics)]),
    "tailor_trainer_run": (S, [P, TRAIN_CALLBACK, P]),
    "tailor_trainer_evaluate": (S, [P, ctypes.POINTER(ctypes.c_double)]),
    "tailor_trainer_save_checkpoint": (S, [P, STR]),
    "tailor_trainer_last_checkpoint": (STR, [P]),
    "tailor_trainer_resume": (S, [P, STR]),
    "tailor_trainer_export": (S, [P, STR]),
    "tailor_trainer_request_stop": (S, [P]),
    "tailor_trainer_get_state": (S, [P, ctypes.POINTER(TrainerState)]),
}

_LIB = None


def _candidates():
    explicit = os.environ.get("TAILOR_RUNTIME_LIBRARY")
    if explicit:
        yield explicit
        return
    found = ctypes.util.find_library("tailor_runtime")
    if found:
        yield found
    yield "libtailor_runtime.so.0"
    # A build tree: python/ beside build/.
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "..", "..", "build", "lib",
                       "libtailor_runtime.so")


def lib():
    """The loaded runtime library, with every signature declared."""
    global _LIB
    if _LIB is not None:
        return _LIB
    errors = []
    for candidate in _candidates():
        try:
            loaded = ctypes.CDLL(candidate)
            break
        except OSError as e:
            errors.append(f"{candidate}: {e}")
    else:
        raise OSError("cannot load libtailor_runtime (set "
                      "TAILOR_RUNTIME_LIBRARY to its path): " +
                      "; ".join(errors))
    for name, (restype, argtypes) in SIGNATURES.items():
        function = getattr(loaded, name)
        function.restype = restype
        function.argtypes = argtypes
    _LIB = loaded
    return _LIB


def last_error():
    return (lib().tailor_last_error() or b"").decode(errors="replace")


def check(status):
    """Raises TailorError for a failed status."""
    if status != OK:
        raise TailorError(status, last_error())


def encode(text):
    return None if text is None else os.fsencode(text)


def shape_of(info):
    return tuple(int(info.shape[i]) for i in range(info.rank))
