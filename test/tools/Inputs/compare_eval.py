"""Prints whether two metrics.jsonl files end with the same eval_loss and
different training losses: compare_eval.py A/metrics.jsonl B/metrics.jsonl"""

import json
import sys

a, b = ([json.loads(line) for line in open(path) if line.strip()][-1]
        for path in sys.argv[1:3])
print(f"eval_loss equal: {a.get('eval_loss') is not None and a.get('eval_loss') == b.get('eval_loss')}, "
      f"loss differs: {a['loss'] != b['loss']}")
