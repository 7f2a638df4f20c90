"""Shared machinery of the training e2e tests (train_vs_peft.py,
peft_roundtrip.py): the tiny Llama and its ONNX export, the seeded JSONL
dataset, recipes, driving `tailor compile` / `tailor train`, the PyTorch
reference training loop, and tensor comparisons.

The model is built once (test/generators/export_hf.py's seeded tiny Llama:
hidden 64, 2 layers, 4 heads, 2 kv heads, intermediate 128, vocab 256,
untied lm_head, fp32, no dropout), exported with the TorchScript exporter at
opset 17, and that same object -- its class switched back from the
logits-only export wrapper to LlamaForCausalLM -- is the reference, so the
reference starts from exactly the exported weights (checked against the ONNX
initializers by name).
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

def build_and_export(onnx_path, seed=0):
    """Builds the seeded tiny Llama, exports it to onnx_path and returns
    (hf_model, info): the LlamaForCausalLM (eval mode, exactly the exported
    weights) and a dict describing the export.

    Tries the library-default attention first, then eager, as export_hf does;
    the TorchScript exporter needs export_hf's aten::diff / bool cumsum
    symbolics with transformers 5.
    """
    import onnx
    import torch

    import export_hf

    os.makedirs(os.path.dirname(os.path.abspath(onnx_path)), exist_ok=True)
    errors = []
    for attn in (None, "eager"):
        wrapped, ess, _ = export_hf.build_model("llama", seed, attn)
        example = torch.randint(0, ess["vocab"], (2, 8),
                                generator=torch.Generator().manual_seed(seed))
        try:
            with torch.no_grad(), export_hf._ts_symbolics(OPSET):
                export_hf._export_torchscript(wrapped, example, OPSET, onnx_path,
                                              external_data=False)
            onnx.checker.check_model(onnx_path, full_check=True)
        except Exception as e:  # noqa: BLE001
            errors.append(f"attn={attn}: {type(e).__name__}: {str(e)[:500]}")
            continue
        # Back from the logits-only export wrapper to the HF class, so the
        # reference computes HF's own causal-LM loss from labels.
        wrapped.__class__ = type(wrapped).__mro__[1]
        model = wrapped.eval()
        info = dict(attn_implementation=ess["attn_implementation"],
                    params=sum(p.numel() for p in model.parameters()))
        info.update(check_exported_weights(model, onnx_path))
        if info["weights_unmatched"]:
            raise RuntimeError("parameters not found among the exported "
                               "initializers: " + ", ".join(info["weights_unmatched"]))
        return model, info
    raise RuntimeError("export failed: " + " | ".join(errors))


def check_exported_weights(model, onnx_path):
    """Finds every model parameter among the ONNX initializers, by name
    (must then be bit-identical) or else as the transposed copy the
    exporter folds Linear weights into. Returns {"weights_checked": n,
    "weights_unmatched": [parameters not found]}; raises on a mismatch."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    m = onnx.load(onnx_path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    used = set()
    checked, unmatched = 0, []
    for name, p in model.named_parameters():
        ref = p.detach().cpu().numpy()
        got = inits.get(name)
        if got is not None and got.shape == ref.shape:
            if not np.array_equal(got, ref):
                raise RuntimeError(f"exported initializer {name} differs from "
                                   "the reference model's parameter")
            used.add(name)
            checked += 1
            continue
        # The TorchScript exporter folds a Linear weight's Transpose into a
        # new initializer (onnx::MatMul_N, [in, out]): find it by value.
        hit = None
        if ref.ndim == 2:
            hit = next((n for n, a in inits.items() if n not in used
                        and a.shape == ref.T.shape and np.array_equal(a, ref.T)),
                       None)
        if hit is None:
            unmatched.append(name)
        else:
            used.add(hit)
            checked += 1
    return {"weights_checked": checked, "weights_unmatched": unmatched}


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


def tailor_compile_train(bin_dir, onnx_path, recipe, work, data_path,
                         init_adapter=None, threads=2, overrides=()):
    """Compiles `recipe` to work/plan.tplan and trains it into work/out.
    Returns (out_dir, None) or (None, error)."""
    import shutil

    tailor = os.path.join(bin_dir, "tailor")
    recipe_path = os.path.join(work, "recipe.yaml")
    write_recipe(recipe, recipe_path)
    plan = os.path.join(work, "plan.tplan")
    log = os.path.join(work, "tailor.log")
    ok, msg = run([tailor, "compile", onnx_path, "--recipe", recipe_path,
                   *overrides, "-o", plan], 900, log)
    if not ok:
        return None, "compile: " + msg
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [tailor, "train", plan, "--data", data_path,
           "--max-steps", str(recipe["max_steps"]), "--output-dir", out,
           "--threads", str(threads)]
    if init_adapter:
        cmd += ["--init-adapter", init_adapter]
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
    if sorted(cfg.get("target_modules") or []) != sorted(recipe["lora_target_modules"]):
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


def compare_tensors(got, ref, tol):
    """Compares {name: array} dicts. Returns (worst err, worst name,
    problems: [str])."""
    problems = []
    worst, worst_name = 0.0, "-"
    for name, r in sorted(ref.items()):
        g = got.get(name)
        if g is None:
            problems.append(f"missing tensor {name}")
            continue
        if g.shape != r.shape:
            problems.append(f"{name}: shape {list(g.shape)}, expected {list(r.shape)}")
            continue
        e = tensor_err(g, r)
        if e > worst:
            worst, worst_name = e, name
        if not e <= tol:
            problems.append(f"{name}: max|diff|/max|ref| {e:.2e} > {tol:g}")
    extra = sorted(set(got) - set(ref))
    if extra:
        problems.append(f"{len(extra)} unexpected tensors, e.g. {extra[0]}")
    return worst, worst_name, problems


def movement(final, init):
    """max over tensors of max|final - init| / max|final|: how far training
    moved the weights (a test whose weights do not move proves nothing)."""
    best = 0.0
    for name, f in final.items():
        if name in init:
            best = max(best, tensor_err(init[name], f))
    return best
