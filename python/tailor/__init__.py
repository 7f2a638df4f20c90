"""tailor: run and train compiled tailor plans from Python (ctypes over
libtailor_runtime; see python/README.md)."""

from ._capi import TailorError
from .generate import Generator, Tokenizer, sampling_probabilities
from .session import InferenceSession, NodeArg, Parameter, Plan, State
from .trainer import StepMetrics, Trainer


def version():
    """The runtime library's version."""
    from ._capi import lib

    return lib().tailor_version().decode()


__all__ = ["Generator", "InferenceSession", "NodeArg", "Parameter", "Plan",
           "State", "StepMetrics", "TailorError", "Tokenizer", "Trainer",
           "sampling_probabilities", "version"]
