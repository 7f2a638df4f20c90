//===- Commands.h - the tailor driver's commands ----------------*- C++ -*-===//
//
// One function per `tailor <command>`; each parses its own options (argv[0]
// is "tailor <command>") and returns the process exit code.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TOOLS_TAILOR_COMMANDS_H
#define TAILOR_TOOLS_TAILOR_COMMANDS_H

namespace tailor {

/// `tailor compile MODEL.onnx ... -o OUT`.
int runCompile(int argc, const char **argv);

/// `tailor inspect PLAN.tplan [--json]`.
int runInspect(int argc, const char **argv);

/// `tailor train PLAN.tplan --data PATH --output-dir DIR ...`.
int runTrain(int argc, const char **argv);

/// `tailor generate PLAN.tplan --prompt-ids 1,2,3 ...`: greedy decoding
/// with a generation plan.
int runGenerate(int argc, const char **argv);

/// `tailor quantize MODEL.onnx --scheme gptq --calib DATA -o OUT`.
int runQuantize(int argc, const char **argv);

/// `tailor calibrate PLAN [-o HW.yaml]`: time a plan's launches on this
/// machine and write the cost model's figures as a hardware file.
int runCalibrate(int argc, const char **argv);

/// `tailor explore MODEL.onnx --recipe R.yaml --hardware CLUSTER ...`:
/// compile every configuration of the space, print what fits and is fastest.
int runExplore(int argc, const char **argv);

} // namespace tailor

#endif // TAILOR_TOOLS_TAILOR_COMMANDS_H
