"""The pass pipeline a recipe implies, printed then run, gives the same plan.

  pipeline_roundtrip.py TAILOR TAILOR_OPT MODEL.onnx RECIPE.yaml WORKDIR

1. `tailor compile --print-pipeline` prints the pipeline;
2. `tailor compile` (implied pipeline) and `tailor compile --pass-pipeline=
   <printed>` write plans with the same bytes;
3. `tailor-opt --pass-pipeline=<printed>` on the imported module (with its
   recipe attached, `--compile-to=import --emit=mlir`) gives the same
   sched program as `tailor compile --compile-to=schedule --emit=mlir`,
   origins aside: the textual import carries no ONNX node names (MLIR
   prints no locations by default), so launches say "tg.linear" where
   tailor compile says "tg.linear MatMul#1".
Prints "ok: N passes" or what differed; exit status 0 or 1.
"""

import os
import re
import subprocess
import sys


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAIL: {' '.join(cmd[:3])} ... exited {proc.returncode}: "
              f"{proc.stderr.strip()[-600:]}")
        sys.exit(1)
    return proc.stdout


def main():
    tailor, opt, model, recipe, work = sys.argv[1:6]
    base = [tailor, "compile", model, "--recipe", recipe]
    pipeline = run(base + ["--print-pipeline"]).strip()
    if not pipeline.startswith("builtin.module("):
        print(f"FAIL: printed pipeline is not anchored on builtin.module: "
              f"{pipeline[:80]}")
        return 1
    implied = os.path.join(work, "implied.tplan")
    given = os.path.join(work, "given.tplan")
    run(base + ["-o", implied])
    run(base + ["--pass-pipeline=" + pipeline, "-o", given])
    if open(implied, "rb").read() != open(given, "rb").read():
        print("FAIL: the printed pipeline gives a different plan")
        return 1
    imported = os.path.join(work, "imported.mlir")
    run(base + ["--compile-to=import", "--emit=mlir", "-o", imported])
    via_opt = run([opt, imported, "--pass-pipeline=" + pipeline])
    via_tailor = run(base + ["--compile-to=schedule", "--emit=mlir", "-o", "-"])
    def without_origins(text):
        return re.sub(r'origin = "[^"]*"', 'origin = ""', text).strip()

    if without_origins(via_opt) != without_origins(via_tailor):
        print("FAIL: tailor-opt with the printed pipeline differs from "
              "tailor compile --compile-to=schedule")
        return 1
    print(f"ok: {pipeline.count('tailor-')} tailor passes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
