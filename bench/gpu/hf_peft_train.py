#!/usr/bin/env python3
"""The PyTorch baseline of the GPU benchmark: Hugging Face LlamaForCausalLM +
PEFT LoRA, timed the way bench/gpu/run.sh times tailor.

The model is bench/gpu/fill_weights.py's seeded model (TinyLlama-1.1B shape
by default) -- read back from the data file fill_weights.py filled when
--weights names the generator's side JSON (fast, and the very bytes tailor
trains), else rebuilt from the seed -- cast to --dtype (bf16) on --device,
attn_implementation="sdpa". LoRA (PEFT LoraConfig r=16, alpha 32, dropout 0)
on q, k, v, o, gate, up and down projections; torch.optim.AdamW (lr 2e-4,
no weight decay), gradients clipped at --max-grad-norm as tailor's recipe
does. Batch --batch x --seq tokens, labels = input_ids (the model shifts
them): the sequences are cut in order from --data (raw uint16 tokens, a
nanoGPT .bin: what tailor-train reads with shuffle off) or drawn from a
seeded generator. --warmup steps, then --steps timed steps, each bracketed
by torch.cuda.synchronize().

Prints one line (and writes it as JSON to --json):

  HF_PEFT_RESULT model=... tokens_per_s=... ms_per_step=...
      max_allocated_mib=... max_reserved_mib=... loss_step1=... ...

loss_step1 is the base model's loss on the first batch (LoRA B starts at
zero): tailor's step-1 loss on the same tokens should agree to bf16.

  bench/gpu/hf_peft_train.py [--weights DIR/tinyllama.json] [--data T.bin]
      [--batch 1] [--seq 2048] [--warmup 3] [--steps 10] [--device cuda]
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fill_weights  # noqa: E402  (seeded_model, and the generator's config)

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
           "down_proj"]


def model_from_file(side_path, device, dtype):
    """The model with the weights fill_weights.py wrote, built on the meta
    device and loaded tensor by tensor (no initialization, no fp32 copy)."""
    import numpy as np
    import torch
    from transformers import LlamaForCausalLM
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    with open(side_path) as f:
        side = json.load(f)
    if side.get("tiny"):
        raise SystemExit("error: --weights expects a --preset model's JSON")
    cfg = fill_weights.gen.build_config(side["layers"], False, side["preset"])
    data = os.path.join(os.path.dirname(os.path.abspath(side_path)),
                        side["data_file"])
    if os.path.getsize(data) != side["data_bytes"]:
        raise SystemExit(f"error: {data} is not the JSON's size (run "
                         f"fill_weights.py first)")
    # Copy-on-write: writable views (torch.from_numpy warns on read-only
    # ones) that never copy, as nothing writes to them.
    raw = np.memmap(data, dtype=np.uint8, mode="c")
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    state = {}
    for e in side["layout"]:
        a = raw[e["offset"]:e["offset"] + e["length"]].view(np.float32)
        t = torch.from_numpy(a.reshape(e["dims"])).to(device)
        state[e["name"]] = (t.t() if e["transposed"] else t).to(dtype).contiguous()
    model.load_state_dict(state, assign=True, strict=True)
    with torch.device(device):  # its buffers are computed, not loaded
        model.model.rotary_emb = LlamaRotaryEmbedding(cfg)
    for name, b in model.named_buffers():
        if b.device.type == "meta":
            raise SystemExit(f"error: buffer {name} still on the meta device")
    if not any(float(p.detach().abs().max()) > 0 for p in model.parameters()):
        raise SystemExit(f"error: {data} holds only zeros (run fill_weights.py)")
    return model


def batches(args, vocab, n):
    """n batches [batch, seq] of int64 token ids."""
    import numpy as np
    import torch

    need = n * args.batch * args.seq
    if args.data:
        tokens = np.fromfile(args.data, dtype=np.uint16)
        if tokens.size < need:
            raise SystemExit(f"error: {args.data} holds {tokens.size} tokens, "
                             f"{need} needed")
    else:
        tokens = np.random.default_rng(args.seed + 1).integers(0, vocab, need)
    ids = torch.from_numpy(tokens[:need].astype(np.int64))
    if int(ids.max()) >= vocab:
        raise SystemExit(f"error: token {int(ids.max())} >= vocabulary {vocab}")
    return ids.view(n, args.batch, args.seq)


def sync(device):
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--weights", help="side JSON of a filled data file")
    ap.add_argument("--preset", default="tinyllama",
                    help="without --weights: the seeded model's shape")
    ap.add_argument("--layers", type=int, help="without --weights: layers")
    ap.add_argument("--tiny", action="store_true",
                    help="without --weights: the generator's tiny model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", help="uint16 token file (default: seeded random)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--max-grad-norm", type=float, default=1.0,
                    help="clip as tailor's recipe does (0: no clipping)")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")

    import torch
    from peft import LoraConfig, get_peft_model

    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device for --device cuda")
    start = time.perf_counter()
    if args.weights:
        model = model_from_file(args.weights, args.device, dtype)
    else:
        model = fill_weights.seeded_model(args.preset, args.layers, args.seed,
                                          args.tiny)
        model = model.to(device=args.device, dtype=dtype)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("sdpa")
    else:
        model.config._attn_implementation = "sdpa"
    model.config.use_cache = False
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    torch.manual_seed(args.seed)
    model = get_peft_model(model, LoraConfig(
        r=args.rank, lora_alpha=args.alpha, lora_dropout=0.0,
        target_modules=TARGETS, bias="none", task_type="CAUSAL_LM"))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    data = batches(args, model.config.vocab_size, args.warmup + args.steps)
    load_s = time.perf_counter() - start
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    times, losses = [], []
    for step in range(args.warmup + args.steps):
        ids = data[step].to(args.device, non_blocking=True)
        sync(args.device)
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        if args.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(args.device)
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss.detach()))  # after the timing: no sync inside a step
    timed = times[args.warmup:]
    ms = sum(timed) / len(timed)
    result = dict(
        model=(args.weights and os.path.basename(args.weights)[:-5]) or
        ("tiny" if args.tiny else args.preset),
        params=n_params, trainable=sum(p.numel() for p in params),
        device=(torch.cuda.get_device_name() if cuda else "cpu"),
        dtype=args.dtype, attn="sdpa", batch=args.batch, seq=args.seq,
        rank=args.rank, warmup=args.warmup, steps=args.steps,
        ms_per_step=round(ms, 3), ms_min=round(min(timed), 3),
        tokens_per_s=round(args.batch * args.seq * 1e3 / ms, 1),
        max_allocated_mib=round(torch.cuda.max_memory_allocated() / 2**20, 1)
        if cuda else None,
        max_reserved_mib=round(torch.cuda.max_memory_reserved() / 2**20, 1)
        if cuda else None,
        loss_step1=round(losses[0], 6), loss_last=round(losses[-1], 6),
        load_s=round(load_s, 1), torch=torch.__version__)
    print("HF_PEFT_RESULT " + " ".join(f"{k}={v}" for k, v in result.items()
                                       if k not in ("device", "torch")))
    print(f"device: {result['device']}, torch {torch.__version__}; losses: "
          + " ".join(f"{x:.4f}" for x in losses))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(result, losses=losses, step_ms=times), f)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
