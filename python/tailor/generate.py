"""Generation from Python: tailor.Generator over the C API's
tailor_generator_* (a generation plan's decode and prefill entries, the KV
cache, greedy choice or transformers-style sampling),
sampling_probabilities, the warped
distribution a sampling generator draws from, and tailor.Tokenizer
(tokenizer.json byte-level BPE or SentencePiece tokenizer.model)."""

import ctypes

import numpy as np

from . import _capi
from ._capi import check, encode, lib
from .session import Plan


def _sampling(temperature, top_k, top_p, seed):
    options = _capi.SamplingOptions()
    lib().tailor_sampling_options_init(ctypes.byref(options))
    options.temperature = float(temperature)
    options.top_k = int(top_k)
    options.top_p = float(top_p)
    options.seed = int(seed)
    return options


def sampling_probabilities(logits, temperature=0.0, top_k=0, top_p=1.0):
    """The probabilities a generator with these options draws from for one
    row of logits (transformers' temperature, top-k then top-p warpers,
    then softmax; filtered tokens exactly 0; one-hot when temperature is
    0), as float64."""
    row = np.ascontiguousarray(np.asarray(logits, dtype=np.float32).reshape(-1))
    out = np.empty(row.shape[0], dtype=np.float64)
    options = _sampling(temperature, top_k, top_p, 0)
    check(lib().tailor_sampling_probabilities(
        row.ctypes.data, row.shape[0], ctypes.byref(options), out.ctypes.data))
    return out


class Generator(_capi.Handle):
    """Decodes with a generation plan (`tailor compile --task generate`):

        gen = tailor.Generator("g.tplan", temperature=0.8, top_p=0.9, seed=1)
        ids = gen.generate([1, 2, 3], max_new_tokens=20)

    or step by step with prefill / sample / decode. Greedy when temperature
    is 0. Used by one thread at a time."""

    _free = "tailor_generator_free"
    _what = "generator"

    def __init__(self, plan, temperature=0.0, top_k=0, top_p=1.0, seed=0,
                 num_threads=0, adapter=None):
        super().__init__()
        self._plan = plan if isinstance(plan, Plan) else Plan(plan)
        options = _capi.SessionOptions(num_threads)
        sampling = _sampling(temperature, top_k, top_p, seed)
        check(lib().tailor_generator_create(
            self._plan.handle, ctypes.byref(options), ctypes.byref(sampling),
            ctypes.byref(self._handle)))
        if adapter is not None:
            check(lib().tailor_generator_apply_adapter(
                self._live(), encode(str(adapter))))

    def set_sampling(self, temperature=0.0, top_k=0, top_p=1.0, seed=0):
        sampling = _sampling(temperature, top_k, top_p, seed)
        check(lib().tailor_generator_set_sampling(self._live(),
                                                  ctypes.byref(sampling)))

    def prefill(self, ids):
        """Feeds tokens at the next positions of the cache: through the
        plan's prefill entry a chunk at a time when it has one (see
        prefill_chunk) and there are two or more, else a token at a time."""
        array = np.ascontiguousarray(np.asarray(ids, dtype=np.int64))
        check(lib().tailor_generator_prefill(
            self._live(), array.ctypes.data_as(_capi.I64P), array.size))

    def decode(self, token):
        check(lib().tailor_generator_decode(self._live(), int(token)))

    def sample(self):
        """The next token chosen from the last token's logits."""
        token = ctypes.c_int64()
        check(lib().tailor_generator_sample(self._live(), ctypes.byref(token)))
        return token.value

    def logits(self):
        """A copy of the last token's logits (row 0)."""
        data = ctypes.POINTER(ctypes.c_float)()
        vocab = ctypes.c_int64()
        check(lib().tailor_generator_logits(self._live(), ctypes.byref(data),
                                            ctypes.byref(vocab)))
        return np.ctypeslib.as_array(data, shape=(vocab.value,)).copy()

    @property
    def prefill_chunk(self):
        """Prompt tokens per run of the plan's prefill entry (0: none)."""
        info = _capi.GenerationInfo()
        check(lib().tailor_plan_generation_info(self._plan.handle,
                                                ctypes.byref(info)))
        return info.prefill_chunk

    @property
    def position(self):
        position = ctypes.c_int()
        check(lib().tailor_generator_position(self._live(),
                                              ctypes.byref(position)))
        return position.value

    def reset(self):
        check(lib().tailor_generator_reset(self._live()))

    def is_eos(self, token):
        return bool(lib().tailor_generator_is_eos(self._live(), int(token)))

    def generate(self, prompt, max_new_tokens=20):
        """Prefills `prompt` and returns up to `max_new_tokens` new ids
        (stopping after an eos id or when the cache is full)."""
        info = _capi.GenerationInfo()
        check(lib().tailor_plan_generation_info(self._plan.handle,
                                                ctypes.byref(info)))
        self.prefill(prompt)
        ids = []
        while True:
            token = self.sample()
            ids.append(token)
            if (self.is_eos(token) or len(ids) >= max_new_tokens
                    or self.position >= info.max_seq_len):
                return ids
            self.decode(token)


class Tokenizer(_capi.Handle):
    """A model's tokenizer (tailor_tokenizer): `path` is a tokenizer.json,
    a tokenizer.model or a directory holding one."""

    _free = "tailor_tokenizer_free"
    _what = "tokenizer"

    def __init__(self, path):
        super().__init__()
        check(lib().tailor_tokenizer_load(encode(str(path)),
                                          ctypes.byref(self._handle)))

    def __len__(self):
        return int(lib().tailor_tokenizer_size(self._live()))

    def encode(self, text):
        """The ids of `text` (special tokens the tokenizer adds included)."""
        data = text.encode("utf-8")
        ids = _capi.I64P()
        count = ctypes.c_size_t()
        check(lib().tailor_tokenizer_encode(self._live(), data, len(data),
                                            ctypes.byref(ids),
                                            ctypes.byref(count)))
        return [int(ids[i]) for i in range(count.value)]

    def decode_bytes(self, ids, skip_special_tokens=False):
        """The bytes of `ids` (byte-level tokens may split a character)."""
        array = np.ascontiguousarray(np.asarray(ids, dtype=np.int64))
        text = ctypes.c_void_p()
        length = ctypes.c_size_t()
        check(lib().tailor_tokenizer_decode(
            self._live(), array.ctypes.data_as(_capi.I64P), array.size,
            int(bool(skip_special_tokens)), ctypes.byref(text),
            ctypes.byref(length)))
        return ctypes.string_at(text, length.value) if length.value else b""

    def decode(self, ids, skip_special_tokens=False):
        """The text of `ids` (invalid UTF-8 replaced by U+FFFD)."""
        return self.decode_bytes(ids, skip_special_tokens).decode(
            "utf-8", errors="replace")
