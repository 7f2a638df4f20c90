"""Plans and inference sessions: tailor.Plan and tailor.InferenceSession
(shaped like onnxruntime.InferenceSession)."""

import ctypes
from dataclasses import dataclass

import numpy as np

from . import _capi
from ._capi import check, encode, lib


@dataclass(frozen=True)
class NodeArg:
    """An input or output, as onnxruntime's NodeArg describes one."""
    name: str
    shape: tuple
    type: str
    dtype: np.dtype


@dataclass(frozen=True)
class Parameter:
    """A parameter of a plan (tailor_parameter_info)."""
    name: str
    file_name: str
    shape: tuple
    dtype: np.dtype
    trainable: bool
    quantized: bool
    sharded: bool
    transposed: bool


@dataclass(frozen=True)
class State:
    """A training state, `<parameter>.<kind>` (tailor_state_info)."""
    name: str
    parameter: str
    kind: str
    shape: tuple
    dtype: np.dtype
    sharded: bool


class Plan(_capi.Handle):
    """A loaded, verified plan file (tailor_plan)."""

    _free = "tailor_plan_free"
    _what = "plan"

    def __init__(self, path):
        super().__init__()
        check(lib().tailor_plan_load(encode(str(path)),
                                     ctypes.byref(self._handle)))
        self.path = str(path)

    @property
    def handle(self):
        return self._live()

    def _binding(self, getter, index):
        info = _capi.TensorInfo()
        check(getter(self.handle, index, ctypes.byref(info)))
        return NodeArg(info.name.decode(), _capi.shape_of(info),
                       _capi.ORT_TYPES[info.dtype], _capi.DTYPES[info.dtype])

    def inputs(self, entry=None):
        """The inputs (of entry `entry`, a name, when given)."""
        c = lib()
        return [self._binding(c.tailor_plan_input_info, i)
                for i in range(c.tailor_plan_input_count(self.handle))
                if entry is None or
                self.entries()[c.tailor_plan_input_entry(self.handle, i)] == entry]

    def outputs(self, entry=None):
        c = lib()
        return [self._binding(c.tailor_plan_output_info, i)
                for i in range(c.tailor_plan_output_count(self.handle))
                if entry is None or
                self.entries()[c.tailor_plan_output_entry(self.handle, i)] == entry]

    def entries(self):
        c = lib()
        return [c.tailor_plan_entry_name(self.handle, i).decode()
                for i in range(c.tailor_plan_entry_count(self.handle))]

    def parameters(self):
        c = lib()
        result = []
        for i in range(c.tailor_plan_parameter_count(self.handle)):
            info = _capi.ParameterInfo()
            check(c.tailor_plan_parameter_info(self.handle, i,
                                               ctypes.byref(info)))
            result.append(Parameter(
                info.name.decode(), info.file_name.decode(),
                _capi.shape_of(info), _capi.DTYPES[info.dtype],
                bool(info.trainable), bool(info.quantized),
                bool(info.sharded), bool(info.transposed)))
        return result

    def states(self):
        c = lib()
        result = []
        for i in range(c.tailor_plan_state_count(self.handle)):
            info = _capi.StateInfo()
            check(c.tailor_plan_state_info(self.handle, i, ctypes.byref(info)))
            result.append(State(info.name.decode(), info.parameter.decode(),
                                info.kind.decode(), _capi.shape_of(info),
                                _capi.DTYPES[info.dtype], bool(info.sharded)))
        return result


class InferenceSession(_capi.Handle):
    """Runs a plan on NumPy arrays, as onnxruntime.InferenceSession does:

        session = tailor.InferenceSession("model.tplan")
        logits, = session.run(["logits"], {"input_ids": ids})

    `plan` is a path or a tailor.Plan; `num_threads` 0 lets the runtime
    choose. A session is used by one thread at a time."""

    _free = "tailor_session_free"
    _what = "session"

    def __init__(self, plan, num_threads=0):
        super().__init__()
        self._plan = plan if isinstance(plan, Plan) else Plan(plan)
        options = _capi.SessionOptions(num_threads)
        check(lib().tailor_session_create(self._plan.handle,
                                          ctypes.byref(options),
                                          ctypes.byref(self._handle)))
        self._entry = self._plan.entries()[0]

    @property
    def plan(self):
        return self._plan


    def get_inputs(self):
        """The first entry's inputs (the forward pass of an inference
        plan)."""
        return self._plan.inputs(self._entry)

    def get_outputs(self):
        return self._plan.outputs(self._entry)

    def set_input(self, name, array):
        """Copies `array` into input `name` (its dtype and shape must be the
        plan's)."""
        # np.ascontiguousarray makes a scalar 1-D; keep rank 0 inputs so.
        array = np.asarray(array)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        shape = (ctypes.c_int64 * max(1, array.ndim))(*array.shape)
        dtype = _dtype_code(array.dtype, name)
        check(lib().tailor_session_set_input(
            self._live(), name.encode(), dtype, shape, array.ndim,
            array.ctypes.data_as(ctypes.c_void_p), array.nbytes))

    def output(self, name):
        """A copy of output `name` after the last run."""
        data = ctypes.c_void_p()
        info = _capi.TensorInfo()
        check(lib().tailor_session_output(self._live(), name.encode(),
                                          ctypes.byref(data),
                                          ctypes.byref(info)))
        return _copy_out(data, info)

    def run(self, output_names, input_feed, run_options=None):
        """Sets the inputs of `input_feed` (name -> array), runs the first
        entry and returns copies of `output_names` (None: every output), as
        a list of NumPy arrays."""
        for name, array in input_feed.items():
            self.set_input(name, array)
        check(lib().tailor_session_run_entry(self._live(),
                                             self._entry.encode()))
        if output_names is None:
            output_names = [o.name for o in self.get_outputs()]
        return [self.output(name) for name in output_names]

    def run_entry(self, entry):
        """Runs entry `entry` ("train_step", "optimizer_step", ...)."""
        check(lib().tailor_session_run_entry(self._live(), entry.encode()))

    def get_tensor(self, name):
        """A copy of parameter or state `name`."""
        data = ctypes.c_void_p()
        info = _capi.TensorInfo()
        check(lib().tailor_session_tensor(self._live(), name.encode(),
                                          ctypes.byref(data),
                                          ctypes.byref(info)))
        return _copy_out(data, info)

    def set_parameter(self, name, array):
        """Writes parameter `name` from `array` (the plan's dtype and
        shape; see Plan.parameters)."""
        array = np.ascontiguousarray(array)
        shape = (ctypes.c_int64 * max(1, array.ndim))(*array.shape)
        check(lib().tailor_session_set_parameter(
            self._live(), name.encode(), _dtype_code(array.dtype, name),
            shape, array.ndim, array.ctypes.data_as(ctypes.c_void_p),
            array.nbytes))

    def load_safetensors(self, path):
        """Loads the parameters a safetensors file names; their count."""
        loaded = ctypes.c_int(0)
        check(lib().tailor_session_load_safetensors(
            self._live(), encode(str(path)), ctypes.byref(loaded)))
        return loaded.value

    def apply_adapter(self, directory):
        """Applies a PEFT LoRA adapter directory (merged into the base
        weights of a forward plan)."""
        check(lib().tailor_session_apply_adapter(self._live(),
                                                 encode(str(directory))))


def _dtype_code(dtype, name):
    for code, candidate in _capi.DTYPES.items():
        if candidate == dtype and code != 3:  # bf16 is not a NumPy dtype
            return code
    raise TypeError(f"'{name}': NumPy dtype {dtype} has no tailor dtype")


def _copy_out(data, info):
    dtype = _capi.DTYPES[info.dtype]
    shape = _capi.shape_of(info)
    if info.bytes == 0:
        return np.zeros(shape, dtype)
    buffer = (ctypes.c_uint8 * info.bytes).from_address(data.value)
    return np.frombuffer(buffer, dtype=dtype).reshape(shape).copy()
