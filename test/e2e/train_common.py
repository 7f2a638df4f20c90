"""Shared machinery of the training e2e tests (train_vs_peft.py,
peft_roundtrip.py, train_resume.py): the tiny models and their ONNX export,
the seeded JSONL dataset, recipes, driving `tailor compile` / `tailor train`,
the PyTorch reference training loop, and tensor comparisons.

The model is built once per family (test/generators/export_hf.py's seeded
tiny models, hidden 64, 2 layers, 4 heads, intermediate 128, vocab 256,
fp32, dropout off): `llama` (the default; 2 kv heads, untied lm_head),
`gpt2` (GPT2LMHeadModel: LayerNorm with bias, GELU-tanh, Conv1D layers with
bias stored [in, out], learned position embeddings, lm_head tied to wte) or
`qwen2` (Qwen2ForCausalLM: q/k/v with bias). It is exported with the
TorchScript exporter at opset 17, and that same object -- its class switched
back from the logits-only export wrapper to the HF causal-LM class -- is the
reference, so the reference starts from exactly the exported weights
(checked against the ONNX initializers by name or, for the copies the
exporter folds Linear transposes into, by value).
"""

import copy
import json
import math
import os
import subprocess
import sys
import warnings

# transformers 5 deprecation chatter from inside PEFT.
warnings.filterwarnings("ignore", category=FutureWarning)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "generators"))

OPSET = 17
B, T = 2, 16          # micro-batch size, sequence length
ROWS = 20 * B         # dataset rows (each exactly T tokens)


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------

FAMILIES = ("llama", "gpt2", "qwen2", "gemma2", "mistral-window", "bloom")


def disable_dropout(model):
    """Sets every dropout probability to 0 (nn.Dropout modules and the
    config's *pdrop / *dropout rates, which some attention paths read):
    GPT-2's config defaults to 0.1 for residual, embedding and attention
    dropout, and the reference must train deterministically, as tailor does."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if hasattr(m, "dropout") and isinstance(getattr(m, "dropout"), float):
            m.dropout = 0.0
        if hasattr(m, "attention_dropout") and isinstance(m.attention_dropout, float):
            m.attention_dropout = 0.0
    cfg = getattr(model, "config", None)
    if cfg is not None:
        for k, v in list(vars(cfg).items()):
            if isinstance(v, float) and (k.endswith("pdrop") or k.endswith("dropout")):
                setattr(cfg, k, 0.0)


def build_and_export(onnx_path, seed=0, family="llama", exporter="torchscript"):
    """Builds export_hf's seeded tiny model of `family` (llama, gpt2, qwen2),
    exports it to onnx_path (TorchScript at opset OPSET, or with
    exporter="dynamo" torch.onnx's dynamo exporter at opset 18, dynamic
    batch and seq) and returns (hf_model, info): the HF causal-LM
    model (LlamaForCausalLM, GPT2LMHeadModel, Qwen2ForCausalLM; eval mode,
    exactly the exported weights, dropout off) and a dict describing the
    export (see check_exported_weights for the name mapping).

    Tries the library-default attention first, then eager, as export_hf does;
    the TorchScript exporter needs export_hf's aten::diff / bool cumsum
    symbolics with transformers 5.
    """
    import onnx
    import torch

    import export_hf

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}")
    os.makedirs(os.path.dirname(os.path.abspath(onnx_path)), exist_ok=True)
    errors = []
    for attn in (None, "eager"):
        wrapped, ess, _ = export_hf.build_model(family, seed, attn)
        example = torch.randint(0, ess["vocab"], (2, 8),
                                generator=torch.Generator().manual_seed(seed))
        try:
            if exporter == "dynamo":
                with torch.no_grad():
                    export_hf._export_dynamo(wrapped, example, 18, onnx_path,
                                             external_data=False)
            else:
                with torch.no_grad(), export_hf._ts_symbolics(OPSET):
                    export_hf._export_torchscript(wrapped, example, OPSET,
                                                  onnx_path,
                                                  external_data=False)
            onnx.checker.check_model(onnx_path, full_check=True)
        except Exception as e:  # noqa: BLE001
            errors.append(f"attn={attn}: {type(e).__name__}: {str(e)[:500]}")
            continue
        # Back from the logits-only export wrapper to the HF class, so the
        # reference computes HF's own causal-LM loss from labels.
        wrapped.__class__ = type(wrapped).__mro__[1]
        model = wrapped.eval()
        disable_dropout(model)
        info = dict(family=family, model_class=type(model).__name__,
                    attn_implementation=ess["attn_implementation"],
                    tied=ess["tied"],
                    params=sum(p.numel() for p in model.parameters()))
        info.update(check_exported_weights(model, onnx_path))
        info["aliases"] = hf_aliases(model)
        info["zero_grad"] = zero_gradient_slices(model)
        if info["weights_unmatched"]:
            raise RuntimeError("parameters not found among the exported "
                               "initializers: " + ", ".join(info["weights_unmatched"]))
        return model, info
    raise RuntimeError("export failed: " + " | ".join(errors))


def export_llama(work, layers):
    """export_hf's seeded tiny Llama with `layers` layers, exported once to
    WORK/llama<layers>/model.onnx (cached)."""
    import export_hf

    saved = export_hf.LAYERS
    export_hf.LAYERS = layers
    try:
        path = os.path.join(work, f"llama{layers}", "model.onnx")
        if not os.path.exists(path):
            build_and_export(path, seed=0, family="llama")
        return path
    finally:
        export_hf.LAYERS = saved


def check_exported_weights(model, onnx_path):
    """Finds every model parameter among the ONNX initializers, by name
    (must then be bit-identical) or else as the transposed copy the
    exporter folds Linear weights into, or an equal copy under another
    name. Returns {"weights_checked": n,
    "weights_unmatched": [parameters not found], "onnx_names": {initializer
    name: (HF parameter name, transposed)} for every initializer that holds
    a parameter}; raises on a mismatch.

    An initializer left over that holds the transpose of an already matched
    parameter is a second copy of a tied weight (GPT-2's lm_head, which IS
    transformer.wte.weight in HF, is exported as onnx::MatMul_N = wte^T):
    it is listed in onnx_names too, and in "tied_copies"."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    m = onnx.load(onnx_path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    used = set()
    checked, unmatched = 0, []
    onnx_names = {}
    params = dict(model.named_parameters())
    for name, p in params.items():
        ref = p.detach().cpu().numpy()
        got = inits.get(name)
        if got is not None and got.shape == ref.shape:
            if not np.array_equal(got, ref):
                raise RuntimeError(f"exported initializer {name} differs from "
                                   "the reference model's parameter")
            used.add(name)
            onnx_names[name] = (name, False)
            checked += 1
            continue
        # The TorchScript exporter folds a Linear weight's Transpose into a
        # new initializer (onnx::MatMul_N, [in, out]): find it by value.
        hit, transposed = None, True
        if ref.ndim == 2:
            hit = next((n for n, a in inits.items() if n not in used
                        and a.shape == ref.T.shape and np.array_equal(a, ref.T)),
                       None)
        if hit is None and ref.ndim == 2:
            # The dynamo exporter names a tied table after its other user
            # (BLOOM's word_embeddings saved as lm_head.weight).
            hit = next((n for n, a in inits.items() if n not in used
                        and a.shape == ref.shape and np.array_equal(a, ref)),
                       None)
            transposed = hit is None
        if hit is None and ref.ndim == 1:
            # Gemma's RMSNorm scales by (1 + weight): the exporter folds the
            # sum into the initializer (frozen under LoRA, never trained).
            hit = next((n for n, a in inits.items() if n not in used
                        and a.shape == ref.shape
                        and np.array_equal(a, (ref + np.float32(1)))), None)
            if hit is not None:
                used.add(hit)
                checked += 1
                continue
        if hit is None:
            unmatched.append(name)
        else:
            used.add(hit)
            onnx_names[hit] = (name, transposed)
            checked += 1
    tied = []
    for n, a in inits.items():
        if n in used or a.ndim != 2:
            continue
        for name, p in params.items():
            ref = p.detach().cpu().numpy()
            if a.shape == ref.T.shape and np.array_equal(a, ref.T):
                onnx_names[n] = (name, True)
                tied.append((n, name))
                break
    return {"weights_checked": checked, "weights_unmatched": unmatched,
            "onnx_names": onnx_names, "tied_copies": tied}


def fresh_copy(model):
    """A deep copy of the base model, in train mode (dropout is 0 anyway)."""
    m = copy.deepcopy(model)
    m.train()
    return m


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def make_rows(n_rows=ROWS, seq=T, vocab=256, seed=1234):
    """Seeded rows of exactly `seq` tokens. Every other row carries labels:
    rows 4k+1 mask a prompt (their first 1..seq/2 labels are -100), rows 4k+3
    mask a few scattered positions; rows 4k and 4k+2 have no labels (they
    default to input_ids), so every micro-batch of 2 has counted tokens."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_rows):
        ids = rng.integers(0, vocab, seq).tolist()
        row = {"input_ids": ids}
        if i % 4 == 1:
            k = int(rng.integers(1, seq // 2 + 1))
            row["labels"] = [-100] * k + ids[k:]
        elif i % 4 == 3:
            labels = list(ids)
            for j in rng.choice(seq, size=3, replace=False):
                labels[int(j)] = -100
            row["labels"] = labels
        rows.append(row)
    return rows


def write_jsonl(rows, path):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def micro_batch(rows, i, b=B):
    """(input_ids, labels) int64 tensors of micro-batch i: rows [i*b, (i+1)*b)
    (what tailor's loader yields with shuffle false and rows of exactly
    sequence_len tokens)."""
    import torch

    chunk = rows[i * b:(i + 1) * b]
    if len(chunk) != b:
        raise ValueError(f"micro-batch {i} runs past the {len(rows)} rows")
    ids = torch.tensor([r["input_ids"] for r in chunk], dtype=torch.int64)
    labels = torch.tensor([r.get("labels", r["input_ids"]) for r in chunk],
                          dtype=torch.int64)
    return ids, labels


# ---------------------------------------------------------------------------
# Recipes
# ---------------------------------------------------------------------------

def mpirun(n):
    """The mpirun prefix for `n` ranks on this machine: oversubscribed
    (more ranks than cores), and allowed to run as root where CI does."""
    cmd = ["mpirun", "--oversubscribe", "-np", str(n)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def rank_pid(launcher_pid, rank):
    """The pid of the process of `rank` among mpirun's children."""
    children = subprocess.run(["pgrep", "-P", str(launcher_pid)],
                              capture_output=True, text=True).stdout.split()
    for pid in children:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            return int(pid)
    return None


def recipe_defaults():
    return dict(adapter="lora", lora_r=8, lora_alpha=16, lora_dropout=0.0,
                lora_target_modules=["q_proj", "v_proj"], use_rslora=False,
                sequence_len=T, micro_batch_size=B,
                gradient_accumulation_steps=1, learning_rate=1e-3,
                lr_scheduler="constant", warmup_steps=0, max_steps=20,
                optimizer="adamw", weight_decay=0.01, adam_beta1=0.9,
                adam_beta2=0.999, adam_epsilon=1e-8, momentum=0.0,
                max_grad_norm=0.0, seed=42, save_steps=10, shuffle=False)


def _yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_recipe(recipe, path):
    """Writes an axolotl-style YAML recipe (block lists, plain scalars)."""
    lines = []
    for k, v in recipe.items():
        if isinstance(v, (list, tuple)):
            lines.append(f"{k}:")
            lines += [f"  - {_yaml_scalar(x)}" for x in v]
        else:
            lines.append(f"{k}: {_yaml_scalar(v)}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------
# tailor
# ---------------------------------------------------------------------------

def first_lines(text, n=3, width=400):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (" | ".join(lines[-n:]) if lines else "(no message)")[:width]


def run(cmd, timeout, log=None):
    """Runs cmd; returns (ok, message). The full output goes to `log`."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s: {' '.join(cmd)}"
    except OSError as e:
        return False, f"cannot run {cmd[0]}: {e}"
    if log:
        with open(log, "a") as f:
            f.write("$ " + " ".join(cmd) + f"\n{proc.stdout}{proc.stderr}"
                    f"[exit {proc.returncode}]\n")
    if proc.returncode != 0:
        return False, (f"{os.path.basename(cmd[0])} {cmd[1]} exited "
                       f"{proc.returncode}: " + first_lines(proc.stderr + proc.stdout))
    return True, proc.stdout + proc.stderr


def train_plan(bin_dir, plan, work, ranks, data, max_steps, out=None,
               resume=None, timeout=900):
    """`tailor train` of `plan` on `ranks` ranks (mpirun past one), one
    thread each, into `out` (work/out, emptied unless resuming). Returns
    (out, None) or (None, the error)."""
    import shutil

    out = out or os.path.join(work, "out")
    if resume is None:
        shutil.rmtree(out, ignore_errors=True)
    cmd = [os.path.join(bin_dir, "tailor"), "train", plan, "--data", data,
           "--max-steps", str(max_steps), "--output-dir", out,
           "--threads", "1"]
    if resume:
        cmd += ["--resume", resume]
    if ranks > 1:
        cmd = mpirun(ranks) + cmd
    ok, msg = run(cmd, timeout, os.path.join(work, "tailor.log"))
    return (out, None) if ok else (None, msg)


def inspect_json(bin_dir, plan):
    """`tailor inspect PLAN --json`, parsed."""
    return json.loads(subprocess.run(
        [os.path.join(bin_dir, "tailor"), "inspect", plan, "--json"],
        capture_output=True, text=True, check=True).stdout)


def compile_plan(bin_dir, onnx_path, recipe, work, hardware):
    """Writes `recipe` to work/recipe.yaml and compiles work/plan.tplan for
    `hardware`. Returns (plan path, None) or (None, the error)."""
    os.makedirs(work, exist_ok=True)
    recipe_path = os.path.join(work, "recipe.yaml")
    write_recipe(recipe, recipe_path)
    plan = os.path.join(work, "plan.tplan")
    ok, msg = run([os.path.join(bin_dir, "tailor"), "compile", onnx_path,
                   "--recipe", recipe_path, "--hardware", hardware,
                   "-o", plan], 900, os.path.join(work, "tailor.log"))
    return (plan, None) if ok else (None, msg)


def check_refusals(bin_dir, onnx_path, work, cases):
    """Each case (name, recipe, hardware, expected part of the message)
    must fail to compile with that message. Returns the failures."""
    failures = []
    for name, recipe, hardware, expect in cases:
        plan, err = compile_plan(bin_dir, onnx_path, recipe,
                                 os.path.join(work, f"refuse-{name}"),
                                 hardware)
        if plan or expect not in (err or ""):
            failures.append(f"refusal {name}: expected an error with "
                            f"'{expect}', got {err!r}")
        else:
            print(f"refused {name}: {first_lines(err, 1)}")
    return failures


def tailor_compile_train(bin_dir, onnx_path, recipe, work, data_path,
                         init_adapter=None, threads=2, overrides=(),
                         train_args=(), hardware="cpu", ranks=1):
    """Compiles `recipe` to work/plan.tplan for `hardware` and trains it
    into work/out on `ranks` ranks (mpirun past one; `train_args`: more
    `tailor train` flags). Returns (out_dir, None) or (None, error); both
    commands' output goes to work/tailor.log."""
    import shutil

    tailor = os.path.join(bin_dir, "tailor")
    recipe_path = os.path.join(work, "recipe.yaml")
    write_recipe(recipe, recipe_path)
    plan = os.path.join(work, "plan.tplan")
    log = os.path.join(work, "tailor.log")
    ok, msg = run([tailor, "compile", onnx_path, "--recipe", recipe_path,
                   *overrides, "--hardware", hardware, "-o", plan], 900, log)
    if not ok:
        return None, "compile: " + msg
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [tailor, "train", plan, "--data", data_path,
           "--max-steps", str(recipe["max_steps"]), "--output-dir", out,
           "--threads", str(threads)]
    if init_adapter:
        cmd += ["--init-adapter", init_adapter]
    cmd += list(train_args)
    if ranks > 1:
        cmd = mpirun(ranks) + cmd
    ok, msg = run(cmd, 1800, log)
    if not ok:
        return None, "train: " + msg
    return out, None


def read_metrics(out_dir):
    """{step: metrics dict} from out_dir/metrics.jsonl."""
    path = os.path.join(out_dir, "metrics.jsonl")
    rows = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                m = json.loads(line)
                rows[int(m["step"])] = m
    return rows


def load_safetensors(path):
    from safetensors.numpy import load_file

    return load_file(path)


def check_adapter_config(out, recipe):
    """Problems with OUT/adapter_config.json against the recipe (PEFT's
    keys: peft_type, r, lora_alpha, target_modules, use_rslora,
    layers_to_transform)."""
    path = os.path.join(out, "adapter_config.json")
    if not os.path.exists(path):
        return ["no adapter_config.json in the output dir"]
    try:
        cfg = json.load(open(path))
    except ValueError as e:
        return [f"adapter_config.json is not JSON: {e}"]
    problems = []
    want = {"peft_type": "LORA", "r": recipe["lora_r"],
            "lora_alpha": recipe["lora_alpha"],
            "use_rslora": bool(recipe.get("use_rslora", False)),
            "layers_to_transform": (list(recipe["lora_layers"])
                                    if recipe.get("lora_layers") is not None else None)}
    for k, v in want.items():
        if cfg.get(k) != v:
            problems.append(f"adapter_config {k} = {cfg.get(k)!r}, expected {v!r}")
    expected = recipe["lora_target_modules"]
    if expected == ["all-linear"]:
        # PEFT writes all-linear out as the leaf names of every linear layer
        # but the output layer; so does tailor (Llama's seven).
        expected = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                    "up_proj", "down_proj"]
    if sorted(cfg.get("target_modules") or []) != sorted(expected):
        problems.append(f"adapter_config target_modules = {cfg.get('target_modules')!r}, "
                        f"expected {recipe['lora_target_modules']!r}")
    return problems


def tailor_available(bin_dir):
    """(True, None) when the tailor driver has `compile --recipe` and
    `train`; else (False, why)."""
    tailor = os.path.join(bin_dir, "tailor")
    if not os.path.exists(tailor):
        return False, f"{tailor} not found"
    try:
        h = subprocess.run([tailor, "--help"], capture_output=True, text=True)
        c = subprocess.run([tailor, "compile", "--help"], capture_output=True,
                           text=True)
    except OSError as e:
        return False, f"cannot run {tailor}: {e}"
    missing = []
    if "train" not in h.stdout + h.stderr:
        missing.append("`tailor train`")
    if "--recipe" not in c.stdout + c.stderr:
        missing.append("`tailor compile --recipe`")
    if missing:
        return False, f"{tailor} lacks " + " and ".join(missing)
    return True, None


# ---------------------------------------------------------------------------
# PyTorch / PEFT reference
# ---------------------------------------------------------------------------

def lora_config(recipe):
    from peft import LoraConfig

    targets = recipe["lora_target_modules"]
    if targets == ["all-linear"] or targets == "all-linear":
        targets = "all-linear"
    kw = {}
    if recipe.get("lora_layers") is not None:
        kw["layers_to_transform"] = list(recipe["lora_layers"])
    return LoraConfig(r=recipe["lora_r"], lora_alpha=recipe["lora_alpha"],
                      lora_dropout=recipe["lora_dropout"], target_modules=targets,
                      use_rslora=bool(recipe.get("use_rslora", False)),
                      bias="none", task_type="CAUSAL_LM", **kw)


def bnb_nf4_dequantized(model, skip=("lm_head",)):
    """A fresh copy of `model` whose nn.Linear weights (all but `skip`) are
    replaced by bitsandbytes' own NF4 round trip: quantize_4bit(W,
    blocksize=64, compress_statistics=True, quant_type="nf4") then
    dequantize_4bit, on the CPU in float32 -- the weights a QLoRA model
    computes with. Returns (model, count, worst max|W - dequant(W)|)."""
    import bitsandbytes.functional as bnbf
    import torch

    out = fresh_copy(model)
    count, worst = 0, 0.0
    for name, module in out.named_modules():
        if not isinstance(module, torch.nn.Linear) or name.split(".")[-1] in skip:
            continue
        w = module.weight.data
        q, state = bnbf.quantize_4bit(w.contiguous(), blocksize=64,
                                      compress_statistics=True, quant_type="nf4")
        deq = bnbf.dequantize_4bit(q, state).to(torch.float32).reshape(w.shape)
        worst = max(worst, float((deq - w).abs().max()))
        module.weight.data = deq.clone()
        count += 1
    return out, count, worst


def make_peft(base, recipe, init_seed=7):
    """get_peft_model on a fresh copy of `base` (PEFT's own init: A
    kaiming-uniform from the seeded global RNG, B zeros)."""
    import torch
    from peft import get_peft_model

    torch.manual_seed(init_seed)
    pm = get_peft_model(fresh_copy(base), lora_config(recipe))
    pm.train()
    return pm


def peft_tensors(pm):
    """The adapter as save_pretrained writes it: {name: np.ndarray}."""
    from peft import get_peft_model_state_dict

    return {k: v.detach().cpu().numpy().copy()
            for k, v in get_peft_model_state_dict(pm).items()}


def model_tensors(model):
    return {k: v.detach().cpu().numpy().copy()
            for k, v in model.state_dict().items()}


def make_scheduler(opt, recipe):
    import transformers as tf

    kind = recipe["lr_scheduler"]
    w, n = recipe["warmup_steps"], recipe["max_steps"]
    if kind == "constant":
        return tf.get_constant_schedule_with_warmup(opt, w)
    if kind == "linear":
        return tf.get_linear_schedule_with_warmup(opt, w, n)
    if kind == "cosine":
        return tf.get_cosine_schedule_with_warmup(opt, w, n)
    raise ValueError(f"unknown lr_scheduler {kind!r}")


def make_optimizer(params, recipe):
    import torch

    if recipe["optimizer"] == "adamw":
        return torch.optim.AdamW(params, lr=recipe["learning_rate"],
                                 betas=(recipe["adam_beta1"], recipe["adam_beta2"]),
                                 eps=recipe["adam_epsilon"],
                                 weight_decay=recipe["weight_decay"])
    if recipe["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=recipe["learning_rate"],
                               momentum=recipe["momentum"],
                               weight_decay=recipe["weight_decay"])
    raise ValueError(f"unknown optimizer {recipe['optimizer']!r}")


def torch_train(model, rows, recipe, snapshot):
    """Trains `model` (a PeftModel or the HF model) on `rows` the way the
    recipe says, fp32, the way the Hugging Face Trainer steps: per
    micro-batch HF's causal-LM loss (mean over its counted tokens) / accum is
    backpropagated; then clip_grad_norm_ (if max_grad_norm > 0), optimizer
    step, scheduler step, zero_grad. Returns ([{step, loss, lr, grad_norm}],
    {step: snapshot(model)} at multiples of save_steps). `loss` is the mean of
    the step's micro-batch losses, `lr` the rate used by that update,
    `grad_norm` the total 2-norm of the accumulated gradient before clipping.
    """
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(params, recipe)
    sched = make_scheduler(opt, recipe)
    accum = recipe["gradient_accumulation_steps"]
    clip = recipe["max_grad_norm"]
    save = recipe.get("save_steps") or 0
    records, snaps = [], {}
    model.train()
    for step in range(1, recipe["max_steps"] + 1):
        lr = opt.param_groups[0]["lr"]
        losses = []
        for m in range(accum):
            ids, labels = micro_batch(rows, (step - 1) * accum + m,
                                      recipe["micro_batch_size"])
            out = model(input_ids=ids, labels=labels, use_cache=False)
            (out.loss / accum).backward()
            losses.append(out.loss.item())
        grads = [p.grad for p in params if p.grad is not None]
        norm = float(torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g.double()) for g in grads])))
        if clip and clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        records.append(dict(step=step, loss=sum(losses) / len(losses), lr=lr,
                            grad_norm=norm))
        if save and step % save == 0:
            snaps[step] = snapshot(model)
    return records, snaps


def causal_lm_loss(model, ids, labels):
    import torch

    with torch.no_grad():
        return float(model(input_ids=ids, labels=labels, use_cache=False).loss)


# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------

def rel_err(got, ref):
    """|got - ref| / |ref| (abs error when ref is 0)."""
    if got is None or (isinstance(got, float) and math.isnan(got)):
        return float("inf")
    d = abs(got - ref)
    return d / abs(ref) if ref != 0 else d


def tensor_err(got, ref):
    """max |got - ref| / max |ref| (max |got - ref| when ref is all 0);
    inf on a shape mismatch."""
    import numpy as np

    if got.shape != ref.shape:
        return float("inf")
    d = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()) if got.size else 0.0
    scale = float(np.abs(ref.astype(np.float64)).max()) if ref.size else 0.0
    return d / scale if scale > 0 else d


# AdamW moves every element by about lr per step whatever its gradient's
# size, so an element whose gradient is near zero at some step turns the
# last-bit differences of two correct implementations (OpenBLAS against
# PyTorch's MKL, whose summation order depends on the CPU) into a fraction
# of a step. A tensor may therefore have a few such elements, at most
# OUTLIER_SHARE of it, beyond `tol` but within OUTLIER_FACTOR * tol; seen on
# GPT-2 full fine-tuning: 1 element of 8192 at 1.24e-4 on one machine.
OUTLIER_SHARE = 1e-3
OUTLIER_FACTOR = 10


def compare_tensors(got, ref, tol, skip=None):
    """Compares {name: array} dicts. `skip`: {name: index} of elements left
    out of that tensor's error (checked elsewhere, see
    check_zero_gradient); the scale is still the whole max|ref|. A tensor
    may have a few outliers (OUTLIER_SHARE, OUTLIER_FACTOR above). Returns
    (worst err, worst name, problems: [str])."""
    import numpy as np

    problems = []
    skip = skip or {}
    worst, worst_name = 0.0, "-"
    for name, r in sorted(ref.items()):
        g = got.get(name)
        if g is None:
            problems.append(f"missing tensor {name}")
            continue
        if g.shape != r.shape:
            problems.append(f"{name}: shape {list(g.shape)}, expected {list(r.shape)}")
            continue
        if name in skip:
            g = g.copy()
            g[skip[name]] = r[skip[name]]
        e = tensor_err(g, r)
        if e > worst:
            worst, worst_name = e, name
        if not e <= tol:
            scale = float(np.abs(r.astype(np.float64)).max()) or 1.0
            over = int((np.abs(g.astype(np.float64) - r.astype(np.float64))
                        > tol * scale).sum())
            if e <= OUTLIER_FACTOR * tol and over <= OUTLIER_SHARE * r.size:
                print(f"  note: {name}: {over} of {r.size} elements beyond "
                      f"{tol:g} (worst {e:.2e}), within the AdamW outlier "
                      f"allowance")
                continue
            problems.append(f"{name}: max|diff|/max|ref| {e:.2e} > {tol:g} "
                            f"({over} of {r.size} elements)")
    extra = sorted(set(got) - set(ref))
    if extra:
        problems.append(f"{len(extra)} unexpected tensors, e.g. {extra[0]}")
    return worst, worst_name, problems


def zero_gradient_slices(model):
    """{parameter name: (index, description)} of the parameter elements
    whose gradient is zero in exact arithmetic: the key projection's bias.
    It adds q_i . b_k to every score of query i, a constant across the keys
    that softmax cancels, so (causal mask or not) its gradient is only
    rounding noise -- which AdamW, dividing by sqrt(v) + eps, turns into
    steps of up to lr * noise / eps that two implementations cannot agree
    on. Such elements are checked with check_zero_gradient instead.

    GPT-2: the middle third of each attn.c_attn.bias (Conv1D q|k|v);
    Llama/Qwen2-style: every self_attn.k_proj.bias."""
    out = {}
    cfg = model.config
    for name, p in model.named_parameters():
        if name.endswith("attn.c_attn.bias") and p.ndim == 1:
            h = cfg.n_embd
            out[name] = (slice(h, 2 * h), f"key bias [{h}:{2 * h}]")
        elif name.endswith("self_attn.k_proj.bias"):
            out[name] = (slice(None), "key bias")
    return out


def check_zero_gradient(got, ref, init, slices, bound):
    """For each zero-gradient slice (zero_gradient_slices) of a tensor in
    `ref`: max|x - init| / max|ref tensor| of tailor's (`got`) and the
    reference's values must stay within `bound` (a real gradient moves them
    by ~lr per step with AdamW). Returns (lines, problems)."""
    import numpy as np

    lines, problems = [], []
    for name, (idx, what) in sorted(slices.items()):
        if name not in ref or name not in init:
            continue
        g = got.get(name)
        if g is None or g.shape != ref[name].shape:
            continue  # compare_tensors reports it
        scale = float(np.abs(ref[name]).max()) or 1.0
        mg = float(np.abs(g[idx] - init[name][idx]).max()) / scale
        mr = float(np.abs(ref[name][idx] - init[name][idx]).max()) / scale
        lines.append(f"{name} {what}: moved tailor {mg:.1e}, torch {mr:.1e}")
        for who, m in (("tailor", mg), ("torch", mr)):
            if not m <= bound:
                problems.append(f"{name} {what} (zero gradient): {who} moved it "
                                f"{m:.2e} of max|ref| > {bound:g}")
    return lines, problems


def movement(final, init):
    """max over tensors of max|final - init| / max|final|: how far training
    moved the weights (a test whose weights do not move proves nothing)."""
    best = 0.0
    for name, f in final.items():
        if name in init:
            best = max(best, tensor_err(init[name], f))
    return best


def hf_aliases(model):
    """{state_dict name: parameter name} for the tensors a model ties to a
    parameter listed under another name (GPT-2: lm_head.weight IS
    transformer.wte.weight; named_parameters lists it once)."""
    params = {id(p): n for n, p in model.named_parameters()}
    out = {}
    for n, t in model.state_dict(keep_vars=True).items():
        pn = params.get(id(t))
        if pn is not None and pn != n:
            out[n] = pn
    return out


def full_checkpoint_to_hf(got, ref, info, tol):
    """Maps tailor's full fine-tuning checkpoint {name: array} onto the
    reference's Hugging Face parameter names and layout (`ref`: {parameter
    name: array}). Returns (mapped, notes, layout, problems), `layout` the
    [(name, message)] of tensors written in the wrong layout:

      - a name that is a parameter is taken as is;
      - a name HF ties to a parameter (info["aliases"], e.g. GPT-2's
        lm_head.weight -> transformer.wte.weight) is that parameter: compared
        once, and any second copy must hold the same values (else a problem:
        the tie was trained as two tensors);
      - an ONNX initializer name (info["onnx_names"], e.g. onnx::MatMul_N)
        is mapped to its parameter, transposed back to the HF layout (a
        note: the checkpoint lacks the HF name);
      - a 2-D tensor whose transpose is what HF holds (a different shape, or
        a square one at least twice as close to `ref` transposed: a
        transposed random matrix is O(1) away from itself) is a layout
        problem (HF cannot load it, or loads it wrong); its transpose is
        compared, so the values are still checked.
    Anything else stays under its own name (compare_tensors reports it as
    unexpected)."""
    aliases = info.get("aliases", {})
    onnx_names = info.get("onnx_names", {})
    notes, layout, problems = [], [], []
    copies = {}  # parameter name -> [(checkpoint name, array)]
    for n, a in sorted(got.items()):
        if n in ref:
            target = n
        elif n in aliases and aliases[n] in ref:
            target = aliases[n]
        elif n in onnx_names and onnx_names[n][0] in ref:
            target, transposed = onnx_names[n]
            if transposed:
                a = a.T
            notes.append(f"{n} -> {target}" + (" (transposed)" if transposed else ""))
        else:
            copies.setdefault(n, []).append((n, a))
            continue
        r = ref[target]
        if a.ndim == 2 and a.shape != a.T.shape and a.T.shape == r.shape:
            layout.append((n, f"{n}: written {list(a.shape)}, Hugging Face "
                              f"layout is {list(r.shape)} (stored transposed)"))
            a = a.T
        elif (a.ndim == 2 and a.shape == r.shape and a.shape[0] == a.shape[1]
              and tensor_err(a, r) > tol
              and 2 * tensor_err(a.T, r) < tensor_err(a, r)):
            layout.append((n, f"{n}: square, written transposed (max|diff|/"
                              f"max|ref| as written {tensor_err(a, r):.2e}, "
                              f"transposed {tensor_err(a.T, r):.2e})"))
            a = a.T
        copies.setdefault(target, []).append((n, a))
    mapped = {}
    for target, entries in copies.items():
        # The parameter's own name first: it is the one compared.
        entries.sort(key=lambda e: e[0] != target)
        mapped[target] = entries[0][1]
        for n, a in entries[1:]:
            e_ref = tensor_err(a, ref[target])
            e_own = tensor_err(a, entries[0][1])
            if not e_ref <= tol:
                problems.append(
                    f"{n} (tied to {target} in Hugging Face) differs from the "
                    f"reference {target} by {e_ref:.2e} and from tailor's "
                    f"{entries[0][0]} by {e_own:.2e}: trained as a separate copy")
    return mapped, notes, layout, problems
