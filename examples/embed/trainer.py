#!/usr/bin/env python3
"""Training with checkpoints from Python: trainer.c's program with the
`tailor` package (python/, ctypes over the same C API).

Trains until step STOP (the callback returns True: the trainer writes
OUTPUT_DIR/checkpoint-STOP), drops the trainer as an ending process would,
then a new trainer resumes from the latest checkpoint, trains to the plan's
max_steps and writes the final adapter (or model) into OUTPUT_DIR.

  trainer.py PLAN.tplan DATA OUTPUT_DIR STOP
"""

import sys

import tailor


def report(metrics):
    print(f"step {metrics.step} loss {metrics.loss:.9g} lr {metrics.lr:.9g} "
          f"grad_norm {metrics.grad_norm:.9g}")


def main():
    if len(sys.argv) != 5:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 1
    plan, data, output_dir, stop = sys.argv[1:4] + [int(sys.argv[4])]

    def until_stop(metrics):
        report(metrics)
        return metrics.step == stop

    with tailor.Trainer(plan, data=data, output_dir=output_dir,
                        save_steps=0) as trainer:
        trainer.train(callback=until_stop)
        print(f"stopped at step {trainer.global_step} of "
              f"{trainer.max_steps}: {trainer.last_checkpoint}")
    with tailor.Trainer(plan, data=data, output_dir=output_dir,
                        save_steps=0, resume="latest") as trainer:
        print(f"resumed at step {trainer.global_step}")
        trainer.train(callback=report)
        print(f"done: step {trainer.global_step}, written to {output_dir}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except tailor.TailorError as error:
        print(f"trainer.py: {error}", file=sys.stderr)
        sys.exit(1)
