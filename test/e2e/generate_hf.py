#!/usr/bin/env python3
"""`tailor generate` against transformers' greedy `generate`.

For each family (tiny random-init Hugging Face models exported by
torch.onnx's TorchScript exporter at opset 17 and by its dynamo exporter at
opset 18, fp32; the exports hf_common caches), compiles a generation plan (`tailor compile --task generate
--max-seq-len 64 --prefill-chunk 8`) and checks that:
  - `tailor generate --prompt-ids ... --max-new-tokens 20 --json` gives the
    ids `model.generate(input_ids, max_new_tokens=20, do_sample=False)`
    gives, token for token, for prompts of 1, 5, 8, 12 and 19 tokens
    (shorter than, equal to and longer than the prefill chunk: the prompt
    runs through the prefill entry, its tail chunk padded; the model's
    config.json beside the model gives both the same eos id);
  - the logits after the prompt match the model's last-position logits to
    1e-4 both ways: the prefill entry (tailor.Generator.prefill, chunks of
    8) and the decode entry run once per prompt token (through the Python
    binding);
  - a padded tail chunk's rows are harmless: prefilling 12 tokens (the
    tail chunk 4 real rows and 4 of padding) with two different paddings
    leaves different keys in cache rows 12..15, yet the 8 decode steps
    after it (which overwrite those rows) give the same logits to 1e-6,
    and the logits of the token-at-a-time path to 1e-4 (llama, and the
    sliding-window Mistral);
  - a plan compiled with --prefill-chunk 1 has no prefill entry and
    generates the same ids token by token (llama);
  - generation stops at the eos id of the config.json beside the model
    (one set to a token greedy decoding reaches), as transformers does;
  - with a PEFT LoRA adapter (r 4, non-zero lora_B, on an attention and
    an MLP projection: q_proj, v_proj and down_proj or fc2; GPT-2's
    Conv1D c_attn and c_fc; Falcon's query_key_value and dense_4h_to_h,
    BLOOM's query_key_value and dense) bound at compile time (`--task
    generate --adapter DIR`) and merged at load (`tailor generate
    --adapter DIR` on the plain plan), the ids equal the PEFT model's
    `generate` (every family and exporter; 5 prompts on llama_ts17, the
    5- and 12-token ones elsewhere), and the logits after the longest
    prompt PEFT's to 1e-4. GPT-2's adapter says fan_in_fan_out (Conv1D
    stores [in, out]; the merge adds (B A)^T); with that flag flipped,
    `generate --adapter` still merges as the weights' layout (which the
    plan records) requires, as PEFT does, and warns naming the flag: the
    same ids as PEFT (every family);
  - a prompt longer than the cache, an id outside the vocabulary and a
    forward (non-generation) plan are refused with exit code 1.
Families: every family of the HF matrix, both exporters. Dynamo exports
compute their rotary tables at run time from `inv_freq` (decode gathers
the rows of the table computed for positions 0..N-1 at the step's
positions: passes/graph/PositionRows.h) and BLOOM's ALiBi as slopes times
the key positions (a bias over the keys alone, which decode keeps for the
cache's N rows).

  generate_hf.py --tailor build/bin/tailor --cache build/test/hf-exports \
      --runtime-lib build/lib/libtailor_runtime.so [--families llama,gpt2]
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

from hf_common import FAMILIES, cache_key, case_name, export_case  # noqa: E402

MAX_SEQ_LEN = 64
PREFILL_CHUNK = 8
NEW_TOKENS = 20
ATOL = 1e-4


def hf_model(family, sidecar):
    """The exported model in PyTorch, as a Hugging Face causal LM again."""
    import export_hf
    model, _, _ = export_hf.build_model(
        family, seed=0, attn_implementation=sidecar.get("attn_implementation"))
    # build_model swaps in a logits-only subclass; generate needs the real one.
    model.__class__ = model.__class__.__bases__[0]
    return model.eval()


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def generate_ids(args, plan, prompt, new_tokens=NEW_TOKENS, flags=()):
    """(ids, json) of `tailor generate`, or (None, stderr)."""
    proc = run([args.tailor, "generate", plan, "--prompt-ids",
                ",".join(map(str, prompt)), "--max-new-tokens",
                str(new_tokens), "--json", *flags])
    if proc.returncode != 0:
        return None, proc.stderr[-800:]
    got = json.loads(proc.stdout)
    return got["generated_ids"], got


def greedy(model, prompt, eos):
    import torch
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS,
                             do_sample=False, eos_token_id=eos,
                             pad_token_id=eos if eos is not None else 0)
    return [int(x) for x in out[0, len(prompt):]]


def check_eos(args, family, model, onnx_path, prompt, want, work):
    """A config.json whose eos id is the third generated token stops both
    tailor and transformers right after it."""
    stop = want[2]
    eos_dir = os.path.join(work, family + "-eos")
    os.makedirs(eos_dir)
    shutil.copy(onnx_path, os.path.join(eos_dir, "model.onnx"))
    config = model.config.to_dict()
    config["eos_token_id"] = [stop]
    json.dump(config, open(os.path.join(eos_dir, "config.json"), "w"))
    plan = os.path.join(eos_dir, "generate.tplan")
    proc = run([args.tailor, "compile", os.path.join(eos_dir, "model.onnx"),
                "--task", "generate", "--max-seq-len", str(MAX_SEQ_LEN),
                "-o", plan])
    if proc.returncode != 0:
        return [f"{family} eos: compile failed: {proc.stderr[-800:]}"]
    got, info = generate_ids(args, plan, prompt)
    expected = want[:want.index(stop) + 1]
    hf = greedy(model, prompt, stop)
    if got != expected or hf != expected:
        return [f"{family} eos {stop}: tailor {got}, transformers {hf}, "
                f"expected {expected}"]
    print(f"{family}: eos {stop} stops after {len(got)} ids, as transformers")
    return []


# LoRA targets per family: an attention projection and an MLP one (GPT-2's
# Conv1D layers store [in, out], so PEFT sets fan_in_fan_out; Falcon and
# BLOOM fuse q, k and v into query_key_value). Each family has a
# non-square target, whose shape alone would show a flipped flag.
ADAPTER_TARGETS = {
    "gpt2": ["c_attn", "c_fc"],
    "phi": ["q_proj", "v_proj", "fc2"],
    "falcon": ["query_key_value", "dense_4h_to_h"],
    "bloom": ["query_key_value", "dense"],
}
# The random lora_B's scale. BLOOM's tiny model repeats the prompt's last
# token (its tied embedding dominates the logits): at 0.2 no greedy id
# moves, so the check could not tell an adapter from none.
LORA_B_SCALE = {"bloom": 1.0}
# Families whose layers store [in, out] (Conv1D): PEFT writes
# fan_in_fan_out true in their adapter_config.json.
FAN_IN_FAN_OUT = {"gpt2"}


def check_flipped_fan_in_fan_out(args, family, base_plan, adapter, prompt,
                                 want):
    """The adapter with fan_in_fan_out flipped: the merge follows the
    weights' layout the plan records, not the flag (as PEFT follows the
    module type), warns naming the flag, and decodes PEFT's ids `want`."""
    flipped = adapter + "-flipped"
    shutil.copytree(adapter, flipped)
    path = os.path.join(flipped, "adapter_config.json")
    config = json.load(open(path))
    config["fan_in_fan_out"] = not config["fan_in_fan_out"]
    json.dump(config, open(path, "w"))
    proc = run([args.tailor, "generate", base_plan, "--prompt-ids",
                ",".join(map(str, prompt)), "--max-new-tokens",
                str(NEW_TOKENS), "--json", "--adapter", flipped])
    said = f"fan_in_fan_out {str(config['fan_in_fan_out']).lower()}"
    if proc.returncode != 0 or "warning" not in proc.stderr or \
            said not in proc.stderr:
        return [f"{family} generate --adapter with fan_in_fan_out flipped: "
                f"expected exit 0 and a warning naming '{said}', got "
                f"exit {proc.returncode}: {proc.stderr[-800:]}"]
    got = json.loads(proc.stdout)["generated_ids"]
    if got != want:
        return [f"{family} generate --adapter with fan_in_fan_out flipped: "
                f"tailor {got} != PEFT {want}"]
    return []


def check_adapter(args, family, model, onnx_path, base_plan, prompts, wants,
                  work):
    """A PEFT adapter bound at compile time, or merged into the plain plan
    at load, decodes as PEFT generates; `wants` are the base model's ids."""
    import copy
    import numpy as np
    import torch
    import tailor
    from peft import LoraConfig, get_peft_model

    name = family.split("_")[0]
    targets = ADAPTER_TARGETS.get(name, ["q_proj", "v_proj", "down_proj"])
    peft_model = get_peft_model(
        copy.deepcopy(model),
        LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                   target_modules=targets))
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for param_name, p in sorted(peft_model.named_parameters()):
            if "lora_B" in param_name:
                p.copy_(torch.randn(p.shape, generator=gen) *
                        LORA_B_SCALE.get(name, 0.2))
    adapter = os.path.join(work, family + "-adapter")
    peft_model.save_pretrained(adapter)
    peft_model.eval()
    config = json.load(open(os.path.join(adapter, "adapter_config.json")))
    if config.get("fan_in_fan_out") != (name in FAN_IN_FAN_OUT):
        return [f"{family} adapter: PEFT wrote fan_in_fan_out "
                f"{config.get('fan_in_fan_out')}, expected "
                f"{name in FAN_IN_FAN_OUT}"]
    plan = os.path.join(work, family + "-adapter.tplan")
    proc = run([args.tailor, "compile", onnx_path, "--task", "generate",
                "--max-seq-len", str(MAX_SEQ_LEN), "--adapter", adapter,
                "-o", plan])
    if proc.returncode != 0:
        return [f"{family} adapter: compile failed: {proc.stderr[-800:]}"]
    failures, changed, peft_ids = [], 0, []
    eos = model.generation_config.eos_token_id
    for prompt, base in zip(prompts, wants):
        want = greedy(peft_model, prompt, eos)
        peft_ids.append(want)
        changed += want != base
        got, info = generate_ids(args, plan, prompt)
        if got != want:
            failures.append(f"{family} adapter: prompt {prompt}: tailor {got} "
                            f"!= PEFT {want} ({info})")
        merged, info = generate_ids(args, base_plan, prompt,
                                    flags=("--adapter", adapter))
        if merged != want:
            failures.append(f"{family} generate --adapter: prompt {prompt}: "
                            f"tailor {merged} != PEFT {want} ({info})")
    if not changed:
        failures.append(f"{family} adapter: the adapter changes no prompt's "
                        "ids, so the check proves nothing")
    failures += check_flipped_fan_in_fan_out(args, family, base_plan, adapter,
                                             prompts[0], peft_ids[0])
    # Ids can hide a small error in one layer's LoRA: the logits after the
    # longest prompt too, bound and merged, against PEFT's.
    prompt = prompts[-1]
    with torch.no_grad():
        want = peft_model(torch.tensor([prompt])).logits[0, -1].numpy()
        base = model(torch.tensor([prompt])).logits[0, -1].numpy()
    ways = {"bound": tailor.Generator(plan),
            "merged": tailor.Generator(base_plan, adapter=adapter)}
    diffs = {}
    for way, generator in ways.items():
        generator.prefill(prompt)
        diffs[way] = float(np.max(np.abs(generator.logits() - want)))
        if not diffs[way] <= ATOL:
            failures.append(f"{family} adapter ({way}): logits after "
                            f"{len(prompt)} tokens differ from PEFT's by "
                            f"{diffs[way]:.2e} > {ATOL}")
    moved = float(np.max(np.abs(want - base)))
    if not moved > 10 * ATOL:
        failures.append(f"{family} adapter: it moves the logits by "
                        f"{moved:.2e} only, too little to check")
    if not failures:
        flag = ", fan_in_fan_out" if name in FAN_IN_FAN_OUT else ""
        print(f"{family}: with a LoRA adapter on {', '.join(targets)}{flag} "
              f"(bound at compile time, and merged by generate --adapter, "
              f"also with fan_in_fan_out flipped), ids equal PEFT's on "
              f"{len(prompts)} prompts ({changed} differ from the base); "
              f"logits max |diff| " + ", ".join(
                  f"{way} {d:.2e}" for way, d in diffs.items()) +
              f" (the adapter moves them by {moved:.2e})")
    return failures


def decode_tokens(session, tokens, start):
    """Runs the plan's decode entry once per token from `start`; the
    logits after each."""
    import numpy as np
    out = []
    for i, token in enumerate(tokens):
        session.set_input("input_ids", np.array([[token]], dtype=np.int64))
        session.set_input("position", np.array(start + i, dtype=np.int64))
        session.run_entry("decode")
        out.append(session.output("logits").reshape(-1).copy())
    return out


def check_logits(family, plan, model, prompts):
    """The logits after the prompt, through the prefill entry (chunks of
    PREFILL_CHUNK, the tail padded) and through decode a token at a time,
    both against the model's last-position logits."""
    import numpy as np
    import torch
    import tailor

    failures = []
    for prompt in prompts[1:]:
        generator = tailor.Generator(plan)
        if generator.prefill_chunk != PREFILL_CHUNK:
            return [f"{family}: the plan's prefill chunk is "
                    f"{generator.prefill_chunk}, expected {PREFILL_CHUNK}"]
        generator.prefill(prompt)
        chunked = generator.logits()
        stepped = decode_tokens(tailor.InferenceSession(plan), prompt, 0)[-1]
        with torch.no_grad():
            want = model(torch.tensor([prompt])).logits[0, -1].numpy()
        diffs = [float(np.max(np.abs(got - want)))
                 for got in (chunked, stepped)]
        between = float(np.max(np.abs(chunked - stepped)))
        print(f"{family}: prompt of {len(prompt)}: logits max |diff| "
              f"prefill {diffs[0]:.2e}, token by token {diffs[1]:.2e} "
              f"(between them {between:.2e})")
        for way, diff in zip(("prefill", "token by token"), diffs):
            if not diff <= ATOL:
                failures.append(f"{family}: prompt of {len(prompt)}: {way} "
                                f"logits differ by {diff:.2e} > {ATOL}")
    return failures


def check_padding(family, plan, prompt):
    """Prefill rows past the prompt (a padded tail chunk) write cache rows
    that decoding overwrites before any query reads them: two paddings
    leave different keys there, and change nothing after."""
    import numpy as np
    import tailor

    chunk, count = PREFILL_CHUNK, len(prompt)
    assert count % chunk, "the prompt must end in a padded chunk"
    runs = []
    for pad in (0, 1):
        session = tailor.InferenceSession(plan)
        for start in range(0, count, chunk):
            rows = prompt[start:start + chunk]
            real = len(rows)
            rows = rows + [pad * (7 + r) % 50 for r in range(chunk - real)]
            session.set_input("prefill_input_ids",
                              np.array([rows], dtype=np.int64))
            session.set_input("prefill_position", np.array(start, np.int64))
            session.set_input("prefill_last", np.array(real - 1, np.int64))
            session.run_entry("prefill")
        first = session.output("prefill_logits").reshape(-1).copy()
        keys = [state.name for state in session.plan.states()
                if state.kind == "key_cache"]
        padded = session.get_tensor(keys[0])[0, :, count:count + chunk -
                                             count % chunk].copy()
        # Greedy continuation, fed back a token at a time.
        token, logits = int(np.argmax(first)), [first]
        for step in range(8):
            out = decode_tokens(session, [token], count + step)[0]
            logits.append(out)
            token = int(np.argmax(out))
        runs.append((padded, logits))
    reference = decode_tokens(tailor.InferenceSession(plan), prompt, 0)[-1:]
    token = int(np.argmax(reference[0]))
    stepper = tailor.InferenceSession(plan)
    decode_tokens(stepper, prompt, 0)
    for step in range(8):
        out = decode_tokens(stepper, [token], count + step)[0]
        reference.append(out)
        token = int(np.argmax(out))
    written = float(np.max(np.abs(runs[0][0] - runs[1][0])))
    between = max(float(np.max(np.abs(a - b)))
                  for a, b in zip(runs[0][1], runs[1][1]))
    stepped = max(float(np.max(np.abs(a - b)))
                  for a, b in zip(runs[0][1], reference))
    print(f"{family}: padding rows {count}..{count + chunk - count % chunk - 1}"
          f" hold other keys under another padding (max |diff| "
          f"{written:.2e}); the 8 decode steps after agree to {between:.2e}, "
          f"and with token by token to {stepped:.2e}")
    failures = []
    if not written > 0:
        failures.append(f"{family}: the padding left no trace in the cache, "
                        "so the padding check proves nothing")
    if not between <= 1e-6:
        failures.append(f"{family}: padding changed later logits by "
                        f"{between:.2e}")
    if not stepped <= ATOL:
        failures.append(f"{family}: after a padded prefill the decode logits "
                        f"differ from token by token by {stepped:.2e}")
    return failures


def check_token_by_token(args, family, onnx_path, prompts, wants, work):
    """--prefill-chunk 1: no prefill entry, the same ids a token at a time
    (as plans from before the prefill entry run)."""
    import tailor

    plan = os.path.join(work, family + "-chunk1.tplan")
    proc = run([args.tailor, "compile", onnx_path, "--task", "generate",
                "--max-seq-len", str(MAX_SEQ_LEN), "--prefill-chunk", "1",
                "-o", plan])
    if proc.returncode != 0:
        return [f"{family} chunk 1: compile failed: {proc.stderr[-800:]}"]
    entries = tailor.Plan(plan).entries()
    if entries != ["decode"]:
        return [f"{family} chunk 1: entries {entries}, expected decode only"]
    failures = []
    # inspect shows the prefill entry of the chunked plan, and its bindings.
    shown = run([args.tailor, "inspect",
                 os.path.join(os.path.dirname(onnx_path), "generate.tplan")])
    for line in ("prefill ", f"prefill_input_ids: i64 [1, {PREFILL_CHUNK}]"
                 "  (prefill)", "prefill_position: i64 []  (prefill)",
                 "prefill_last: i64 []  (prefill)",
                 "prefill_logits: f32 [1, 1, "):
        if line not in shown.stdout:
            failures.append(f"{family}: tailor inspect does not show "
                            f"'{line}':\n{shown.stdout[:1500]}")
    for prompt, want in zip(prompts, wants):
        got, info = generate_ids(args, plan, prompt)
        if got != want:
            failures.append(f"{family} chunk 1: prompt {prompt}: tailor {got}"
                            f" != transformers {want} ({info})")
    if not failures:
        print(f"{family}: --prefill-chunk 1 (decode entry only) gives the "
              f"same ids on {len(prompts)} prompts")
    return failures


def check_family(args, case, work):
    import numpy as np
    import torch
    import tailor

    family, exporter, opset = case
    tag = case_name(family, exporter, opset, False)
    out_dir = os.path.join(args.cache, cache_key(), tag)
    model_path, err = export_case((family, exporter, opset, False, out_dir))
    if err:
        return [f"{tag}: export failed: {err[-500:]}"]
    sidecar = json.load(open(os.path.join(out_dir, "model.json")))
    model = hf_model(family, sidecar)
    vocab = model.config.vocab_size
    eos = model.generation_config.eos_token_id
    # The model and its config.json side by side, as tailor reads them.
    family_dir = os.path.join(work, tag)
    os.makedirs(family_dir)
    onnx_path = os.path.join(family_dir, "model.onnx")
    shutil.copy(model_path, onnx_path)
    model.config.to_json_file(os.path.join(family_dir, "config.json"))
    plan = os.path.join(family_dir, "generate.tplan")
    proc = run([args.tailor, "compile", onnx_path, "--task", "generate",
                "--max-seq-len", str(MAX_SEQ_LEN), "--prefill-chunk",
                str(PREFILL_CHUNK), "-o", plan])
    if proc.returncode != 0:
        return [f"{family}: compile failed: {proc.stderr[-1500:]}"]

    failures = []
    rng = np.random.default_rng(22)
    prompts = [[int(x) for x in rng.integers(0, vocab, n)]
               for n in (1, 5, 8, 12, 19)]
    family = tag
    wants = []
    for prompt in prompts:
        want = greedy(model, prompt, eos)
        wants.append(want)
        got, info = generate_ids(args, plan, prompt)
        if got is None:
            failures.append(f"{family}: generate failed: {info}")
        elif info["prompt_ids"] != prompt or got != want:
            failures.append(f"{family}: prompt {prompt}: tailor {got} != "
                            f"transformers {want}")
        else:
            print(f"{family}: prompt of {len(prompt)}: {len(want)} ids equal "
                  f"(ttft {info['time_to_first_token_s'] * 1e3:.1f} ms, "
                  f"{info['tokens_per_second']:.0f} tokens/s)")
    full = [w for w in wants if len(w) == NEW_TOKENS]
    if tag == "llama_ts17" and full:
        prompt = prompts[wants.index(full[0])]
        failures += check_eos(args, family, model, onnx_path, prompt,
                              full[0], work)
    # The adapter on every case: all prompts on llama_ts17, two (shorter
    # and longer than a prefill chunk) elsewhere, to keep the test short.
    some = (0, 1, 2, 3, 4) if tag == "llama_ts17" else (1, 3)
    failures += check_adapter(args, family, model, onnx_path, plan,
                              [prompts[i] for i in some],
                              [wants[i] for i in some], work)

    failures += check_logits(family, plan, model, prompts)
    if tag in ("llama_ts17", "mistral-window_ts17"):
        failures += check_padding(family, plan, prompts[3])
    if tag == "llama_ts17":
        failures += check_token_by_token(args, family, onnx_path, prompts,
                                         wants, work)

    # Refusals, each exit 1 with a message.
    too_long = ",".join(["1"] * (MAX_SEQ_LEN + 1))
    for ids, expect in ((too_long, "KV cache holds"),
                        (f"1,{vocab}", "outside the vocabulary")):
        proc = run([args.tailor, "generate", plan, "--prompt-ids", ids])
        if proc.returncode != 1 or expect not in proc.stderr:
            failures.append(f"{family}: --prompt-ids {ids[:20]}...: expected "
                            f"exit 1 with '{expect}', got "
                            f"{proc.returncode}: {proc.stderr[-300:]}")
    return failures


def check_forward_plan_refused(args, work):
    """A plan that is not a generation plan is refused."""
    llama = os.path.join(work, "llama_ts17", "model.onnx")
    if not os.path.exists(llama):
        return []
    plan = os.path.join(work, "forward.tplan")
    proc = run([args.tailor, "compile", llama, "--batch", "1", "--seq", "8",
                "-o", plan])
    if proc.returncode != 0:
        return [f"forward compile failed: {proc.stderr[-500:]}"]
    proc = run([args.tailor, "generate", plan, "--prompt-ids", "1,2"])
    if proc.returncode != 1 or "not a generation plan" not in proc.stderr:
        return [f"forward plan: expected exit 1 'not a generation plan', got "
                f"{proc.returncode}: {proc.stderr[-300:]}"]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tailor", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--runtime-lib", required=True)
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help="families to check")
    parser.add_argument("--exports", default="torchscript:17,dynamo:18",
                        help="exporter:opset pairs to check each family of")
    args = parser.parse_args()
    os.environ["TAILOR_RUNTIME_LIBRARY"] = args.runtime_lib
    failures = []
    with tempfile.TemporaryDirectory() as work:
        exports = [(e.split(":")[0], int(e.split(":")[1]))
                   for e in args.exports.split(",")]
        cases = [(f, exporter, opset) for exporter, opset in exports
                 for f in args.families.split(",")]
        for case in cases:
            failures += check_family(args, case, work)
        failures += check_forward_plan_refused(args, work)
    for failure in failures:
        print("FAIL", failure)
    if failures:
        sys.exit(1)
    print("generate_hf: all checks passed")


if __name__ == "__main__":
    main()
