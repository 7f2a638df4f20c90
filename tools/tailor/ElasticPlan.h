//===- ElasticPlan.h - a training plan for the world a launch has -*- C++ -*-===//
//
// `tailor train --elastic`: ranks may leave or join between runs (a rank
// lost, a job restarted by `mpirun -np` with another count or by torchrun's
// elastic agent). When the launch's world size is not the plan's, the plan
// is compiled again from the command line it records (plan format 1.11:
// the model, the recipe and its overrides, the directory; not the output),
// for the
// launch's ranks and with the accumulation that keeps the global batch; the
// trainer then resumes from the consolidated checkpoint with the data order
// of the new world.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_TOOLS_TAILOR_ELASTICPLAN_H
#define TAILOR_TOOLS_TAILOR_ELASTICPLAN_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>

#include <string>
#include <vector>

namespace tailor {

/// What a training plan says about the world it was compiled for.
struct ElasticRecord {
  int worldSize = 1;
  int64_t microBatchSize = 1;
  int64_t accumulation = 1;
  /// Stages of a layer split (0: none).
  int stages = 0;
  std::vector<std::string> compileArguments;
  std::string compileDirectory;
};

/// Reads `planPath`'s record; errors name the file.
llvm::Expected<ElasticRecord> readElasticRecord(const std::string &planPath);

/// The `--hardware` spec `spec` (a built-in name with optional `N x` or
/// `M x N x` counts) resized to `world` ranks: one node of `world` when it
/// had one node, else nodes of the same size. Hardware files and clusters
/// that do not divide are errors that say so.
llvm::Expected<std::string> resizedHardware(const std::string &spec,
                                            int world);

/// `args` without the options `names` (each as `-name V`, `--name V`,
/// `-name=V` or `--name=V`); their values go to `values` when given.
std::vector<std::string>
dropOptions(const std::vector<std::string> &args,
            llvm::ArrayRef<llvm::StringRef> names,
            std::map<std::string, std::string> *values = nullptr);

/// `record`'s compile arguments for `world` ranks writing `output`: the
/// output and hardware replaced, and `gradient_accumulation_steps` set so
/// the global batch stays what it was (an error when it cannot), or, for a
/// layer split, `pipeline_stages` set to `world`.
llvm::Expected<std::vector<std::string>>
elasticCompileArguments(const ElasticRecord &record, int world,
                        const std::string &output, int64_t &accumulation);

/// The plan this launch runs: `planPath` when its world size is the
/// launch's, else one compiled for the launch into
/// `outputDir/elastic/world-W/rank-R.tplan` (each rank compiles its own
/// copy: nothing to coordinate before the communicator exists). Rank 0
/// says what it did on stderr.
llvm::Expected<std::string> planForLaunch(const std::string &planPath,
                                          const std::string &outputDir);

} // namespace tailor

#endif // TAILOR_TOOLS_TAILOR_ELASTICPLAN_H
