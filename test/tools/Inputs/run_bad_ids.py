"""run_bad_ids.py: runs a make_tiny_lm.py plan through the C API with a
token id outside the vocabulary, then with good ids, in one session.

    run_bad_ids.py PLAN

Prints the failed run's status and message (tailor_session_run through the
Python binding), then runs the same session again on good ids: the run must
succeed and its logits equal NumPy's table[ids] @ head (make_tiny_lm.py's
weights) within 2% of max |logits| (a GPU plan computes the GEMM in bf16),
so a failed run leaves nothing behind that fails the next one.
"""

import os
import sys

import numpy as np

import tailor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_lm import weights  # noqa: E402


def main():
    session = tailor.InferenceSession(sys.argv[1])
    bad = np.array([[1, 2, 100, 3]], dtype=np.int64)
    try:
        session.run(["logits"], {"input_ids": bad})
        sys.exit("a run with token id 100 succeeded")
    except tailor.TailorError as e:
        print(f"bad ids: status {e.status}: {e}")
    good = np.array([[4, 99, 0, 7]], dtype=np.int64)
    logits, = session.run(["logits"], {"input_ids": good})
    table, head = weights()
    want = table[good] @ head
    error = float(np.abs(logits - want).max())
    scale = float(np.abs(want).max())
    print(f"good ids: max |tailor - numpy| = {error:.3g} of {scale:.3g}")
    if not error <= 0.02 * scale:
        sys.exit("the run after the failed one is wrong")


if __name__ == "__main__":
    main()
