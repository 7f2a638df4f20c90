"""tailor.Trainer: a compiled training plan driven from Python, as `tailor
train` drives it (both go through the C API's tailor_trainer)."""

import ctypes
import os
from dataclasses import dataclass
from typing import Optional

from . import _capi
from ._capi import check, encode, lib
from .session import Plan


@dataclass(frozen=True)
class StepMetrics:
    """One optimizer step (a line of OUTPUT_DIR/metrics.jsonl)."""
    step: int
    loss: float
    lr: float
    grad_norm: float
    tokens_per_s: float
    seconds: float
    epoch: float
    eval_loss: Optional[float]
    stopped: bool
    # fp16 plans: the loss scale the step used (None otherwise), and whether
    # an inf/NaN gradient skipped its update.
    loss_scale: Optional[float] = None
    skipped: bool = False

    @staticmethod
    def of(metrics):
        return StepMetrics(
            int(metrics.step), metrics.loss, metrics.lr, metrics.grad_norm,
            metrics.tokens_per_s, metrics.seconds, metrics.epoch,
            metrics.eval_loss if metrics.has_eval_loss else None,
            bool(metrics.stopped),
            metrics.loss_scale if metrics.loss_scale > 0 else None,
            bool(metrics.skipped))


class Trainer(_capi.Handle):
    """Trains plan `plan` (a path or a tailor.Plan) on `data` (a token .bin
    file, a directory or glob of them, a .jsonl file, "dummy", or None: the
    caller gives each step's batch to step()), writing
    metrics.jsonl, checkpoints and the final adapter into `output_dir`:

        trainer = tailor.Trainer("lora.tplan", data="train.jsonl",
                                 output_dir="out")
        trainer.step()                    # one step: StepMetrics
        trainer.train()                   # to max_steps, final adapter
        trainer.save_adapter("adapter")   # loads in PeftModel.from_pretrained

    The other arguments are tailor train's options (None or 0: the plan's).
    A trainer is used by one thread at a time; request_stop() may come from
    any thread."""

    _free = "tailor_trainer_free"
    _what = "trainer"

    def __init__(self, plan, data, output_dir, eval_data=None,
                 data_dtype="uint16", resume=None, init_adapter=None,
                 max_steps=0, save_steps=-1, num_threads=0,
                 print_progress=False):
        super().__init__()
        options = _capi.TrainerOptions()
        lib().tailor_trainer_options_init(ctypes.byref(options))
        # The C strings must outlive the create call only.
        options.data_path = encode(data and os.fspath(data))
        options.output_dir = encode(os.fspath(output_dir))
        options.eval_data_path = encode(eval_data and os.fspath(eval_data))
        options.data_dtype = encode(data_dtype)
        options.resume = encode(resume and os.fspath(resume))
        options.init_adapter = encode(init_adapter and os.fspath(init_adapter))
        options.max_steps = max_steps
        options.save_steps = save_steps
        options.num_threads = num_threads
        options.print_progress = 1 if print_progress else 0
        if isinstance(plan, Plan):
            check(lib().tailor_trainer_create(plan.handle,
                                              ctypes.byref(options),
                                              ctypes.byref(self._handle)))
        else:
            check(lib().tailor_trainer_create_from_file(
                encode(os.fspath(plan)), ctypes.byref(options),
                ctypes.byref(self._handle)))
        self.output_dir = os.fspath(output_dir)

    def step(self, input_ids=None, labels=None):
        """Trains one optimizer step; its StepMetrics. A trainer made with
        data=None takes each step's batch here: `input_ids` (and `labels`,
        default the ids; -100 ignored), integer arrays of
        [gradient_accumulation_steps x micro_batch_size, sequence_len]."""
        metrics = _capi.TrainMetrics()
        if input_ids is None:
            if labels is not None:
                raise ValueError("labels without input_ids")
            check(lib().tailor_trainer_step(self._live(),
                                            ctypes.byref(metrics)))
            return StepMetrics.of(metrics)
        import numpy as np

        ids = np.ascontiguousarray(input_ids, dtype=np.int64)
        if ids.ndim != 2:
            raise ValueError(f"input_ids must be 2-D [rows, sequence_len], "
                             f"got shape {ids.shape}")
        targets = None
        if labels is not None:
            targets = np.ascontiguousarray(labels, dtype=np.int64)
            if targets.shape != ids.shape:
                raise ValueError(f"labels have shape {targets.shape}, "
                                 f"input_ids {ids.shape}")
        pointer = lambda a: (None if a is None else
                             a.ctypes.data_as(_capi.I64P))
        check(lib().tailor_trainer_step_batch(
            self._live(), pointer(ids), pointer(targets), ids.shape[0],
            ids.shape[1], ctypes.byref(metrics)))
        return StepMetrics.of(metrics)

    def train(self, callback=None):
        """Trains to max_steps (or until a stop), then writes the final
        adapter (or model) into output_dir. `callback(StepMetrics)` sees each
        step; returning True stops after that step (with a checkpoint). An
        exception in the callback stops the run and is raised here."""
        raised = []

        def observe(metrics, _user):
            try:
                return 1 if callback(StepMetrics.of(metrics.contents)) else 0
            except BaseException as e:  # noqa: BLE001 - re-raised below
                raised.append(e)
                return 1

        hook = _capi.TRAIN_CALLBACK(observe) if callback else \
            _capi.TRAIN_CALLBACK()
        status = lib().tailor_trainer_run(self._live(), hook, None)
        if raised:
            raise raised[0]
        check(status)

    def evaluate(self):
        """The validation loss of the current weights."""
        loss = ctypes.c_double()
        check(lib().tailor_trainer_evaluate(self._live(),
                                            ctypes.byref(loss)))
        return loss.value

    def save_checkpoint(self, output_dir=None):
        """Writes DIR/checkpoint-<step> (DIR: output_dir, or the trainer's);
        its path."""
        check(lib().tailor_trainer_save_checkpoint(
            self._live(), encode(output_dir and os.fspath(output_dir))))
        return lib().tailor_trainer_last_checkpoint(self._live()).decode()

    def resume(self, checkpoint="latest"):
        """Restores a checkpoint directory ("latest": the newest in
        output_dir)."""
        check(lib().tailor_trainer_resume(self._live(),
                                          encode(os.fspath(checkpoint))))

    def save_adapter(self, directory):
        """Writes the PEFT adapter (full fine-tuning: the model) of the
        current weights into `directory`."""
        check(lib().tailor_trainer_export(self._live(),
                                          encode(os.fspath(directory))))

    def request_stop(self):
        check(lib().tailor_trainer_request_stop(self._live()))

    def _state(self):
        state = _capi.TrainerState()
        check(lib().tailor_trainer_get_state(self._live(),
                                             ctypes.byref(state)))
        return state

    @property
    def global_step(self):
        return int(self._state().step)

    @property
    def max_steps(self):
        return int(self._state().max_steps)

    @property
    def interrupted(self):
        return bool(self._state().interrupted)

    @property
    def last_checkpoint(self):
        return lib().tailor_trainer_last_checkpoint(self._live()).decode()
