//===- GenerateCommand.cpp - `tailor generate` ----------------------------===//
//
// tailor generate G.tplan --prompt-ids 1,2,3 | --prompt TEXT
//     [--tokenizer PATH] [--max-new-tokens N] [--json]
//     [--temperature T --top-k K --top-p P --seed S] [--adapter DIR]
//     [--threads N]
//
// Decoding with a generation plan (`tailor compile --task generate
// --max-seq-len N`) through the C API's generator: the prompt fills the KV
// cache (the plan's `prefill` entry a chunk of tokens at a time; the
// `decode` entry once per token for plans without one), then each
// generated token is chosen -- greedily, or drawn as transformers' sampling does --
// and fed back. Generated ids stream to stdout as they come -- their text
// when there is a tokenizer (--prompt finds tokenizer.json or
// tokenizer.model beside the plan, or takes --tokenizer) -- and `--json`
// prints one object at the end instead. Generation stops at the model's eos
// id (when the plan knows it), after --max-new-tokens, or when the cache
// is full.
//
// A plan compiled with --batch B decodes B copies of the prompt; the ids of
// row 0 are printed.
//
//===----------------------------------------------------------------------===//

#include "tools/tailor/Commands.h"

#include "runtime/include/tailor/runtime.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <memory>
#include <optional>
#include <random>
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

/// What the command line asks for, checked.
struct GenerateRequest {
  std::string planPath;
  std::vector<int64_t> prompt;
  /// --prompt's text (encoded once the tokenizer is open), and where the
  /// tokenizer is ("" for none: ids in, ids out).
  std::optional<std::string> promptText;
  std::string tokenizerPath;
  int64_t maxNewTokens = 20;
  bool json = false;
  std::string adapter;
  int threads = 0;
  tailor_sampling_options sampling{};
};

struct PlanDeleter {
  void operator()(tailor_plan *plan) const { tailor_plan_free(plan); }
};
struct TokenizerDeleter {
  void operator()(tailor_tokenizer *tokenizer) const {
    tailor_tokenizer_free(tokenizer);
  }
};
using TokenizerPtr = std::unique_ptr<tailor_tokenizer, TokenizerDeleter>;
struct GeneratorDeleter {
  void operator()(tailor_generator *generator) const {
    tailor_generator_free(generator);
  }
};
using GeneratorPtr = std::unique_ptr<tailor_generator, GeneratorDeleter>;

/// What a run produced, for --json.
struct GenerateResult {
  std::vector<int64_t> generated;
  /// The generated ids' text (with a tokenizer).
  std::string text;
  double timeToFirstToken = 0;
  double tokensPerSecond = 0;
};

/// tokenizer.json or tokenizer.model in the plan's directory, or "".
std::string findTokenizerBeside(llvm::StringRef planPath) {
  llvm::SmallString<256> dir = llvm::sys::path::parent_path(planPath);
  for (const char *name : {"tokenizer.json", "tokenizer.model"}) {
    llvm::SmallString<256> candidate = dir;
    llvm::sys::path::append(candidate, name);
    if (llvm::sys::fs::exists(candidate)) {
      return std::string(candidate);
    }
  }
  return "";
}

/// Opens the request's tokenizer (if any), encodes --prompt with it and
/// checks it against the plan's vocabulary; returns 0 or the exit code.
int openTokenizer(GenerateRequest &request, int64_t vocabSize,
                  TokenizerPtr &tokenizer) {
  if (request.tokenizerPath.empty()) {
    return 0;
  }
  tailor_tokenizer *raw = nullptr;
  if (tailor_tokenizer_load(request.tokenizerPath.c_str(), &raw) != TAILOR_OK) {
    return generateError(tailor_last_error());
  }
  tokenizer.reset(raw);
  int64_t size = tailor_tokenizer_size(raw);
  if (size > vocabSize) {
    return generateError(request.tokenizerPath + " has " + llvm::Twine(size) +
                         " tokens but the plan's vocabulary " +
                         llvm::Twine(vocabSize) +
                         ": not this model's tokenizer");
  }
  if (!request.promptText) {
    return 0;
  }
  const int64_t *ids = nullptr;
  size_t count = 0;
  if (tailor_tokenizer_encode(raw, request.promptText->data(),
                              request.promptText->size(), &ids,
                              &count) != TAILOR_OK) {
    return generateError("--prompt: " + llvm::Twine(tailor_last_error()));
  }
  if (count == 0) {
    return generateError("--prompt encodes to no tokens");
  }
  request.prompt.assign(ids, ids + count);
  return 0;
}

/// Streams the text of the generated ids: each token re-decodes them all
/// and prints what follows what was printed, holding back a UTF-8
/// character a byte-level token left unfinished (transformers'
/// TextStreamer does the same).
class TextPrinter {
public:
  explicit TextPrinter(tailor_tokenizer *tokenizer) : tokenizer(tokenizer) {}

  /// Adds `id`; prints the newly final text unless `quiet`. Returns "" or
  /// why decoding failed.
  std::string push(int64_t id, bool quiet) {
    ids.push_back(id);
    const char *data = nullptr;
    size_t length = 0;
    if (tailor_tokenizer_decode(tokenizer, ids.data(), ids.size(), 1, &data,
                                &length) != TAILOR_OK) {
      return tailor_last_error();
    }
    text.assign(data, length);
    size_t ready = completeUtf8(text);
    // Invalid UTF-8 (a model may emit any bytes) prints as U+FFFD, as
    // transformers' decode shows it.
    if (!quiet && ready > printed) {
      llvm::outs() << llvm::json::fixUTF8(
          llvm::StringRef(text).slice(printed, ready));
      llvm::outs().flush();
    }
    printed = std::max(printed, ready);
    return "";
  }

  /// Prints what was held back.
  void finish(bool quiet) {
    if (!quiet) {
      llvm::outs() << llvm::json::fixUTF8(
          llvm::StringRef(text).drop_front(printed));
    }
    printed = text.size();
  }

  /// All the text, invalid UTF-8 as U+FFFD.
  std::string decoded() const { return llvm::json::fixUTF8(text); }

private:
  /// Bytes of `s` up to its last whole UTF-8 character.
  static size_t completeUtf8(llvm::StringRef s) {
    for (size_t back = 1; back <= 4 && back <= s.size(); ++back) {
      unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
      if ((c & 0xC0) == 0x80) {
        continue;
      }
      size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      return length > back ? s.size() - back : s.size();
    }
    return s.size();
  }

  tailor_tokenizer *tokenizer;
  std::vector<int64_t> ids;
  std::string text;
  size_t printed = 0;
};

/// Parses argv into `request`; returns 0, or the exit code after printing
/// why not.
int parseRequest(int argc, const char **argv, GenerateRequest &request) {
  namespace cl = llvm::cl;
  cl::ResetCommandLineParser();
  cl::OptionCategory category("tailor generate options");
  cl::opt<std::string> planPath(cl::Positional, cl::desc("<generate.tplan>"),
                                cl::Required, cl::cat(category));
  cl::opt<std::string> promptIds(
      "prompt-ids",
      cl::desc("the prompt as comma-separated token ids (each below the "
               "vocabulary size)"),
      cl::value_desc("ids"), cl::cat(category));
  cl::opt<std::string> promptText(
      "prompt",
      cl::desc("the prompt as text, encoded with the model's tokenizer "
               "(--tokenizer, or tokenizer.json / tokenizer.model beside the "
               "plan); the output is text then"),
      cl::value_desc("text"), cl::cat(category));
  cl::opt<std::string> tokenizer(
      "tokenizer",
      cl::desc("a Hugging Face tokenizer.json (byte-level BPE), a "
               "SentencePiece tokenizer.model, or a directory holding one; "
               "with --prompt-ids, prints text too"),
      cl::value_desc("path"), cl::cat(category));
  cl::opt<int64_t> maxNewTokens(
      "max-new-tokens",
      cl::desc("tokens to generate at most (default 20); fewer when the "
               "model's eos id comes or the KV cache fills"),
      cl::value_desc("n"), cl::init(20), cl::cat(category));
  cl::opt<double> temperature(
      "temperature",
      cl::desc("sample: divide the logits by T before drawing (0 or absent: "
               "greedy)"),
      cl::value_desc("T"), cl::init(0.0), cl::cat(category));
  cl::opt<int64_t> topK(
      "top-k",
      cl::desc("when sampling, keep the K largest logits (0: all; "
               "transformers' generate defaults to 50)"),
      cl::value_desc("K"), cl::init(0), cl::cat(category));
  cl::opt<double> topP(
      "top-p",
      cl::desc("when sampling, keep the fewest most likely tokens whose "
               "probability sum exceeds P, in (0, 1] (1: all)"),
      cl::value_desc("P"), cl::init(1.0), cl::cat(category));
  cl::opt<uint64_t> seed(
      "seed", cl::desc("when sampling, seed the draws (default: random)"),
      cl::value_desc("S"), cl::cat(category));
  cl::opt<bool> json(
      "json",
      cl::desc(
          "print one JSON object at the end: prompt_ids, generated_ids, "
          "time_to_first_token_s, tokens_per_second (and seed; text with a "
          "tokenizer)"),
      cl::cat(category));
  cl::opt<std::string> adapter(
      "adapter",
      cl::desc("merge a PEFT LoRA adapter (a directory) into the weights at "
               "load, W += scale * B A as PEFT's merge_and_unload (or bind "
               "it at compile time: `--task generate --adapter DIR`)"),
      cl::value_desc("dir"), cl::cat(category));
  cl::opt<int> threads("threads",
                       cl::desc("CPU worker threads (default: all cores)"),
                       cl::value_desc("n"), cl::init(0), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "tailor generate: decoding with a generation plan (tailor compile "
          "MODEL.onnx --task generate --max-seq-len N)\n\n"
          "Runs the plan's decode step once per prompt token, then once per "
          "generated token, streaming the generated ids to stdout. Greedy "
          "unless --temperature is above 0; then tokens are drawn as "
          "transformers' generate(do_sample=True) draws them (temperature, "
          "top-k, top-p, in that order). Stops at the model's eos id (from "
          "the config.json next to the model when it was compiled), after "
          "--max-new-tokens, or when the KV cache is full.\n",
          &llvm::errs())) {
    return 1;
  }
  if (maxNewTokens < 1 || threads < 0) {
    return generateError("--max-new-tokens must be at least 1 and --threads "
                         "not negative");
  }
  tailor_sampling_options &sampling = request.sampling;
  tailor_sampling_options_init(&sampling);
  sampling.temperature = temperature;
  sampling.top_k = topK;
  sampling.top_p = topP;
  if (!(temperature >= 0) || !(topP > 0 && topP <= 1) || topK < 0) {
    return generateError("--temperature must be >= 0, --top-p in (0, 1] and "
                         "--top-k >= 0 (got " +
                         llvm::formatv("{0}, {1}, {2}", double(temperature),
                                       double(topP), int64_t(topK)) +
                         ")");
  }
  bool sampled = temperature > 0;
  for (const cl::Option *option :
       std::initializer_list<const cl::Option *>{&topK, &topP, &seed}) {
    if (!sampled && option->getNumOccurrences()) {
      return generateError("--" + option->ArgStr +
                           " applies to sampling only: give --temperature "
                           "above 0 (decoding is greedy without it)");
    }
  }
  sampling.seed =
      seed.getNumOccurrences()
          ? uint64_t(seed)
          : (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  if (promptIds.getNumOccurrences() == promptText.getNumOccurrences()) {
    return generateError("give the prompt once: --prompt-ids or --prompt");
  }
  std::string why;
  if (promptIds.getNumOccurrences() &&
      !parseIds(promptIds, request.prompt, why)) {
    return generateError("--prompt-ids: " + why);
  }
  request.tokenizerPath = tokenizer;
  if (promptText.getNumOccurrences()) {
    request.promptText = promptText;
    if (tokenizer.empty()) {
      request.tokenizerPath = findTokenizerBeside(planPath);
      if (request.tokenizerPath.empty()) {
        return generateError("--prompt needs the model's tokenizer: give "
                             "--tokenizer PATH, or put tokenizer.json or "
                             "tokenizer.model beside " +
                             planPath);
      }
    }
  }
  request.planPath = planPath;
  request.maxNewTokens = maxNewTokens;
  request.json = json;
  request.adapter = adapter;
  request.threads = threads;
  return 0;
}

/// Loads the plan and the tokenizer, checks the prompt against them and
/// makes the generator (with the adapter merged); returns 0 or the exit
/// code.
int openGenerator(GenerateRequest &request, GeneratorPtr &generator,
                  tailor_generation_info &info, TokenizerPtr &tokenizer) {
  tailor_plan *rawPlan = nullptr;
  if (tailor_plan_load(request.planPath.c_str(), &rawPlan) != TAILOR_OK) {
    return generateError(tailor_last_error());
  }
  // The generator shares the plan: it may be freed first.
  std::unique_ptr<tailor_plan, PlanDeleter> plan(rawPlan);
  if (tailor_plan_generation_info(plan.get(), &info) != TAILOR_OK) {
    return generateError(request.planPath + ": " + tailor_last_error());
  }
  if (int code = openTokenizer(request, info.vocab_size, tokenizer)) {
    return code;
  }
  for (int64_t id : request.prompt) {
    if (id < 0 || id >= info.vocab_size) {
      return generateError("--prompt-ids: token id " + llvm::Twine(id) +
                           " is outside the vocabulary [0, " +
                           llvm::Twine(info.vocab_size) + ")");
    }
  }
  if (static_cast<int64_t>(request.prompt.size()) > info.max_seq_len) {
    return generateError("the prompt has " +
                         llvm::Twine(request.prompt.size()) +
                         " tokens but the plan's KV cache holds " +
                         llvm::Twine(info.max_seq_len) +
                         " (compile with a larger --max-seq-len)");
  }
  tailor_session_options options{request.threads};
  tailor_generator *raw = nullptr;
  if (tailor_generator_create(plan.get(), &options, &request.sampling, &raw) !=
      TAILOR_OK) {
    return generateError(tailor_last_error());
  }
  generator.reset(raw);
  if (!request.adapter.empty() &&
      tailor_generator_apply_adapter(generator.get(),
                                     request.adapter.c_str()) != TAILOR_OK) {
    return generateError(tailor_last_error());
  }
  return 0;
}

/// Prefills the prompt, then chooses, streams and feeds back tokens until
/// a stop; returns 0 or the exit code.
int decodeLoop(const GenerateRequest &request, tailor_generator *generator,
               const tailor_generation_info &info, TextPrinter *printer,
               GenerateResult &result) {
  // Time to first token counts from the prompt's first step (loading the
  // weights is not generation).
  auto begin = std::chrono::steady_clock::now();
  int64_t next = 0;
  if (tailor_generator_prefill(generator, request.prompt.data(),
                               request.prompt.size()) != TAILOR_OK ||
      tailor_generator_sample(generator, &next) != TAILOR_OK) {
    return generateError(tailor_last_error());
  }
  auto first = std::chrono::steady_clock::now();
  std::vector<int64_t> &generated = result.generated;
  int64_t position = static_cast<int64_t>(request.prompt.size());
  while (true) {
    generated.push_back(next);
    if (printer) {
      std::string error = printer->push(next, request.json);
      if (!error.empty()) {
        return generateError("decoding generated token " + llvm::Twine(next) +
                             ": " + error);
      }
    } else if (!request.json) {
      llvm::outs() << (generated.size() > 1 ? " " : "") << next;
      llvm::outs().flush();
    }
    if (tailor_generator_is_eos(generator, next) ||
        static_cast<int64_t>(generated.size()) >= request.maxNewTokens) {
      break;
    }
    if (position >= info.max_seq_len) {
      llvm::errs() << "tailor generate: note: stopped after "
                   << generated.size() << " tokens: the KV cache holds "
                   << info.max_seq_len << "\n";
      break;
    }
    if (tailor_generator_decode(generator, next) != TAILOR_OK ||
        tailor_generator_sample(generator, &next) != TAILOR_OK) {
      return generateError(tailor_last_error());
    }
    ++position;
  }
  auto end = std::chrono::steady_clock::now();
  if (printer) {
    printer->finish(request.json);
    result.text = printer->decoded();
  }
  result.timeToFirstToken =
      std::chrono::duration<double>(first - begin).count();
  // Decoding speed: the tokens after the first over the time they took.
  double decodeSeconds = std::chrono::duration<double>(end - first).count();
  result.tokensPerSecond = generated.size() > 1 && decodeSeconds > 0
                               ? double(generated.size() - 1) / decodeSeconds
                               : 0.0;
  return 0;
}

void printJson(const GenerateRequest &request, const GenerateResult &result) {
  llvm::json::Array promptJson, generatedJson;
  for (int64_t id : request.prompt) {
    promptJson.push_back(id);
  }
  for (int64_t id : result.generated) {
    generatedJson.push_back(id);
  }
  llvm::json::Object object{{"prompt_ids", std::move(promptJson)},
                            {"generated_ids", std::move(generatedJson)},
                            {"time_to_first_token_s", result.timeToFirstToken},
                            {"tokens_per_second", result.tokensPerSecond}};
  if (!request.tokenizerPath.empty()) {
    object["text"] = result.text;
  }
  if (request.sampling.temperature > 0) {
    // As a string: JSON numbers lose 64-bit integers in most readers.
    object["seed"] = std::to_string(request.sampling.seed);
  }
  llvm::outs() << llvm::formatv("{0}", llvm::json::Value(std::move(object)))
               << "\n";
}

} // namespace

int runGenerate(int argc, const char **argv) {
  GenerateRequest request;
  if (int code = parseRequest(argc, argv, request)) {
    return code;
  }
  GeneratorPtr generator;
  tailor_generation_info info;
  TokenizerPtr tokenizer;
  if (int code = openGenerator(request, generator, info, tokenizer)) {
    return code;
  }
  std::optional<TextPrinter> printer;
  if (tokenizer) {
    printer.emplace(tokenizer.get());
  }
  GenerateResult result;
  if (int code = decodeLoop(request, generator.get(), info,
                            printer ? &*printer : nullptr, result)) {
    return code;
  }
  if (request.json) {
    printJson(request, result);
  } else {
    llvm::outs() << "\n";
  }
  return 0;
}

} // namespace tailor
