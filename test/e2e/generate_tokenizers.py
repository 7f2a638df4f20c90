#!/usr/bin/env python3
"""tailor's tokenizers against the `tokenizers` library and SentencePiece.

Trains tokenizers here (nothing is downloaded) and checks that
tailor.Tokenizer (the C API's tailor_tokenizer_*) encodes a corpus of
strings -- ASCII, accents and combining marks, CJK, Greek, Cyrillic, emoji
(ZWJ sequences, flags), whitespace runs, digits, code, contractions, added
and special tokens inside text -- to the same ids, and decodes those ids
(with and without special tokens) to the same text, as:
  - `tokenizers` for tokenizer.json files in the styles of GPT-2
    (ByteLevel with its regex; with and without add_prefix_space),
    Llama-3 (a Split regex, ignore_merges, a BOS template) and Qwen2 (NFC,
    a Split regex), all trained with BpeTrainer;
  - the `sentencepiece` Python package for tokenizer.model files (BPE and
    unigram) trained with SentencePieceTrainer (tailor adds the BOS id, as
    transformers' Llama tokenizer does).
Also: a WordPiece tokenizer.json and a Metaspace pre-tokenizer are refused
with the file and the type named; and `tailor generate --prompt TEXT
--tokenizer tokenizer.json` on the tiny llama plan (vocabulary 256, a
byte-level BPE of 256 tokens) encodes the prompt as `tokenizers` does and
prints, streamed and in --json, the text `tokenizers` decodes from the
generated ids.

  generate_tokenizers.py --tailor build/bin/tailor \
      --cache build/test/hf-exports --runtime-lib build/lib/libtailor_runtime.so
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "generators"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

CORPUS = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure you'll see they'd DON'T we've it's",
    "naïve café résumé Ångström",
    "e\u0301 versus \u00e9 (combining acute, NFC)",
    "日本語のテキストと中文",
    "Ελληνικά και Русский текст",
    "emoji 😀🎉 family 👨‍👩‍👧‍👦 flag 🇫🇷 skin 👍🏽",
    "a   b\t\tc\n\nd  \n  e   ",
    "   leading and trailing   ",
    "\n\n\n",
    "digits 1234567890 3.14159 1e-9 0x1F 2024-11-26",
    "def f(x):\n    return x ** 2  # square\n\tif x != 0: pass",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "<|endoftext|>between<|endoftext|> specials",
    "user: hi<|im_end|>\nassistant:",
    "mixed123abc!!!???...---",
]

TRAINING = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "Hello world, hello tailor; generation with a KV cache.",
    "naïve café résumé Ångström über straße",
    "日本語のテキスト 中文文本 한국어",
    "Ελληνικά Русский текст",
    "def f(x):\n    return x ** 2\nfor i in range(10): print(i)",
    "I'm you'll they'd don't we've it's 12345 67890 3.14",
    "emoji 😀 🎉 👍",
] * 20

GPT2_PATTERN = None  # ByteLevel(use_regex=True) carries GPT-2's own
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                  r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                  r"\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                 r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def train_bpe(style, vocab_size, path, with_specials=True):
    """A byte-level BPE tokenizer.json in the style of GPT-2, Llama-3 or
    Qwen2, trained on TRAINING."""
    from tokenizers import (Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors, trainers)
    specials = ["<|endoftext|>", "<|im_end|>"]
    if style == "llama3":
        specials = ["<|begin_of_text|>"] + specials
    if not with_specials:
        specials = []
    tokenizer = Tokenizer(models.BPE(ignore_merges=(style == "llama3")))
    if style in ("gpt2", "gpt2-prefix"):
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(
            add_prefix_space=(style == "gpt2-prefix"))
    else:
        pattern = LLAMA3_PATTERN if style == "llama3" else QWEN2_PATTERN
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if style == "qwen2":
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False)
    tokenizer.train_from_iterator(TRAINING, trainer)
    if style == "llama3":
        bos = tokenizer.token_to_id("<|begin_of_text|>")
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A",
            special_tokens=[("<|begin_of_text|>", bos)])
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.save(path)
    return tokenizer


def check_json(work):
    import tailor
    failures = []
    for style in ("gpt2", "gpt2-prefix", "llama3", "qwen2"):
        path = os.path.join(work, f"{style}.json")
        reference = train_bpe(style, 600, path)
        ours = tailor.Tokenizer(path)
        if len(ours) != reference.get_vocab_size():
            failures.append(f"{style}: size {len(ours)} != "
                            f"{reference.get_vocab_size()}")
        tokens = 0
        for text in CORPUS:
            want = reference.encode(text).ids
            got = ours.encode(text)
            tokens += len(want)
            if got != want:
                failures.append(f"{style}: encode {text!r}: {got} != {want}")
                continue
            for skip in (False, True):
                want_text = reference.decode(want, skip_special_tokens=skip)
                got_text = ours.decode(want, skip_special_tokens=skip)
                if got_text != want_text:
                    failures.append(f"{style}: decode {want} (skip special "
                                    f"{skip}): {got_text!r} != "
                                    f"{want_text!r}")
        if not failures:
            print(f"tokenizer.json {style}: {len(CORPUS)} strings ({tokens} "
                  "ids) encode and decode as tokenizers does")
    return failures


def check_sentencepiece(work):
    import sentencepiece as spm
    import tailor
    failures = []
    for model_type in ("bpe", "unigram"):
        prefix = os.path.join(work, f"sp-{model_type}")
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(TRAINING), model_prefix=prefix,
            vocab_size=200, hard_vocab_limit=False, model_type=model_type,
            character_coverage=1.0,
            minloglevel=2)
        path = prefix + ".model"
        reference = spm.SentencePieceProcessor(model_file=path)
        ours = tailor.Tokenizer(path)
        tokens = 0
        for text in CORPUS:
            want = [reference.bos_id()] + reference.encode(text)
            got = ours.encode(text)
            tokens += len(want)
            if got != want:
                failures.append(f"sentencepiece {model_type}: encode "
                                f"{text!r}: {got} != {want}")
                continue
            want_text = reference.decode(want)
            got_text = ours.decode(want)
            if got_text != want_text:
                failures.append(f"sentencepiece {model_type}: decode {want}: "
                                f"{got_text!r} != {want_text!r}")
        if not failures:
            print(f"tokenizer.model {model_type}: {len(CORPUS)} strings "
                  f"({tokens} ids) encode and decode as sentencepiece does")
    return failures


def check_refusals(work):
    from tokenizers import Tokenizer, models, pre_tokenizers
    import tailor
    failures = []
    wordpiece = os.path.join(work, "wordpiece.json")
    Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]")).save(
        wordpiece)
    metaspace = os.path.join(work, "metaspace.json")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.save(metaspace)
    for path, expect in ((wordpiece, "'WordPiece'"),
                         (metaspace, "'Metaspace'")):
        try:
            tailor.Tokenizer(path)
            failures.append(f"{path}: loaded, expected a refusal")
        except tailor.TailorError as e:
            if path not in str(e) or expect not in str(e):
                failures.append(f"{path}: the error does not name the file "
                                f"and {expect}: {e}")
    if not failures:
        print("refusals: WordPiece and Metaspace tokenizer.json name the "
              "file and the type")
    return failures


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True)
    # Bytes a random model's tokens spell need not be UTF-8: shown as
    # U+FFFD, as tokenizers' decode shows them.
    proc.stdout = proc.stdout.decode(errors="replace")
    proc.stderr = proc.stderr.decode(errors="replace")
    return proc


def check_command(args, work):
    """tailor generate --prompt on the tiny llama plan (vocabulary 256)."""
    from hf_common import cache_key, case_name, export_case
    case = ("llama", "torchscript", 17)
    out_dir = os.path.join(args.cache, cache_key(), case_name(*case, False))
    model_path, err = export_case((*case, False, out_dir))
    if err:
        return [f"llama export failed: {err[-500:]}"]
    model_dir = os.path.join(work, "llama")
    os.makedirs(model_dir)
    shutil.copy(model_path, os.path.join(model_dir, "model.onnx"))
    plan = os.path.join(model_dir, "generate.tplan")
    proc = run([args.tailor, "compile", os.path.join(model_dir, "model.onnx"),
                "--task", "generate", "--max-seq-len", "64", "-o", plan])
    if proc.returncode != 0:
        return [f"compile failed: {proc.stderr[-800:]}"]
    # 256 tokens: the byte alphabet alone, so every id the model can
    # generate has text.
    tok_path = os.path.join(work, "tokenizer-256.json")
    reference = train_bpe("gpt2", 256, tok_path, with_specials=False)
    if reference.get_vocab_size() > 256:
        return [f"the 256-token tokenizer has {reference.get_vocab_size()}"]
    failures = []
    prompt = "Hi there 😀"
    proc = run([args.tailor, "generate", plan, "--prompt", prompt,
                "--tokenizer", tok_path, "--json"])
    if proc.returncode != 0:
        return [f"generate --prompt --json failed: {proc.stderr[-600:]}"]
    got = json.loads(proc.stdout)
    want_ids = reference.encode(prompt).ids
    want_text = reference.decode(got["generated_ids"],
                                 skip_special_tokens=True)
    if got["prompt_ids"] != want_ids:
        failures.append(f"--prompt ids {got['prompt_ids']} != tokenizers "
                        f"{want_ids}")
    if got.get("text") != want_text:
        failures.append(f"--json text {got.get('text')!r} != tokenizers "
                        f"{want_text!r}")
    # Streamed text: the same tokens (greedy), printed as they come.
    streamed = run([args.tailor, "generate", plan, "--prompt", prompt,
                    "--tokenizer", tok_path])
    if streamed.returncode != 0 or streamed.stdout != want_text + "\n":
        failures.append(f"streamed text {streamed.stdout!r} != "
                        f"{want_text + chr(10)!r} ({streamed.stderr[-300:]})")
    # The tokenizer found beside the plan.
    shutil.copy(tok_path, os.path.join(model_dir, "tokenizer.json"))
    beside = run([args.tailor, "generate", plan, "--prompt", prompt, "--json"])
    if beside.returncode != 0 or json.loads(beside.stdout)["prompt_ids"] != \
            want_ids:
        failures.append(f"tokenizer.json beside the plan not used: "
                        f"{beside.stdout[-300:]} {beside.stderr[-300:]}")
    missing = run([args.tailor, "generate", plan, "--prompt", prompt,
                   "--tokenizer", os.path.join(work, "none.json")])
    if missing.returncode != 1 or "none.json" not in missing.stderr:
        failures.append(f"a missing tokenizer: exit {missing.returncode}: "
                        f"{missing.stderr[-300:]}")
    if not failures:
        print(f"tailor generate --prompt: ids {want_ids} as tokenizers, "
              f"text {want_text[:40]!r}... streamed and in --json")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tailor", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--runtime-lib", required=True)
    args = parser.parse_args()
    os.environ["TAILOR_RUNTIME_LIBRARY"] = args.runtime_lib
    # torch first: its CUDA libraries must load before the runtime's NCCL.
    import torch  # noqa: F401
    failures = []
    with tempfile.TemporaryDirectory() as work:
        failures += check_json(work)
        failures += check_sentencepiece(work)
        failures += check_refusals(work)
        failures += check_command(args, work)
    for failure in failures:
        print("FAIL", failure)
    if failures:
        sys.exit(1)
    print("generate_tokenizers: all checks passed")


if __name__ == "__main__":
    main()
