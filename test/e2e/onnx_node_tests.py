#!/usr/bin/env python3
"""Runs the ONNX project's own backend node test cases through tailor.

Every node case (`node/<test>/model.onnx` with `test_data_set_*/input_*.pb`
and `output_*.pb`) whose nodes are all default-domain ops that tailor's ONNX
importer has a row for, at the model's opset, is compiled to a plan
(`tailor compile model.onnx -o case.tplan`, static shapes, no --batch/--seq)
and run on the CPU (`tailor-run case.tplan --input NAME=X.npy ...
--output-dir DIR`); each output is compared with the expected TensorProto.

The supported op set is parsed at run time from the importer's table rows in
frontends/onnx/{ElementwiseOps,TensorOps,NeuralOps,IndexingOps}.cpp (`add("Op", ...)` and
`table.push_back({"domain", "Op", since, until, fn})`), so it follows the
sources. Cases whose graph inputs or outputs are not dense tensors of a dtype
tailor-run reads and writes (int64, int32, float32, float64, bool) are skipped
and counted as such.

The PyPI onnx wheel ships no `onnx/backend/test/data/node`, and its
`backend-test-tools generate-data` writes only the model cases, so the node
cases are generated once with the same writer (onnx.backend.test.cmd_tools)
fed by onnx.backend.test.case.node.collect_testcases(), into
CACHE/onnx-<version>/node.

Results per case: pass, compile-fail, run-fail or mismatch. A table per op
and `summary: P/N node cases pass (ops: K)` are printed, and --report writes
them as JSON. The exit status is 1 iff a case listed in the expected file
(test/e2e/onnx_node_expected.txt, one case name a line, written by
--update-expected from a run) does not pass, or if that file is missing;
newly passing cases are listed so they can be added.

  onnx_node_tests.py --tailor build/bin/tailor --tailor-run build/bin/tailor-run
  onnx_node_tests.py ... --filter 'test_(add|sub)' --report /tmp/node.json
  onnx_node_tests.py ... --update-expected
"""

import argparse
import collections
import concurrent.futures as futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
FRONTEND = os.path.join(ROOT, "frontends", "onnx")
TABLE_SOURCES = ("ElementwiseOps.cpp", "TensorOps.cpp", "NeuralOps.cpp",
                 "IndexingOps.cpp")
EXPECTED = os.path.join(HERE, "onnx_node_expected.txt")

# Tolerances. ONNX's backend runner defaults to rtol=1e-3, atol=1e-7 (every
# node case keeps those defaults). rtol is kept; atol is raised to 1e-5 because
# the references come from NumPy (often in float64 before the final cast)
# while tailor computes in float32 with its own exp/erf/tanh/sin and a BLAS
# with a different summation order: an output that should be ~0 (sin(pi),
# x - mean, a cancelling sum) can then differ by a few float32 ulps of the
# operands' magnitude, ~1e-7..1e-6, which no relative bound can absorb. 1e-5
# is still far below any error a wrong kernel produces on these O(1) inputs.
RTOL, ATOL = 1e-3, 1e-5

# The dtypes tailor-run reads from and writes to .npy files.
RUN_DTYPES = {"int64", "int32", "float32", "float64", "bool"}


# ---------------------------------------------------------------------------
# The importer's op table
# ---------------------------------------------------------------------------

def importer_table():
    """Returns ({op type: [(since, until), ...]}, min opset, max opset): the
    importer's default-domain table rows and the opsets it imports."""
    ctx = open(os.path.join(FRONTEND, "ImportContext.h")).read()
    max_opset = int(re.search(r"kMaxDefaultOpset\s*=\s*(\d+)", ctx).group(1))
    importer = open(os.path.join(FRONTEND, "OnnxImporter.cpp")).read()
    low = re.search(r"defaultOpset < (\d+)", importer)
    min_opset = int(low.group(1)) if low else 1
    consts = {"last": max_opset, "kMaxDefaultOpset": max_opset}
    table = collections.defaultdict(list)
    for src in TABLE_SOURCES:
        text = open(os.path.join(FRONTEND, src)).read()
        # add("Op", since, fn[, until]) (ElementwiseOps) or
        # add("Op", since, until, fn) (TensorOps): the numeric arguments, in
        # order, are since and (if present) until.
        for m in re.finditer(r'\badd\(\s*"(\w+)"\s*,([^;]*)\);', text):
            nums = [consts.get(a.strip(), a.strip()) for a in m.group(2).split(",")]
            nums = [int(n) for n in nums
                    if isinstance(n, int) or re.fullmatch(r"\d+", str(n))]
            since = nums[0]
            until = nums[1] if len(nums) > 1 else max_opset
            table[m.group(1)].append((since, until))
        # table.push_back({"domain", "Op", since, until, fn})
        for m in re.finditer(
                r'push_back\(\{\s*"([\w.]*)"\s*,\s*"(\w+)"\s*,\s*(\w+)\s*,\s*(\w+)\s*,',
                text):
            if m.group(1) not in ("", "ai.onnx"):
                continue
            since, until = (consts.get(v, None) or int(v) for v in m.group(3, 4))
            table[m.group(2)].append((since, until))
    if not table:
        raise SystemExit(f"error: no importer rows found in {FRONTEND}")
    return dict(table), min_opset, max_opset


def supported_at(table, op, opset):
    return any(lo <= opset <= hi for lo, hi in table.get(op, ()))


# ---------------------------------------------------------------------------
# Node test data
# ---------------------------------------------------------------------------

def node_data_dir(cache):
    """Returns the directory holding the node cases, generating them into
    CACHE/onnx-<version>/node on first use."""
    import onnx
    from onnx.backend.test import cmd_tools

    shipped = os.path.join(cmd_tools.DATA_DIR, "node")
    if os.path.isdir(shipped) and os.listdir(shipped):
        return shipped
    root = os.path.join(cache, f"onnx-{onnx.__version__}")
    node_dir = os.path.join(root, "node")
    if os.path.exists(os.path.join(root, "done")):
        return node_dir
    import warnings

    from onnx.backend.test.case import node as node_cases

    print(f"generating ONNX {onnx.__version__} node cases into {node_dir}",
          flush=True)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases(None)
    # cmd_tools.generate_data writes model.onnx and test_data_set_*/*.pb for
    # whatever its model_test.collect_testcases returns; hand it the node
    # cases so the files are exactly what `generate-data` writes upstream.
    saved = cmd_tools.model_test.collect_testcases
    cmd_tools.model_test.collect_testcases = lambda: cases
    try:
        cmd_tools.generate_data(argparse.Namespace(output=root))
    finally:
        cmd_tools.model_test.collect_testcases = saved
    open(os.path.join(root, "done"), "w").write(f"{len(cases)} cases\n")
    return node_dir


def tensor_dtype_name(elem_type):
    from onnx import helper

    try:
        return str(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:  # noqa: BLE001 - undefined / string types
        return f"onnx-type-{elem_type}"


def select(node_dir, table, opsets, pattern):
    """Returns (selected, skipped): selected is a list of case dicts, skipped
    maps a reason to {case name: the op it tests}."""
    import onnx

    names = sorted(n for n in os.listdir(node_dir)
                   if os.path.isfile(os.path.join(node_dir, n, "model.onnx")))
    if pattern:
        names = [n for n in names if re.search(pattern, n)]
    selected, skipped = [], collections.defaultdict(dict)
    single_op = {}
    for name in names:
        def skip(reason):
            skipped[reason][name] = "+".join(d for d in distinct if d != "Constant")

        model = onnx.load(os.path.join(node_dir, name, "model.onnx"))
        opset = next((o.version for o in model.opset_import
                      if o.domain in ("", "ai.onnx")), None)
        ops = [(n.domain, n.op_type) for n in model.graph.node]
        distinct = sorted({op for d, op in ops})
        if len([op for op in distinct if op != "Constant"]) == 1:
            single_op[name] = [op for op in distinct if op != "Constant"][0]
        if any(d not in ("", "ai.onnx") for d, _ in ops):
            skip("non-default domain op")
            continue
        if any(op not in table for _, op in ops):
            skip("an op the importer has no row for")
            continue
        if opset is None or not opsets[0] <= opset <= opsets[1] or any(
                not supported_at(table, op, opset) for _, op in ops):
            skip("model opset outside the importer's rows (tailor imports "
                 f"opsets {opsets[0]} to {opsets[1]})")
            continue
        values = list(model.graph.input) + list(model.graph.output)
        if any(v.type.WhichOneof("value") != "tensor_type" for v in values):
            skip("non-tensor graph input/output")
            continue
        dtypes = {tensor_dtype_name(v.type.tensor_type.elem_type) for v in values}
        if not dtypes <= RUN_DTYPES:
            skip("graph input/output dtype tailor-run does not read/write")
            continue
        selected.append(dict(name=name, dir=os.path.join(node_dir, name),
                             opset=opset, ops=distinct,
                             inputs=[v.name for v in model.graph.input],
                             outputs=[v.name for v in model.graph.output]))
    # The op a case tests: its one op (besides Constant); an `_expanded`
    # case (a function body inlined) belongs to the op of its base case.
    for case in selected:
        name = case["name"]
        base = re.sub(r"_expanded(_ver\d+)?$", "", name)
        op = single_op.get(name) or single_op.get(base) or "+".join(case["ops"])
        if op not in table and name != base:
            op += " (expanded)"  # only its function body is importable
        case["op"] = op
    return selected, skipped


# ---------------------------------------------------------------------------
# Running one case
# ---------------------------------------------------------------------------

def read_pb(path):
    from onnx import TensorProto, numpy_helper

    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def first_line(text):
    """The first non-empty line of a tool's message, without the leading
    'tailor compile: error: PATH/model.onnx: ' or the plan's path (the case
    is named anyway)."""
    for line in text.splitlines():
        if line.strip():
            line = re.sub(r"^tailor compile: error: ", "", line.strip())
            line = re.sub(r"\S*(model\.onnx|case\.tplan): ", "", line)
            return line[:400]
    return "(no message)"


def cause_of(result):
    """A grouping key for a failure: the status, the failing op and the
    message with node names, value names and numbers left out."""
    detail = result["detail"]
    m = re.match(r"node #\d+ (?:producing )?'[^']*' \(op '(\w+)'[^)]*\): (.*)", detail)
    if m:
        detail = f"{m.group(1)}: {m.group(2)}"
    elif result["status"] == "mismatch":
        detail = f"{result['op']}: " + re.sub(r"output '[^']*': ", "", detail)
    detail = re.sub(r"\('[^']*', (\w+)\)", r"(\1)", detail)
    detail = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", detail)
    return result["status"], detail


def compare(expected, got, rtol, atol):
    """Returns (ok, max abs error or None, problem text)."""
    import numpy as np

    if got.dtype != expected.dtype:
        return False, None, f"dtype {got.dtype}, expected {expected.dtype}"
    if got.shape != expected.shape:
        return False, None, f"shape {list(got.shape)}, expected {list(expected.shape)}"
    if expected.dtype.kind != "f":
        bad = int((got != expected).sum())
        err = (float(np.abs(got.astype(np.float64) - expected.astype(np.float64)).max())
               if expected.size and expected.dtype != bool else float(bad > 0))
        return bad == 0, err, f"{bad} of {expected.size} elements differ"
    nan_e, nan_g = np.isnan(expected), np.isnan(got)
    if (nan_e != nan_g).any():
        return False, None, (f"NaN positions differ ({int(nan_g.sum())} NaN, "
                             f"expected {int(nan_e.sum())})")
    e = expected[~nan_e].astype(np.float64)
    g = got[~nan_g].astype(np.float64)
    inf_e, inf_g = np.isinf(e), np.isinf(g)
    if (inf_e != inf_g).any() or (e[inf_e] != g[inf_g]).any():
        return False, None, "Inf positions or signs differ"
    e, g = e[~inf_e], g[~inf_g]
    err = float(np.abs(g - e).max()) if e.size else 0.0
    ok = bool(np.all(np.abs(g - e) <= atol + rtol * np.abs(e)))
    return ok, err, "" if ok else f"max abs err {err:.3g}"


def run_case(case, args, work):
    import numpy as np

    out_dir = os.path.join(work, case["name"])
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    plan = os.path.join(out_dir, "case.tplan")
    result = dict(name=case["name"], op=case["op"], ops=case["ops"],
                  opset=case["opset"])
    try:
        proc = subprocess.run([args.tailor, "compile",
                               os.path.join(case["dir"], "model.onnx"), "-o", plan],
                              capture_output=True, text=True,
                              timeout=args.case_timeout)
    except subprocess.TimeoutExpired:
        return dict(result, status="compile-fail",
                    detail=f"timed out after {args.case_timeout} s")
    if proc.returncode != 0:
        return dict(result, status="compile-fail",
                    detail=first_line(proc.stderr + proc.stdout))
    sets = sorted(d for d in os.listdir(case["dir"]) if d.startswith("test_data_set_"))
    errs = []
    for ds in sets:
        ds_dir = os.path.join(case["dir"], ds)
        cmd = [args.tailor_run, plan]
        for j, name in enumerate(case["inputs"]):
            npy = os.path.join(out_dir, f"{ds}.input_{j}.npy")
            np.save(npy, read_pb(os.path.join(ds_dir, f"input_{j}.pb")))
            cmd += ["--input", f"{name}={npy}"]
        res_dir = os.path.join(out_dir, ds)
        os.makedirs(res_dir)
        cmd += ["--output-dir", res_dir]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  timeout=args.case_timeout)
        except subprocess.TimeoutExpired:
            return dict(result, status="run-fail",
                        detail=f"timed out after {args.case_timeout} s")
        if proc.returncode != 0:
            return dict(result, status="run-fail",
                        detail=f"exit {proc.returncode}: "
                               + first_line(proc.stderr + proc.stdout))
        for j, name in enumerate(case["outputs"]):
            # tailor-run writes DIR/NAME.npy with '/' in NAME as '_'.
            path = os.path.join(res_dir, (name or "_").replace("/", "_") + ".npy")
            if not os.path.exists(path):
                return dict(result, status="run-fail",
                            detail=f"no {name}.npy in --output-dir (wrote "
                                   f"{sorted(os.listdir(res_dir))})")
            expected = read_pb(os.path.join(ds_dir, f"output_{j}.pb"))
            ok, err, problem = compare(expected, np.load(path), args.rtol, args.atol)
            if err is not None:
                errs.append(err)
            if not ok:
                return dict(result, status="mismatch", max_abs_err=err,
                            detail=f"output '{name}': {problem}")
    if not args.keep:
        shutil.rmtree(out_dir, ignore_errors=True)
    return dict(result, status="pass", max_abs_err=max(errs) if errs else 0.0,
                detail="")


# ---------------------------------------------------------------------------
# Expected-pass list
# ---------------------------------------------------------------------------

def read_expected(path):
    if not os.path.exists(path):
        return None
    return {line.strip() for line in open(path)
            if line.strip() and not line.startswith("#")}


def write_expected(path, passing):
    with open(path, "w") as f:
        f.write("# ONNX backend node cases that must pass through tailor compile +\n"
                "# tailor-run (test/e2e/onnx_node_tests.py). Regenerate from a run\n"
                "# with --update-expected; a case failing here fails e2e.onnx_node.\n")
        for name in sorted(passing):
            f.write(name + "\n")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--tailor", required=True, help="the tailor driver")
    ap.add_argument("--tailor-run", required=True, help="the tailor-run binary")
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "test", "onnx-node"),
                    help="where node cases are generated and plans are written "
                         "(work/run-*) (default: %(default)s)")
    ap.add_argument("--jobs", type=int, default=2, help="cases run in parallel")
    ap.add_argument("--filter", help="regex on case names")
    ap.add_argument("--report", help="write a JSON report here")
    ap.add_argument("--expected", default=EXPECTED,
                    help="cases that must pass (default: %(default)s)")
    ap.add_argument("--update-expected", action="store_true",
                    help="rewrite --expected with the cases passing in this run")
    ap.add_argument("--rtol", type=float, default=RTOL)
    ap.add_argument("--atol", type=float, default=ATOL)
    ap.add_argument("--case-timeout", type=int, default=120,
                    help="seconds per compile or run")
    ap.add_argument("--keep", action="store_true",
                    help="keep plans and outputs of passing cases too")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print one full message per failure group")
    args = ap.parse_args()
    args.tailor = os.path.abspath(args.tailor)
    args.tailor_run = os.path.abspath(args.tailor_run)

    table, min_opset, max_opset = importer_table()
    node_dir = node_data_dir(args.cache)
    selected, skipped = select(node_dir, table, (min_opset, max_opset), args.filter)
    # One folder per run, so concurrent runs on one cache do not collide;
    # failing cases keep their plan and outputs there.
    os.makedirs(os.path.join(args.cache, "work"), exist_ok=True)
    work = tempfile.mkdtemp(prefix="run-", dir=os.path.join(args.cache, "work"))

    with futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: run_case(c, args, work), selected))

    per_op = collections.OrderedDict()
    for r in sorted(results, key=lambda r: r["op"]):
        s = per_op.setdefault(r["op"], collections.Counter())
        s["cases"] += 1
        s[r["status"]] += 1
    width = max([len(op) for op in per_op] + [2])
    print(f"{'op':<{width}} {'cases':>5} {'pass':>5} {'compile':>8} {'run':>5} {'mismatch':>9}")
    for op, s in per_op.items():
        print(f"{op:<{width}} {s['cases']:>5} {s['pass']:>5} {s['compile-fail']:>8} "
              f"{s['run-fail']:>5} {s['mismatch']:>9}")
    failing = [r for r in results if r["status"] != "pass"]
    if failing:
        print("\nfailing cases:")
        by_cause = collections.defaultdict(list)
        for r in failing:
            by_cause[cause_of(r)].append(r)
        for (status, cause), rs in sorted(by_cause.items(),
                                          key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"  {status} x{len(rs)}: {cause}")
            if args.verbose:
                print(f"    e.g. {rs[0]['detail']}")
            print(textwrap.fill(" ".join(
                r["name"] + (f" ({r['max_abs_err']:.2g})"
                             if r.get("max_abs_err") is not None else "")
                for r in rs), width=100, initial_indent="    ",
                subsequent_indent="    "))
    for reason, names in skipped.items():
        ops = collections.Counter(names.values())
        known = sorted(op for op in ops if op in table)
        print(f"skipped {len(names)} cases: {reason}"
              + (f"; among them cases of supported ops: {' '.join(known)}"
                 if known else ""))

    passing = {r["name"] for r in results if r["status"] == "pass"}
    if len(passing) == len(results) and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"plans and outputs of failing cases: {work}")
    n_ops = len(per_op)
    print(f"summary: {len(passing)}/{len(results)} node cases pass (ops: {n_ops})")

    rc = 0
    expected = read_expected(args.expected)
    if args.update_expected:
        if args.filter:
            ap.error("--update-expected needs a full run (no --filter)")
        write_expected(args.expected, passing)
        print(f"wrote {len(passing)} expected-pass cases to {args.expected}")
    elif expected is None:
        print(f"error: {args.expected} is missing; create it with --update-expected")
        rc = 1
    else:
        if args.filter:
            expected = {n for n in expected if re.search(args.filter, n)}
        status = {r["name"]: r for r in results}
        regressed = sorted(n for n in expected if n not in passing)
        for n in regressed:
            r = status.get(n)
            why = f"{r['status']}: {r['detail']}" if r else "no longer selected"
            print(f"REGRESSION {n}: {why}")
        new = sorted(passing - expected)
        if new:
            print(f"newly passing ({len(new)}; add with --update-expected): "
                  + " ".join(new))
        rc = 1 if regressed else 0

    if args.report:
        import onnx

        with open(args.report, "w") as f:
            json.dump({
                "onnx_version": onnx.__version__,
                "node_dir": node_dir,
                "rtol": args.rtol, "atol": args.atol,
                "importer_opsets": [min_opset, max_opset],
                "importer_ops": {op: rows for op, rows in sorted(table.items())},
                "summary": {"passed": len(passing), "cases": len(results),
                            "ops": n_ops},
                "per_op": {op: dict(s) for op, s in per_op.items()},
                "skipped": {k: dict(sorted(v.items())) for k, v in skipped.items()},
                "cases": sorted(results, key=lambda r: r["name"]),
            }, f, indent=1)
            f.write("\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
