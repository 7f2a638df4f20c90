//===- GenerateCommand.cpp - `tailor generate` ----------------------------===//
//
// tailor generate G.tplan --prompt-ids 1,2,3 [--max-new-tokens N] [--json]
//     [--adapter DIR] [--threads N]
//
// Greedy decoding with a generation plan (`tailor compile --task generate
// --max-seq-len N`) through the C API: the plan's `decode` entry runs once
// per prompt token (positions 0, 1, ..., filling the KV cache), then once
// per generated token, each the argmax of the last logits. Generated ids
// stream to stdout as they come; `--json` prints one object at the end
// instead. Generation stops at the model's eos id (when the plan knows it),
// after --max-new-tokens, or when the cache is full.
//
// A plan compiled with --batch B decodes B copies of the prompt (every row
// the same tokens, so the same ids); the ids of row 0 are printed.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"

#include "runtime/include/tailor/runtime.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace tailor {
namespace {

int generateError(const llvm::Twine &message) {
  llvm::errs() << "tailor generate: error: " << message << "\n";
  return 1;
}

/// "1,2,3" as ids; fails with why.
bool parseIds(llvm::StringRef text, std::vector<int64_t> &ids,
              std::string &why) {
  for (llvm::StringRef piece : llvm::split(text, ',')) {
    piece = piece.trim();
    int64_t id = 0;
    if (piece.empty() || piece.getAsInteger(10, id)) {
      why = "'" + piece.str() + "' is not a token id";
      return false;
    }
    ids.push_back(id);
  }
  return true;
}

struct PlanDeleter {
  void operator()(tailor_plan *plan) const { tailor_plan_free(plan); }
};
struct SessionDeleter {
  void operator()(tailor_session *session) const {
    tailor_session_free(session);
  }
};

/// One decode step: `token` (every batch row) at `position`; the argmax of
/// row 0's logits in `next`. Returns "" or why it failed.
std::string decodeStep(tailor_session *session,
                       const tailor_generation_info &info, int64_t token,
                       int64_t position, int64_t &next) {
  std::vector<int64_t> ids(static_cast<size_t>(info.batch), token);
  int64_t idsShape[2] = {info.batch, 1};
  if (tailor_session_set_input(session, "input_ids", TAILOR_I64, idsShape, 2,
                               ids.data(),
                               ids.size() * sizeof(int64_t)) != TAILOR_OK ||
      tailor_session_set_input(session, "position", TAILOR_I64, idsShape, 0,
                               &position, sizeof(int64_t)) != TAILOR_OK ||
      tailor_session_run_entry(session, "decode") != TAILOR_OK) {
    return tailor_last_error();
  }
  const void *data = nullptr;
  tailor_tensor_info logits;
  if (tailor_session_output(session, "logits", &data, &logits) != TAILOR_OK) {
    return tailor_last_error();
  }
  if (logits.dtype != TAILOR_F32 ||
      logits.shape[logits.rank - 1] != info.vocab_size) {
    return "the plan's logits are not f32 [..., " +
           std::to_string(info.vocab_size) + "]";
  }
  // Greedy: the first index of the largest logit (torch.argmax's choice).
  const float *row = static_cast<const float *>(data);
  int64_t best = 0;
  for (int64_t v = 1; v < info.vocab_size; ++v) {
    if (row[v] > row[best]) {
      best = v;
    }
  }
  next = best;
  return "";
}

} // namespace

int runGenerate(int argc, const char **argv) {
  namespace cl = llvm::cl;
  cl::ResetCommandLineParser();
  cl::OptionCategory category("tailor generate options");
  cl::opt<std::string> planPath(cl::Positional, cl::desc("<generate.tplan>"),
                                cl::Required, cl::cat(category));
  cl::opt<std::string> promptIds(
      "prompt-ids",
      cl::desc("the prompt as comma-separated token ids (each below the "
               "vocabulary size)"),
      cl::value_desc("ids"), cl::Required, cl::cat(category));
  cl::opt<int64_t> maxNewTokens(
      "max-new-tokens",
      cl::desc("tokens to generate at most (default 20); fewer when the "
               "model's eos id comes or the KV cache fills"),
      cl::value_desc("n"), cl::init(20), cl::cat(category));
  cl::opt<bool> json(
      "json",
      cl::desc("print one JSON object at the end: prompt_ids, generated_ids, "
               "time_to_first_token_s, tokens_per_second"),
      cl::cat(category));
  cl::opt<std::string> adapter(
      "adapter",
      cl::desc("merge a PEFT LoRA adapter (a directory) into the weights at "
               "load, found by their Hugging Face names (for exports that "
               "rename them, compile with `--task generate --adapter DIR` "
               "instead)"),
      cl::value_desc("dir"), cl::cat(category));
  cl::opt<int> threads("threads",
                       cl::desc("CPU worker threads (default: all cores)"),
                       cl::value_desc("n"), cl::init(0), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "tailor generate: greedy decoding with a generation plan (tailor "
          "compile MODEL.onnx --task generate --max-seq-len N)\n\n"
          "Runs the plan's decode step once per prompt token, then once per "
          "generated token (the argmax of the logits), streaming the "
          "generated ids to stdout. Stops at the model's eos id (from the "
          "config.json next to the model when it was compiled), after "
          "--max-new-tokens, or when the KV cache is full.\n",
          &llvm::errs())) {
    return 1;
  }
  if (maxNewTokens < 1 || threads < 0) {
    return generateError("--max-new-tokens must be at least 1 and --threads "
                         "not negative");
  }
  std::vector<int64_t> prompt;
  std::string why;
  if (!parseIds(promptIds, prompt, why)) {
    return generateError("--prompt-ids: " + why);
  }

  tailor_plan *rawPlan = nullptr;
  if (tailor_plan_load(planPath.c_str(), &rawPlan) != TAILOR_OK) {
    return generateError(tailor_last_error());
  }
  std::unique_ptr<tailor_plan, PlanDeleter> plan(rawPlan);
  tailor_generation_info info;
  if (tailor_plan_generation_info(plan.get(), &info) != TAILOR_OK) {
    return generateError(planPath + ": " + tailor_last_error());
  }
  for (int64_t id : prompt) {
    if (id < 0 || id >= info.vocab_size) {
      return generateError("--prompt-ids: token id " + llvm::Twine(id) +
                           " is outside the vocabulary [0, " +
                           llvm::Twine(info.vocab_size) + ")");
    }
  }
  if (static_cast<int64_t>(prompt.size()) > info.max_seq_len) {
    return generateError("the prompt has " + llvm::Twine(prompt.size()) +
                         " tokens but the plan's KV cache holds " +
                         llvm::Twine(info.max_seq_len) +
                         " (compile with a larger --max-seq-len)");
  }

  tailor_session_options options{threads};
  tailor_session *rawSession = nullptr;
  if (tailor_session_create(plan.get(), &options, &rawSession) != TAILOR_OK) {
    return generateError(tailor_last_error());
  }
  std::unique_ptr<tailor_session, SessionDeleter> session(rawSession);
  if (!adapter.empty() && tailor_session_apply_adapter(
                              session.get(), adapter.c_str()) != TAILOR_OK) {
    return generateError(tailor_last_error());
  }

  // Time to first token counts from the first prompt token's step (loading
  // the weights is not generation).
  auto begin = std::chrono::steady_clock::now();
  int64_t next = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    std::string error = decodeStep(session.get(), info, prompt[i],
                                   static_cast<int64_t>(i), next);
    if (!error.empty()) {
      return generateError(error);
    }
  }
  auto first = std::chrono::steady_clock::now();
  std::vector<int64_t> generated;
  auto isEos = [&](int64_t id) {
    for (int e = 0; e < info.eos_count; ++e) {
      if (info.eos_token_ids[e] == id) {
        return true;
      }
    }
    return false;
  };
  int64_t position = static_cast<int64_t>(prompt.size());
  while (true) {
    generated.push_back(next);
    if (!json) {
      llvm::outs() << (generated.size() > 1 ? " " : "") << next;
      llvm::outs().flush();
    }
    if (isEos(next) || static_cast<int64_t>(generated.size()) >= maxNewTokens) {
      break;
    }
    if (position >= info.max_seq_len) {
      llvm::errs() << "tailor generate: note: stopped after "
                   << generated.size() << " tokens: the KV cache holds "
                   << info.max_seq_len << "\n";
      break;
    }
    std::string error = decodeStep(session.get(), info, next, position++, next);
    if (!error.empty()) {
      return generateError(error);
    }
  }
  auto end = std::chrono::steady_clock::now();
  double ttft = std::chrono::duration<double>(first - begin).count();
  // Decoding speed: the tokens after the first over the time they took.
  double decodeSeconds = std::chrono::duration<double>(end - first).count();
  double tokensPerSecond = generated.size() > 1 && decodeSeconds > 0
                               ? double(generated.size() - 1) / decodeSeconds
                               : 0.0;
  if (!json) {
    llvm::outs() << "\n";
    return 0;
  }
  llvm::json::Array promptJson, generatedJson;
  for (int64_t id : prompt) {
    promptJson.push_back(id);
  }
  for (int64_t id : generated) {
    generatedJson.push_back(id);
  }
  llvm::outs() << llvm::formatv("{0}",
                                llvm::json::Value(llvm::json::Object{
                                    {"prompt_ids", std::move(promptJson)},
                                    {"generated_ids", std::move(generatedJson)},
                                    {"time_to_first_token_s", ttft},
                                    {"tokens_per_second", tokensPerSecond}}))
               << "\n";
  return 0;
}

} // namespace tailor
