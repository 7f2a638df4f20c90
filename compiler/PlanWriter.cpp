//===- PlanWriter.cpp - sched.program -> .tplan (flatbuffers) -------------===//
//
// The sched dialect maps one-to-one onto the plan format: each view op
// (buffer, param, constant, input) becomes a Buffer, launches become Launch
// steps with their kernel attributes, and the arena sizes summed by category
// become the memory report.
//
//===----------------------------------------------------------------------===//

#include "compiler/PlanWriter.h"

#include "codegen/CudaDeviceCode.h"
#include "codegen/FusedKernelCompiler.h"
#include "codegen/FusedKernelSource.h"
#include "compiler/Hardware.h"

#include "dialects/sched/SchedOps.h"
#include "dialects/tg/TGOps.h"
#include "dialects/tg/TGQuant.h"
#include "passes/graph/ExportNames.h"
#include "runtime/MemoryCategory.h"
#include "runtime/Plan.h"
#include "runtime/cpu/FusedProgram.h"
#include "runtime/cpu/Kernel.h"
#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/DeviceImage.h"
#include "runtime/quant/GptqCheckpoint.h"
#include "runtime/schema/plan_generated.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Compression.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <set>

using namespace mlir;
namespace fb = tailor::plan;

namespace tailor {

static FailureOr<fb::DType> dtypeOf(Operation *op, Type element) {
  if (element.isF32()) {
    return fb::DType::F32;
  }
  if (element.isF64()) {
    return fb::DType::F64;
  }
  if (element.isF16()) {
    return fb::DType::F16;
  }
  if (element.isBF16()) {
    return fb::DType::BF16;
  }
  if (element.isInteger(1)) {
    return fb::DType::Bool;
  }
  if (element.isInteger(64)) {
    return fb::DType::I64;
  }
  if (element.isInteger(32)) {
    return fb::DType::I32;
  }
  if (element.isInteger(16)) {
    return fb::DType::I16;
  }
  if (element.isUnsignedInteger(8)) {
    return fb::DType::U8;
  }
  if (element.isInteger(8)) {
    return fb::DType::I8;
  }
  return op->emitError() << "the plan format has no element type " << element;
}

static fb::ArenaKind arenaKindOf(sched::ArenaKind kind) {
  switch (kind) {
  case sched::ArenaKind::Device:
    return fb::ArenaKind::Device;
  case sched::ArenaKind::HostPinned:
    return fb::ArenaKind::HostPinned;
  case sched::ArenaKind::Host:
    return fb::ArenaKind::Host;
  }
  return fb::ArenaKind::Host;
}

static fb::Category categoryOf(sched::ArenaCategory category) {
  return static_cast<fb::Category>(static_cast<int>(category));
}

/// The plan's initializer for a parameter's `init` kind; an error naming the
/// parameter for a kind the runtime cannot create.
static FailureOr<fb::InitKind> initKindOf(sched::ParamOp param,
                                          StringRef kind) {
  if (kind == "zeros") {
    return fb::InitKind::Zeros;
  }
  if (kind == "kaiming_uniform") {
    return fb::InitKind::KaimingUniform;
  }
  if (kind == "normal") {
    return fb::InitKind::Normal;
  }
  return param.emitError() << "parameter '" << param.getName()
                           << "' has an unknown init '" << kind
                           << "' (expected zeros, kaiming_uniform or normal)";
}

/// Whether the program runs on CUDA, from its `sched.backend`; an error when
/// the attribute is missing or names another backend.
static FailureOr<bool> targetsCuda(sched::ProgramOp program) {
  auto backend = program->getAttrOfType<StringAttr>("sched.backend");
  if (!backend) {
    return program.emitError()
           << "the program has no sched.backend (expected \"cpu\" or "
              "\"cuda\")";
  }
  if (backend.getValue() != "cpu" && backend.getValue() != "cuda") {
    return program.emitError()
           << "unknown sched.backend '" << backend.getValue()
           << "' (expected cpu or cuda)";
  }
  return backend.getValue() == "cuda";
}

/// Every kernel a CPU program declares must be one the CPU backend has:
/// the plan would otherwise be refused only when it is loaded.
static LogicalResult checkCpuKernels(sched::ProgramOp program) {
  for (auto kernel : program.getBody().front().getOps<sched::KernelOp>()) {
    if (!runtime::findCpuKernel(kernel.getSymName().str())) {
      return kernel.emitError()
             << "the CPU backend has no kernel '" << kernel.getSymName() << "'";
    }
  }
  return success();
}

/// The index `indices` gives the symbol `name`; an error on `user` when the
/// program declares no such `what` (a plain lookup would answer 0, some
/// other arena, kernel, stream or event).
static FailureOr<uint32_t> symbolIndex(const llvm::StringMap<uint32_t> &indices,
                                       StringRef name, Operation *user,
                                       StringRef what) {
  auto it = indices.find(name);
  if (it == indices.end()) {
    return user->emitError()
           << "@" << name << " is not a " << what << " declared before it";
  }
  return it->second;
}

/// The raw little-endian bytes of a constant, booleans one byte each.
static std::vector<uint8_t> constantBytes(ElementsAttr value) {
  auto dense = llvm::cast<DenseElementsAttr>(value);
  Type element = dense.getElementType();
  std::vector<uint8_t> bytes;
  if (element.isInteger(1)) {
    for (bool b : dense.getValues<bool>()) {
      bytes.push_back(b ? 1 : 0);
    }
    return bytes;
  }
  size_t elementBytes = element.getIntOrFloatBitWidth() / 8;
  size_t count = static_cast<size_t>(dense.getNumElements());
  ArrayRef<char> raw = dense.getRawData();
  bytes.resize(count * elementBytes);
  if (dense.isSplat()) {
    for (size_t i = 0; i < count; ++i) {
      std::memcpy(bytes.data() + i * elementBytes, raw.data(), elementBytes);
    }
  } else {
    std::memcpy(bytes.data(), raw.data(), bytes.size());
  }
  return bytes;
}

/// `file` relative to `directory` when it lies below it, absolute otherwise.
static std::string planRelativePath(StringRef file, StringRef directory) {
  SmallString<256> absolute(file);
  llvm::sys::fs::make_absolute(absolute);
  llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
  SmallString<256> base(directory.empty() ? "." : directory);
  llvm::sys::fs::make_absolute(base);
  llvm::sys::path::remove_dots(base, /*remove_dot_dot=*/true);
  StringRef rest = absolute;
  if (rest.consume_front(base) &&
      (rest.empty() || llvm::sys::path::is_separator(rest.front()))) {
    rest = rest.ltrim("/");
    return rest.str();
  }
  return std::string(absolute);
}

/// A mixed cluster's ranks (tg.cluster) with tailor-balance-ranks' counts
/// (tg.balance); none for a homogeneous one.
static flatbuffers::Offset<
    flatbuffers::Vector<flatbuffers::Offset<fb::RankDevice>>>
writeRankDevices(flatbuffers::FlatBufferBuilder &fbb, ModuleOp module) {
  auto cluster = module->getAttrOfType<DictionaryAttr>("tg.cluster");
  auto balance = module->getAttrOfType<DictionaryAttr>("tg.balance");
  if (!cluster || !balance) {
    return 0;
  }
  auto ranks = cluster.getAs<ArrayAttr>("ranks");
  ArrayRef<int64_t> counts =
      balance.getAs<DenseI64ArrayAttr>("micro_batches").asArrayRef();
  std::vector<flatbuffers::Offset<fb::RankDevice>> devices;
  for (auto [rank, attr] : llvm::enumerate(ranks)) {
    auto dict = cast<DictionaryAttr>(attr);
    std::vector<flatbuffers::Offset<fb::Figure>> figures;
    for (NamedAttribute entry : dict) {
      if (auto value = dyn_cast<FloatAttr>(entry.getValue())) {
        figures.push_back(fb::CreateFigure(
            fbb, fbb.CreateString(entry.getName().getValue().str()),
            value.getValueAsDouble()));
      }
    }
    auto device = dict.getAs<StringAttr>("device");
    auto node = dict.getAs<IntegerAttr>("node");
    devices.push_back(fb::CreateRankDevice(
        fbb, fbb.CreateString(device ? device.getValue().str() : ""),
        node ? static_cast<int32_t>(node.getInt()) : 0,
        fbb.CreateVector(figures),
        rank < counts.size() ? static_cast<int32_t>(counts[rank]) : 0));
  }
  return fbb.CreateVector(devices);
}

/// tailor-shard's decision (tg.parallel), when it ran.
static flatbuffers::Offset<fb::Parallel>
writeParallel(flatbuffers::FlatBufferBuilder &fbb, ModuleOp module) {
  auto parallel = module->getAttrOfType<DictionaryAttr>("tg.parallel");
  if (!parallel) {
    return 0;
  }
  auto strategy = parallel.getAs<StringAttr>("strategy");
  auto perNode = parallel.getAs<IntegerAttr>("ranks_per_node");
  return fb::CreateParallel(
      fbb, fbb.CreateString(strategy ? strategy.getValue().str() : "ddp"),
      perNode ? static_cast<int32_t>(perNode.getInt()) : 1,
      writeRankDevices(fbb, module));
}

/// What decoding needs of a generation plan (tailor-build-decode's
/// tg.generation), when the module has one.
static flatbuffers::Offset<fb::Generation>
writeGeneration(flatbuffers::FlatBufferBuilder &fbb, ModuleOp module) {
  auto generation = module->getAttrOfType<DictionaryAttr>(
      tg::TGDialect::kGenerationAttrName);
  if (!generation) {
    return 0;
  }
  auto i = [&](StringRef key) {
    return generation.getAs<IntegerAttr>(key).getInt();
  };
  ArrayRef<int64_t> eos =
      generation.getAs<DenseI64ArrayAttr>("eos_token_ids").asArrayRef();
  return fb::CreateGeneration(
      fbb, static_cast<int32_t>(i("max_seq_len")),
      static_cast<int32_t>(i("batch")), i("vocab_size"),
      fbb.CreateVector(std::vector<int64_t>(eos.begin(), eos.end())));
}

/// A layer split's stage (tailor-split-layers' tg.pipeline_stage), when the
/// module is one.
static flatbuffers::Offset<fb::PipelineStage>
writePipelineStage(flatbuffers::FlatBufferBuilder &fbb, ModuleOp module) {
  auto stage = module->getAttrOfType<DictionaryAttr>(
      tg::TGDialect::kPipelineStageAttrName);
  if (!stage) {
    return 0;
  }
  auto i = [&](StringRef key) {
    auto value = stage.getAs<IntegerAttr>(key);
    return static_cast<int32_t>(value ? value.getInt() : 0);
  };
  auto schedule = stage.getAs<StringAttr>("schedule");
  auto replicas = stage.getAs<IntegerAttr>("replicas");
  return fb::CreatePipelineStage(
      fbb, i("stage"), i("stages"), i("first_layer"), i("last_layer"),
      i("slots"), i("micro_batches"),
      fbb.CreateString(schedule ? schedule.str() : "1f1b"),
      replicas ? static_cast<int32_t>(replicas.getInt()) : 1);
}

/// The plan's training table, from the module's `tg.training` (the recipe,
/// as the compile command read it) and `tg.adapter` (what insert-lora
/// did); null for an inference plan.
static flatbuffers::Offset<fb::Training>
writeTraining(flatbuffers::FlatBufferBuilder &fbb, ModuleOp module) {
  auto training = module->getAttrOfType<DictionaryAttr>("tg.training");
  if (!training) {
    return 0;
  }
  auto i = [&](StringRef key, int64_t fallback) -> int64_t {
    auto attr = training.getAs<IntegerAttr>(key);
    return attr ? attr.getInt() : fallback;
  };
  auto f = [&](StringRef key) -> double {
    auto attr = training.getAs<FloatAttr>(key);
    return attr ? attr.getValueAsDouble() : 0.0;
  };
  auto s = [&](DictionaryAttr dict, StringRef key) {
    auto attr = dict ? dict.getAs<StringAttr>(key) : StringAttr();
    return fbb.CreateString(attr ? attr.str() : std::string());
  };
  auto strings = [&](DictionaryAttr dict, StringRef key) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> values;
    if (auto array = dict ? dict.getAs<ArrayAttr>(key) : ArrayAttr()) {
      for (auto value : array.getAsValueRange<StringAttr>()) {
        values.push_back(fbb.CreateString(value.str()));
      }
    }
    return fbb.CreateVector(values);
  };
  flatbuffers::Offset<fb::Adapter> adapter;
  if (auto dict = module->getAttrOfType<DictionaryAttr>("tg.adapter")) {
    std::vector<int32_t> layers;
    if (auto array = dict.getAs<ArrayAttr>("layers")) {
      for (auto layer : array.getAsRange<IntegerAttr>()) {
        layers.push_back(static_cast<int32_t>(layer.getInt()));
      }
    }
    auto variant = s(dict, "variant");
    auto targets = strings(dict, "target_modules");
    auto layerVec = fbb.CreateVector(layers);
    auto modules = strings(dict, "modules");
    auto number = [&](StringRef key) {
      auto attr = dict.getAs<FloatAttr>(key);
      return attr ? attr.getValueAsDouble() : 0.0;
    };
    auto rank = dict.getAs<IntegerAttr>("r");
    auto rslora = dict.getAs<BoolAttr>("use_rslora");
    adapter = fb::CreateAdapter(fbb, variant,
                                rank ? static_cast<int32_t>(rank.getInt()) : 0,
                                number("alpha"), number("dropout"),
                                rslora && rslora.getValue(), targets, layerVec,
                                modules);
  }
  auto optimizer = s(training, "optimizer");
  auto scheduler = s(training, "lr_scheduler");
  auto baseModel = s(training, "base_model");
  auto recipe = s(training, "recipe");
  auto compileArguments = strings(training, "compile_arguments");
  auto compileDirectory = s(training, "compile_directory");
  auto shuffle = training.getAs<BoolAttr>("shuffle");
  auto samplePacking = training.getAs<BoolAttr>("sample_packing");
  flatbuffers::Offset<fb::LossScaling> lossScaling;
  if (auto scaler = training.getAs<DictionaryAttr>("loss_scaling")) {
    auto number = [&](StringRef key) {
      auto attr = scaler.getAs<FloatAttr>(key);
      return attr ? attr.getValueAsDouble() : 0.0;
    };
    auto interval = scaler.getAs<IntegerAttr>("growth_interval");
    lossScaling = fb::CreateLossScaling(
        fbb, number("init_scale"), number("growth_factor"),
        number("backoff_factor"), interval ? interval.getInt() : 0);
  }
  fb::TrainingBuilder builder(fbb);
  builder.add_micro_batch_size(static_cast<int32_t>(i("micro_batch_size", 1)));
  builder.add_sequence_len(static_cast<int32_t>(i("sequence_len", 0)));
  builder.add_vocab_size(i("vocab_size", 0));
  builder.add_shuffle(!shuffle || shuffle.getValue());
  builder.add_gradient_accumulation_steps(
      static_cast<int32_t>(i("gradient_accumulation_steps", 1)));
  builder.add_max_steps(i("max_steps", 0));
  builder.add_seed(static_cast<uint64_t>(i("seed", 0)));
  builder.add_optimizer(optimizer);
  builder.add_learning_rate(f("learning_rate"));
  builder.add_lr_scheduler(scheduler);
  builder.add_warmup_steps(i("warmup_steps", 0));
  builder.add_weight_decay(f("weight_decay"));
  builder.add_max_grad_norm(f("max_grad_norm"));
  builder.add_save_steps(i("save_steps", 0));
  builder.add_logging_steps(i("logging_steps", 1));
  // Absent stays absent: the trainer lets the data decide.
  if (samplePacking) {
    builder.add_sample_packing(samplePacking.getValue());
  }
  builder.add_pad_token_id(i("pad_token_id", 0));
  builder.add_val_set_size(f("val_set_size"));
  builder.add_eval_steps(i("eval_steps", 0));
  builder.add_base_model(baseModel);
  if (!adapter.IsNull()) {
    builder.add_adapter(adapter);
  }
  builder.add_recipe(recipe);
  builder.add_compile_arguments(compileArguments);
  builder.add_compile_directory(compileDirectory);
  if (!lossScaling.IsNull()) {
    builder.add_loss_scaling(lossScaling);
  }
  return builder.Finish();
}

/// The device functions the launchers of `kernelNames` ask for in a plan
/// whose tensor cores compute in `half` (the prebuilt families';
/// fused_elementwise's are generated per plan).
static FailureOr<std::vector<std::string>>
launcherFunctions(sched::ProgramOp program,
                  const std::vector<std::string> &kernelNames,
                  runtime::cuda::HalfCompute half) {
  std::vector<std::string> needed;
  for (const std::string &name : kernelNames) {
    const runtime::cuda::CudaKernelDef *def =
        runtime::cuda::findCudaKernel(name);
    if (!def) {
      return program.emitError()
             << "the CUDA backend has no kernel '" << name
             << "' (the CPU backend has it; this plan cannot run on a GPU)";
    }
    for (const char *const *f = runtime::cuda::deviceFunctions(*def, half);
         f && *f; ++f) {
      needed.push_back(*f);
    }
  }
  return needed;
}

/// The kernel of one fused_elementwise launch: its program, outputs and how
/// it reads each input (Full when the input has the outputs' element
/// count, Repeating otherwise), checked as the runtime will.
static FailureOr<codegen::FusedKernelRequest>
fusedRequestOf(sched::LaunchOp launch) {
  DictionaryAttr attrs = launch.getKernelAttrsAttr();
  auto text = attrs ? attrs.getAs<StringAttr>("program") : StringAttr();
  auto outputs = attrs ? attrs.getAs<DenseI64ArrayAttr>("outputs")
                       : DenseI64ArrayAttr();
  if (!text || !outputs) {
    return launch.emitError() << "a fused_elementwise launch needs a string "
                                 "'program' and an i64 array 'outputs'";
  }
  auto args = launch.getArgs();
  if (outputs.size() == 0 ||
      static_cast<size_t>(outputs.size()) >= args.size()) {
    return launch.emitError()
           << "a fused_elementwise launch with " << outputs.size()
           << " outputs needs more than that many operands (it has "
           << args.size() << ")";
  }
  for (Value arg : args) {
    if (!llvm::cast<MemRefType>(arg.getType()).hasStaticShape()) {
      return launch.emitError()
             << "a fused_elementwise launch needs static shapes, got "
             << arg.getType();
    }
  }
  size_t inputs = args.size() - outputs.size();
  auto numel = [&](size_t i) {
    return llvm::cast<MemRefType>(args[i].getType()).getNumElements();
  };
  std::vector<int64_t> inputNumels;
  for (size_t i = 0; i < inputs; ++i) {
    inputNumels.push_back(numel(i));
  }
  codegen::FusedKernelRequest request;
  request.text = text.str();
  request.outputs.assign(outputs.asArrayRef().begin(),
                         outputs.asArrayRef().end());
  request.kinds = codegen::fusedInputKinds(inputNumels, numel(inputs));
  runtime::fused::Program parsed;
  std::string problem = runtime::fused::parseProgram(
      request.text, static_cast<uint32_t>(inputs), request.outputs, parsed);
  if (!problem.empty()) {
    return launch.emitError() << "fused_elementwise: " << problem;
  }
  return request;
}

/// Generates and compiles, with NVRTC, one kernel per distinct (program,
/// input kinds) of the program's fused_elementwise launches into `code`;
/// adds their names to `needed`. Nothing to do without such launches.
static LogicalResult generateFusedKernels(sched::ProgramOp program,
                                          const std::string &arch,
                                          codegen::FusedDeviceCode &code,
                                          std::vector<std::string> &needed) {
  std::vector<codegen::FusedKernelRequest> requests;
  for (auto launch : program.getBody().front().getOps<sched::LaunchOp>()) {
    if (launch.getKernel() != "fused_elementwise") {
      continue;
    }
    FailureOr<codegen::FusedKernelRequest> request = fusedRequestOf(launch);
    if (failed(request)) {
      return failure();
    }
    std::string name = runtime::fused::fusedFunctionName(
        request->text, request->outputs, request->kinds);
    needed.push_back(name);
    requests.push_back(std::move(*request));
  }
  if (requests.empty()) {
    return success();
  }
  std::string source;
  std::string problem = codegen::fusedTranslationUnit(requests, source);
  if (problem.empty()) {
    problem = codegen::compileFusedKernels(source, arch, code);
  }
  if (!problem.empty()) {
    return program.emitError()
           << "cannot generate the plan's fused kernels: " << problem;
  }
  return success();
}

/// `code` as the module "fused" next to the prebuilt families' images.
static void addFusedImages(const codegen::FusedDeviceCode &code,
                           std::vector<codegen::CudaDeviceImage> &images) {
  if (code.cubin.empty()) {
    return;
  }
  images.push_back({"fused", code.cubinArch, code.cubin});
  images.push_back(
      {"fused", code.ptxArch,
       llvm::ArrayRef<uint8_t>(
           reinterpret_cast<const uint8_t *>(code.ptx.data()),
           code.ptx.size())});
}

namespace {
/// An image read back (ELF or PTX header, entry points) before it goes
/// into the plan.
struct ReadImage {
  const codegen::CudaDeviceImage *image;
  runtime::cuda::DeviceImageInfo info;
};
} // namespace

/// Reads every image back and keeps those that define a `needed` function;
/// a cubin must be built for `arch`'s SM.
static FailureOr<std::vector<ReadImage>>
readUsedImages(sched::ProgramOp program, const std::string &arch,
               const std::vector<codegen::CudaDeviceImage> &images,
               const std::vector<std::string> &needed) {
  std::vector<ReadImage> reads;
  for (const codegen::CudaDeviceImage &image : images) {
    ReadImage read{&image, {}};
    std::string problem =
        image.isPtx()
            ? runtime::cuda::readPtx(image.bytes.data(), image.bytes.size(),
                                     read.info)
            : runtime::cuda::readCubin(image.bytes.data(), image.bytes.size(),
                                       read.info);
    // "sm_90a" -> 90: the cubin's ELF header must say the same.
    int archSm = std::atoi(arch.c_str() + 3);
    if (problem.empty() && !image.isPtx() && read.info.sm != archSm) {
      problem = "it is built for sm_" + std::to_string(read.info.sm);
    }
    if (!problem.empty()) {
      return program.emitError() << "the embedded " << image.module << " "
                                 << image.arch
                                 << " device code is unusable: " << problem;
    }
    bool used = llvm::any_of(needed, [&](const std::string &function) {
      return std::binary_search(read.info.functions.begin(),
                                read.info.functions.end(), function);
    });
    if (used) {
      reads.push_back(std::move(read));
    }
  }
  // Every entry point must be in a cubin for the target and in the PTX.
  for (const std::string &function : needed) {
    for (bool ptx : {false, true}) {
      bool found = llvm::any_of(reads, [&](const ReadImage &read) {
        return read.image->isPtx() == ptx &&
               std::binary_search(read.info.functions.begin(),
                                  read.info.functions.end(), function);
      });
      if (!found) {
        return program.emitError()
               << "no embedded " << (ptx ? "PTX" : arch)
               << " device code has the entry point '" << function << "'";
      }
    }
  }
  return reads;
}

/// One DeviceCode table entry per image, compressed when zlib is there.
static std::vector<flatbuffers::Offset<fb::DeviceCode>>
writeImages(flatbuffers::FlatBufferBuilder &fbb,
            const std::vector<ReadImage> &reads) {
  std::vector<flatbuffers::Offset<fb::DeviceCode>> written;
  for (const ReadImage &read : reads) {
    const codegen::CudaDeviceImage &image = *read.image;
    std::vector<flatbuffers::Offset<flatbuffers::String>> functions;
    for (const std::string &function : read.info.functions) {
      functions.push_back(fbb.CreateString(function));
    }
    // PTX goes to the driver as a C string: keep its terminating NUL.
    std::vector<uint8_t> bytes(image.bytes.begin(), image.bytes.end());
    if (image.isPtx()) {
      bytes.push_back(0);
    }
    uint64_t size = bytes.size();
    fb::Compression compression = fb::Compression::None;
    if (llvm::compression::zlib::isAvailable()) {
      SmallVector<uint8_t, 0> packed;
      llvm::compression::zlib::compress(bytes, packed);
      bytes.assign(packed.begin(), packed.end());
      compression = fb::Compression::Zlib;
    }
    written.push_back(fb::CreateDeviceCode(
        fbb, image.isPtx() ? fb::DeviceCodeKind::Ptx : fb::DeviceCodeKind::Cubin,
        fbb.CreateString(image.arch.str()), read.info.sm,
        fbb.CreateVector(bytes), fbb.CreateVector(functions),
        fbb.CreateString(image.module.str()), compression, size));
  }
  return written;
}

/// The cubin architectures a CUDA plan carries: its target's SM and, for a
/// cluster of mixed GPUs (`tg.cluster`), each rank's, so every device kind
/// runs the cubin built for it (sm_89 on an RTX 4090 beside an RTX 3090's
/// sm_80), newest first.
static std::vector<std::string> cubinArchsOf(ModuleOp module, int64_t sm) {
  std::set<int64_t> sms = {sm};
  auto cluster = module->getAttrOfType<DictionaryAttr>("tg.cluster");
  if (auto ranks = cluster ? cluster.getAs<ArrayAttr>("ranks") : nullptr) {
    for (Attribute rank : ranks) {
      auto dict = llvm::dyn_cast<DictionaryAttr>(rank);
      auto rankSm = dict ? dict.getAs<FloatAttr>("sm") : nullptr;
      if (rankSm && rankSm.getValueAsDouble() >= double(sm)) {
        sms.insert(static_cast<int64_t>(rankSm.getValueAsDouble()));
      }
    }
  }
  std::vector<std::string> archs;
  for (auto it = sms.rbegin(); it != sms.rend(); ++it) {
    std::string arch = cubinArchFor(*it);
    if (!llvm::is_contained(archs, arch)) {
      archs.push_back(arch);
    }
  }
  return archs;
}

/// The images one cubin architecture contributes: the prebuilt families'
/// cubins and PTX the launches use, plus the fused kernels generated for
/// it (`fused` keeps the generated code alive until written).
static LogicalResult
addImagesFor(sched::ProgramOp program, const std::string &arch,
             const std::vector<std::string> &launcherNeeds,
             std::vector<std::unique_ptr<codegen::FusedDeviceCode>> &fused,
             std::deque<codegen::CudaDeviceImage> &owned,
             std::vector<ReadImage> &reads) {
  std::vector<codegen::CudaDeviceImage> images;
  std::string error;
  if (!codegen::selectCudaDeviceImages(arch, images, error)) {
    return program.emitError()
           << "cannot write a plan for " << arch << ": " << error;
  }
  std::vector<std::string> needed = launcherNeeds;
  fused.push_back(std::make_unique<codegen::FusedDeviceCode>());
  if (failed(generateFusedKernels(program, arch, *fused.back(), needed))) {
    return failure();
  }
  addFusedImages(*fused.back(), images);
  FailureOr<std::vector<ReadImage>> used =
      readUsedImages(program, arch, images, needed);
  if (failed(used)) {
    return failure();
  }
  // A PTX two archs share (compute_80 for sm_80 and sm_89) goes in once.
  for (ReadImage &read : *used) {
    bool seen = llvm::any_of(owned, [&](const codegen::CudaDeviceImage &o) {
      return o.module == read.image->module && o.arch == read.image->arch;
    });
    if (!seen) {
      owned.push_back(*read.image);
      read.image = &owned.back();
      reads.push_back(read);
    }
  }
  return success();
}

/// The device code of a CUDA program: for each cubin architecture its ranks
/// need (cubinArchsOf), the cubin of every prebuilt family its launchers
/// use and the PTX that goes with it, plus the module "fused" generated for
/// its fused_elementwise launches, each checked (ELF machine and SM, every
/// entry point the launches ask for) before it goes into the plan.
static FailureOr<std::vector<flatbuffers::Offset<fb::DeviceCode>>>
writeDeviceCode(flatbuffers::FlatBufferBuilder &fbb, ModuleOp module,
                sched::ProgramOp program, int64_t sm,
                runtime::cuda::HalfCompute half,
                const std::vector<std::string> &kernelNames) {
  FailureOr<std::vector<std::string>> needed =
      launcherFunctions(program, kernelNames, half);
  if (failed(needed)) {
    return failure();
  }
  std::vector<std::unique_ptr<codegen::FusedDeviceCode>> fused;
  std::deque<codegen::CudaDeviceImage> owned; // stable addresses for reads
  std::vector<ReadImage> reads;
  for (const std::string &arch : cubinArchsOf(module, sm)) {
    if (failed(addImagesFor(program, arch, *needed, fused, owned, reads))) {
      return failure();
    }
  }
  return writeImages(fbb, reads);
}

namespace {

using AttributeVector = flatbuffers::Offset<
    flatbuffers::Vector<flatbuffers::Offset<fb::Attribute>>>;

/// Writes one sched.program into a flatbuffer, op by op, in program order
/// (the order objects are created in fixes the plan's bytes), then the
/// tables that sum it up.
/// tailor-recompute's summary as one line a person reads in `inspect`.
static std::string recomputeNote(DictionaryAttr summary) {
  auto integer = [&](StringRef key) -> int64_t {
    auto value = summary.getAs<IntegerAttr>(key);
    return value ? value.getInt() : 0;
  };
  auto flops = summary.getAs<FloatAttr>("flops");
  double mib = 1024.0 * 1024.0;
  return llvm::formatv(
      "policy {0}: {1} saved tensors rebuilt in backward by {2} ops, "
      "{3:F3} GFLOP a step; train_step activations {4:F2} MiB (without "
      "recomputation {5:F2} MiB)",
      summary.getAs<StringAttr>("policy").getValue(), integer("tensors"),
      integer("ops"), (flops ? flops.getValueAsDouble() : 0.0) / 1e9,
      double(integer("activation_bytes")) / mib,
      double(integer("activation_bytes_without")) / mib);
}

/// The module's notes for the plan: each attention raise-attention left as
/// kernels ({module, reason} in `tg.unraised_attention`); 0 when none.
static flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Note>>>
writeNotes(flatbuffers::FlatBufferBuilder &fbb, ModuleOp module) {
  auto list = module->getAttrOfType<ArrayAttr>(
      tg::TGDialect::kUnraisedAttentionAttrName);
  auto recompute = module->getAttrOfType<DictionaryAttr>(
      tg::TGDialect::kRecomputeSummaryAttrName);
  if (!list && !recompute) {
    return 0;
  }
  std::vector<flatbuffers::Offset<fb::Note>> notes;
  if (recompute) {
    auto kind = fbb.CreateString("recompute");
    auto where = fbb.CreateString("");
    auto message = fbb.CreateString(recomputeNote(recompute));
    notes.push_back(fb::CreateNote(fbb, kind, where, message));
  }
  ArrayRef<Attribute> unraised = list ? list.getValue() : ArrayRef<Attribute>();
  for (auto entry : unraised) {
    auto dict = llvm::cast<DictionaryAttr>(entry);
    auto text = [&](StringRef key) {
      auto value = dict.getAs<StringAttr>(key);
      return fbb.CreateString(value ? value.getValue().str() : "");
    };
    auto kind = fbb.CreateString("unraised_attention");
    auto where = text("module");
    auto message = text("reason");
    notes.push_back(fb::CreateNote(fbb, kind, where, message));
  }
  return fbb.CreateVector(notes);
}

class PlanBuilder {
public:
  PlanBuilder(ModuleOp module, sched::ProgramOp program,
              StringRef planDirectory);

  /// Adds one op of the program; an error on it if the format cannot say it.
  LogicalResult addOp(Operation &op);
  /// The finished plan file.
  /// The finished plan file (without device code unless `deviceCode`).
  FailureOr<std::vector<uint8_t>> finish(bool cuda, bool deviceCode);

private:
  flatbuffers::Offset<flatbuffers::String> text(StringRef s) {
    return fbb.CreateString(s.data(), s.size());
  }
  void closeEntry();
  uint32_t currentEntry() const {
    return static_cast<uint32_t>(entryName.empty() ? 0 : entries.size());
  }
  FailureOr<uint32_t> addBuffer(Operation *op, StringRef arena, int64_t offset,
                                int64_t size, MemRefType type,
                                int64_t rankStride = 0, int64_t rankPeriod = 0);
  /// A sharded state's StateShard (a null offset for a whole state).
  FailureOr<flatbuffers::Offset<fb::StateShard>>
  addStateShard(sched::StateOp state);
  FailureOr<uint32_t> bufferOf(Operation *user, Value value) const;
  FailureOr<AttributeVector> attributesOf(DictionaryAttr dict);

  void addArena(sched::ArenaOp arena);
  LogicalResult addParam(sched::ParamOp param);
  FailureOr<flatbuffers::Offset<fb::ParameterShard>>
  parameterShard(sched::ParamOp param);
  /// The chunk buffer of each ZeRO-3 bucket, by (arena, offset).
  std::map<std::pair<std::string, int64_t>, uint32_t> chunkBuffers;
  FailureOr<flatbuffers::Offset<fb::Source>> paramSource(sched::ParamOp param);
  FailureOr<flatbuffers::Offset<fb::Quantization>>
  paramQuantization(sched::ParamOp param);
  FailureOr<std::vector<flatbuffers::Offset<fb::Source>>>
  gptqSections(sched::ParamOp param, DictionaryAttr dict);
  FailureOr<flatbuffers::Offset<fb::Init>> paramInit(sched::ParamOp param);
  LogicalResult addLaunch(sched::LaunchOp launch);
  LogicalResult addCollective(sched::CollectiveOp collective);
  LogicalResult addCopy(sched::CopyOp copy);
  template <typename OpTy, typename CreateFn>
  LogicalResult addEventStep(OpTy op, fb::Step kind, CreateFn create);
  FailureOr<flatbuffers::Offset<
      flatbuffers::Vector<flatbuffers::Offset<fb::DeviceCode>>>>
  writeDeviceCodeOf(bool cuda);

  StringAttr programString(StringRef name) const {
    return program->getAttrOfType<StringAttr>(name);
  }
  int64_t programInt(StringRef name) const {
    auto attr = program->getAttrOfType<IntegerAttr>(name);
    return attr ? attr.getInt() : 0;
  }

  ModuleOp module;
  sched::ProgramOp program;
  StringRef planDirectory;
  /// Data files by name, relative to the plan (every parameter of a model
  /// names the same file or few: one path computation each, not a getcwd
  /// per parameter).
  llvm::StringMap<std::string> relativePaths;
  /// A 2-layer plan (what explore compiles thousands of) fits in 1 MiB:
  /// growing from less copies the buffer several times per plan.
  flatbuffers::FlatBufferBuilder fbb{1 << 20};
  StringRef relativePath(StringRef file) {
    auto [it, inserted] = relativePaths.try_emplace(file);
    if (inserted) {
      it->second = planRelativePath(file, planDirectory);
    }
    return it->second;
  }
  llvm::StringMap<uint32_t> arenaIndex, kernelIndex, streamIndex, eventIndex;
  std::vector<flatbuffers::Offset<fb::Arena>> arenas;
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  std::vector<flatbuffers::Offset<fb::Stream>> streams;
  std::vector<flatbuffers::Offset<fb::Event>> events;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  std::vector<flatbuffers::Offset<fb::Parameter>> parameters;
  std::vector<flatbuffers::Offset<fb::Constant>> constants;
  std::vector<flatbuffers::Offset<fb::Op>> steps;
  std::vector<flatbuffers::Offset<fb::Binding>> inputs, outputs;
  std::vector<flatbuffers::Offset<fb::Entry>> entries;
  std::vector<flatbuffers::Offset<fb::State>> states;
  /// The entry being written: its name and first step.
  std::string entryName;
  uint32_t entryFirst = 0;
  runtime::CategoryBytes byCategory{};
  DenseMap<Value, uint32_t> bufferIndex;
  /// The recipe's seed, which runtime-initialized parameters draw from.
  uint64_t trainingSeed = 0;
};

} // namespace

PlanBuilder::PlanBuilder(ModuleOp module, sched::ProgramOp program,
                         StringRef planDirectory)
    : module(module), program(program), planDirectory(planDirectory) {
  if (auto training = module->getAttrOfType<DictionaryAttr>("tg.training")) {
    if (auto seed = training.getAs<IntegerAttr>("seed")) {
      trainingSeed = static_cast<uint64_t>(seed.getInt());
    }
  }
}

void PlanBuilder::closeEntry() {
  if (!entryName.empty()) {
    entries.push_back(
        fb::CreateEntry(fbb, text(entryName), entryFirst,
                        static_cast<uint32_t>(steps.size()) - entryFirst));
  }
}

FailureOr<uint32_t> PlanBuilder::addBuffer(Operation *op, StringRef arena,
                                           int64_t offset, int64_t size,
                                           MemRefType type, int64_t rankStride,
                                           int64_t rankPeriod) {
  FailureOr<fb::DType> dtype = dtypeOf(op, type.getElementType());
  if (failed(dtype)) {
    return failure();
  }
  FailureOr<uint32_t> arenaAt = symbolIndex(arenaIndex, arena, op, "arena");
  if (failed(arenaAt)) {
    return failure();
  }
  auto shape = fbb.CreateVector(type.getShape().data(), type.getShape().size());
  buffers.push_back(
      fb::CreateBuffer(fbb, *arenaAt, static_cast<uint64_t>(offset),
                       static_cast<uint64_t>(size), *dtype, shape,
                       static_cast<uint64_t>(rankStride),
                       static_cast<uint32_t>(rankPeriod)));
  uint32_t index = static_cast<uint32_t>(buffers.size() - 1);
  bufferIndex[op->getResult(0)] = index;
  return index;
}

FailureOr<flatbuffers::Offset<fb::StateShard>>
PlanBuilder::addStateShard(sched::StateOp state) {
  DictionaryAttr shard = state.getShardAttr();
  if (!shard) {
    return flatbuffers::Offset<fb::StateShard>();
  }
  auto members = shard.getAs<ArrayAttr>("members");
  auto offsets = shard.getAs<DenseI64ArrayAttr>("offsets");
  auto numels = shard.getAs<DenseI64ArrayAttr>("numels");
  auto flat = shard.getAs<IntegerAttr>("flat_elements");
  auto group = shard.getAs<DenseI64ArrayAttr>("group");
  if (!members || !offsets || !numels || !flat || !group ||
      offsets.size() != static_cast<int64_t>(members.size()) ||
      numels.size() != static_cast<int64_t>(members.size())) {
    return state.emitError() << "state '" << state.getName()
                             << "': shard needs members, offsets, numels, "
                                "flat_elements and group, one offset and "
                                "numel per member";
  }
  std::vector<flatbuffers::Offset<flatbuffers::String>> names;
  for (Attribute member : members) {
    auto name = llvm::dyn_cast<StringAttr>(member);
    if (!name) {
      return state.emitError() << "state '" << state.getName()
                               << "': shard members must be strings";
    }
    names.push_back(text(name.getValue()));
  }
  std::vector<int32_t> ranks(group.asArrayRef().begin(),
                             group.asArrayRef().end());
  return fb::CreateStateShard(
      fbb, fbb.CreateVector(names),
      fbb.CreateVector(offsets.asArrayRef().data(), offsets.size()),
      fbb.CreateVector(numels.asArrayRef().data(), numels.size()),
      flat.getInt(), fbb.CreateVector(ranks));
}

FailureOr<uint32_t> PlanBuilder::bufferOf(Operation *user, Value value) const {
  auto it = bufferIndex.find(value);
  if (it == bufferIndex.end()) {
    return user->emitError() << "an operand is not a buffer, parameter, "
                                "state, constant or input of the program";
  }
  return it->second;
}

FailureOr<AttributeVector> PlanBuilder::attributesOf(DictionaryAttr dict) {
  std::vector<flatbuffers::Offset<fb::Attribute>> attrs;
  if (dict) {
    for (NamedAttribute named : dict) {
      auto name = text(named.getName().strref());
      Attribute value = named.getValue();
      if (auto i = llvm::dyn_cast<IntegerAttr>(value)) {
        attrs.push_back(
            fb::CreateAttribute(fbb, name, fb::AttrKind::Int, i.getInt()));
      } else if (auto f = llvm::dyn_cast<FloatAttr>(value)) {
        attrs.push_back(fb::CreateAttribute(fbb, name, fb::AttrKind::Float, 0,
                                            f.getValueAsDouble()));
      } else if (auto ints = llvm::dyn_cast<DenseI64ArrayAttr>(value)) {
        auto vec = fbb.CreateVector(ints.asArrayRef().data(), ints.size());
        attrs.push_back(
            fb::CreateAttribute(fbb, name, fb::AttrKind::Ints, 0, 0, vec));
      } else if (auto fs = llvm::dyn_cast<DenseF64ArrayAttr>(value)) {
        auto vec = fbb.CreateVector(fs.asArrayRef().data(), fs.size());
        attrs.push_back(fb::CreateAttribute(fbb, name, fb::AttrKind::Floats, 0,
                                            0, 0, vec));
      } else if (auto s = llvm::dyn_cast<StringAttr>(value)) {
        auto str = text(s.strref());
        attrs.push_back(fb::CreateAttribute(fbb, name, fb::AttrKind::String, 0,
                                            0, 0, 0, str));
      } else {
        return failure();
      }
    }
  }
  return fbb.CreateVector(attrs);
}

void PlanBuilder::addArena(sched::ArenaOp arena) {
  arenaIndex[arena.getSymName()] = arenas.size();
  byCategory[static_cast<size_t>(arena.getCategory())] +=
      static_cast<uint64_t>(arena.getSize());
  arenas.push_back(fb::CreateArena(
      fbb, text(arena.getSymName()), arenaKindOf(arena.getKind()),
      categoryOf(arena.getCategory()), static_cast<uint64_t>(arena.getSize()),
      static_cast<uint64_t>(arena.getAlignment())));
}

FailureOr<flatbuffers::Offset<fb::Source>>
PlanBuilder::paramSource(sched::ParamOp param) {
  if (!param.getFile()) {
    return flatbuffers::Offset<fb::Source>();
  }
  // The verifier has checked that offset and length come with file.
  FailureOr<fb::DType> sourceDType =
      dtypeOf(param, param.getSourceType() ? *param.getSourceType()
                                           : param.getType().getElementType());
  if (failed(sourceDType)) {
    return failure();
  }
  return fb::CreateSource(
      fbb, text(relativePath(*param.getFile())),
      static_cast<uint64_t>(*param.getFileOffset()),
      static_cast<uint64_t>(*param.getFileLength()), *sourceDType);
}

FailureOr<std::vector<flatbuffers::Offset<fb::Source>>>
PlanBuilder::gptqSections(sched::ParamOp param, DictionaryAttr dict) {
  // GPTQ bytes come from the checkpoint `tailor quantize` wrote: its four
  // tensors are the storage's sections, read as they are.
  auto path = dict.getAs<StringAttr>("checkpoint");
  if (!path) {
    return param.emitError()
           << "parameter '" << param.getName()
           << "' is gptq-quantized but no checkpoint holds its bytes "
              "(run `tailor quantize`, then set the recipe key "
              "gptq_checkpoint)";
  }
  std::string error;
  auto checkpoint = quant::GptqCheckpoint::open(path.str(), error);
  if (!checkpoint) {
    return param.emitError() << error;
  }
  auto moduleName = dict.getAs<StringAttr>("module");
  StringRef hfName = moduleName ? moduleName.getValue() : param.getName();
  if (!moduleName) {
    hfName.consume_back(".weight");
  }
  const quant::GptqCheckpointModule *gptqModule =
      checkpoint->find(hfName.str());
  if (!gptqModule) {
    return param.emitError() << "checkpoint '" << path.getValue()
                             << "' has no module '" << hfName << "'";
  }
  std::string file = relativePath(path.getValue()).str();
  std::vector<flatbuffers::Offset<fb::Source>> sections;
  for (const quant::GptqTensorLocation *tensor :
       {&gptqModule->qweight, &gptqModule->qzeros, &gptqModule->scales,
        &gptqModule->gIdx}) {
    sections.push_back(fb::CreateSource(fbb, text(file), tensor->fileOffset,
                                        tensor->bytes, fb::DType::U8));
  }
  return sections;
}

FailureOr<flatbuffers::Offset<fb::Quantization>>
PlanBuilder::paramQuantization(sched::ParamOp param) {
  DictionaryAttr dict = param.getQuantizationAttr();
  if (!dict) {
    return flatbuffers::Offset<fb::Quantization>();
  }
  FailureOr<quant::QuantSpec> spec =
      tg::quantSpecFromDict(dict, [&] { return param.emitError(); });
  if (failed(spec)) {
    return failure();
  }
  std::vector<flatbuffers::Offset<fb::Source>> sections;
  if (spec->scheme == quant::Scheme::GPTQ) {
    FailureOr<std::vector<flatbuffers::Offset<fb::Source>>> gptq =
        gptqSections(param, dict);
    if (failed(gptq)) {
      return failure();
    }
    sections = std::move(*gptq);
  }
  return fb::CreateQuantization(
      fbb, text(quant::schemeName(spec->scheme)), spec->rows, spec->cols,
      spec->blockSize, spec->doubleQuant, spec->nestedBlockSize, spec->bits,
      spec->groupSize, spec->actOrder, spec->outlierThreshold,
      spec->outlierColumns, tg::quantSourceTransposed(dict),
      sections.empty() ? 0 : fbb.CreateVector(sections));
}

FailureOr<flatbuffers::Offset<fb::Init>>
PlanBuilder::paramInit(sched::ParamOp param) {
  std::optional<StringRef> kind = param.getInit();
  if (!kind) {
    return flatbuffers::Offset<fb::Init>();
  }
  FailureOr<fb::InitKind> initKind = initKindOf(param, *kind);
  if (failed(initKind)) {
    return failure();
  }
  // The verifier has checked that a value comes with the kind.
  double value = param.getInitValue()->convertToDouble();
  // A ZeRO-3 parameter's view is its bucket's chunk: its fan-in is that of
  // its own shape.
  ArrayRef<int64_t> shape = param.getType().getShape();
  if (DictionaryAttr shard = param.getShardAttr()) {
    if (auto whole = shard.getAs<DenseI64ArrayAttr>("shape")) {
      shape = whole.asArrayRef();
    }
  }
  int64_t fanIn = shape.size() >= 2 ? shape[1] : (shape.empty() ? 1 : shape[0]);
  for (size_t i = 2; i < shape.size(); ++i) {
    fanIn *= shape[i];
  }
  return fb::CreateInit(
      fbb, *initKind, *initKind == fb::InitKind::KaimingUniform ? value : 0.0,
      fanIn, *initKind == fb::InitKind::Normal ? value : 0.0, trainingSeed);
}

LogicalResult PlanBuilder::addParam(sched::ParamOp param) {
  // ZeRO-3 members of one bucket share its chunk: one buffer.
  auto chunkKey = std::make_pair(param.getArena().str(), param.getOffset());
  auto shared = chunkBuffers.find(chunkKey);
  FailureOr<uint32_t> index =
      param.getShard() && shared != chunkBuffers.end()
          ? FailureOr<uint32_t>(shared->second)
          : addBuffer(param, param.getArena(), param.getOffset(),
                      param.getSize(), param.getType());
  if (failed(index)) {
    return failure();
  }
  bufferIndex[param.getResult()] = *index;
  FailureOr<flatbuffers::Offset<fb::ParameterShard>> shard =
      parameterShard(param);
  if (failed(shard)) {
    return failure();
  }
  if (param.getShard()) {
    chunkBuffers[chunkKey] = *index;
  }
  FailureOr<flatbuffers::Offset<fb::Source>> source = paramSource(param);
  if (failed(source)) {
    return failure();
  }
  FailureOr<flatbuffers::Offset<fb::Quantization>> quant =
      paramQuantization(param);
  if (failed(quant)) {
    return failure();
  }
  FailureOr<flatbuffers::Offset<fb::Init>> init = paramInit(param);
  if (failed(init)) {
    return failure();
  }
  flatbuffers::Offset<flatbuffers::String> exportName;
  if (auto name = param->getAttrOfType<StringAttr>("tg.export_name")) {
    exportName = text(name.getValue());
  }
  parameters.push_back(fb::CreateParameter(
      fbb, text(param.getName()), *index, *source, param.getTrainable(), *init,
      exportName, param->hasAttr("tg.export_transposed"), *quant, *shard,
      param->hasAttr(graph::kExportFanInFanOutAttrName)));
  return success();
}

FailureOr<flatbuffers::Offset<fb::ParameterShard>>
PlanBuilder::parameterShard(sched::ParamOp param) {
  DictionaryAttr shard = param.getShardAttr();
  if (!shard) {
    return flatbuffers::Offset<fb::ParameterShard>();
  }
  auto shape = shard.getAs<DenseI64ArrayAttr>("shape");
  auto offset = shard.getAs<IntegerAttr>("offset");
  auto flat = shard.getAs<IntegerAttr>("flat_elements");
  auto group = shard.getAs<DenseI64ArrayAttr>("group");
  if (!shape || !offset || !flat || !group) {
    return param.emitError() << "parameter '" << param.getName()
                             << "': shard needs shape, offset, "
                                "flat_elements and group";
  }
  std::vector<int32_t> ranks(group.asArrayRef().begin(),
                             group.asArrayRef().end());
  return fb::CreateParameterShard(
      fbb, fbb.CreateVector(shape.asArrayRef().data(), shape.size()),
      offset.getInt(), flat.getInt(), fbb.CreateVector(ranks));
}

/// The training steps `op` runs in (sched.steps), or none: every step.
static std::unique_ptr<fb::StepRange> stepsOf(Operation *op) {
  auto steps = op->getAttrOfType<DenseI64ArrayAttr>(sched::kStepsAttrName);
  if (!steps || (steps.size() != 2 && steps.size() != 3)) {
    return nullptr;
  }
  return std::make_unique<fb::StepRange>(steps[0], steps[1]);
}

/// Every how many steps of its range `op` runs (sched.steps' third value;
/// 1: every step).
static int64_t stepsPeriodOf(Operation *op) {
  auto steps = op->getAttrOfType<DenseI64ArrayAttr>(sched::kStepsAttrName);
  return steps && steps.size() == 3 ? steps[2] : 1;
}

LogicalResult PlanBuilder::addLaunch(sched::LaunchOp launch) {
  std::vector<uint32_t> operands;
  for (Value arg : launch.getArgs()) {
    FailureOr<uint32_t> buffer = bufferOf(launch, arg);
    if (failed(buffer)) {
      return failure();
    }
    operands.push_back(*buffer);
  }
  auto attrs = attributesOf(launch.getKernelAttrsAttr());
  if (failed(attrs)) {
    return launch.emitError()
           << "a kernel attribute has a type the plan cannot carry";
  }
  FailureOr<uint32_t> kernelAt =
      symbolIndex(kernelIndex, launch.getKernel(), launch, "kernel");
  FailureOr<uint32_t> streamAt =
      symbolIndex(streamIndex, launch.getStream(), launch, "stream");
  if (failed(kernelAt) || failed(streamAt)) {
    return failure();
  }
  auto operandsVec = fbb.CreateVector(operands);
  auto origin = text(launch.getOrigin().value_or(""));
  auto step = fb::CreateLaunch(
      fbb, *kernelAt, operandsVec, *attrs, *streamAt, origin,
      launch.getFlops() ? launch.getFlops()->convertToDouble() : 0.0,
      launch.getBytes() ? launch.getBytes()->convertToDouble() : 0.0);
  steps.push_back(
      fb::CreateOp(fbb, fb::Step::Launch, step.Union(), stepsOf(launch).get(),
                   stepsPeriodOf(launch)));
  return success();
}

LogicalResult PlanBuilder::addCollective(sched::CollectiveOp collective) {
  FailureOr<uint32_t> input = bufferOf(collective, collective.getInput());
  FailureOr<uint32_t> output = bufferOf(collective, collective.getOutput());
  FailureOr<uint32_t> streamAt =
      symbolIndex(streamIndex, collective.getStream(), collective, "stream");
  if (failed(input) || failed(output) || failed(streamAt)) {
    return failure();
  }
  std::vector<int32_t> group;
  for (int64_t rank : collective.getGroup()) {
    group.push_back(static_cast<int32_t>(rank));
  }
  auto groupVec = fbb.CreateVector(group);
  auto reduction = static_cast<fb::Reduction>(
      static_cast<int>(collective.getReduction().value_or(sched::Reduction::Sum)));
  auto step = fb::CreateCollective(
      fbb, static_cast<fb::CollectiveKind>(static_cast<int>(collective.getKind())),
      *input, *output, groupVec, reduction,
      static_cast<int32_t>(collective.getRoot().value_or(0)), *streamAt);
  steps.push_back(fb::CreateOp(fbb, fb::Step::Collective, step.Union(),
                               stepsOf(collective).get(),
                               stepsPeriodOf(collective)));
  return success();
}

LogicalResult PlanBuilder::addCopy(sched::CopyOp copy) {
  FailureOr<uint32_t> source = bufferOf(copy, copy.getSource());
  FailureOr<uint32_t> target = bufferOf(copy, copy.getTarget());
  FailureOr<uint32_t> streamAt =
      symbolIndex(streamIndex, copy.getStream(), copy, "stream");
  if (failed(source) || failed(target) || failed(streamAt)) {
    return failure();
  }
  auto step = fb::CreateCopy(
      fbb, static_cast<fb::CopyKind>(static_cast<int>(copy.getKind())),
      *source, *target, *streamAt);
  steps.push_back(fb::CreateOp(fbb, fb::Step::Copy, step.Union()));
  return success();
}

template <typename OpTy, typename CreateFn>
LogicalResult PlanBuilder::addEventStep(OpTy op, fb::Step kind,
                                        CreateFn create) {
  FailureOr<uint32_t> eventAt =
      symbolIndex(eventIndex, op.getEvent(), op, "event");
  FailureOr<uint32_t> streamAt =
      symbolIndex(streamIndex, op.getStream(), op, "stream");
  if (failed(eventAt) || failed(streamAt)) {
    return failure();
  }
  auto step = create(fbb, *eventAt, *streamAt);
  steps.push_back(fb::CreateOp(fbb, kind, step.Union()));
  return success();
}

LogicalResult PlanBuilder::addOp(Operation &op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case([&](sched::ArenaOp arena) {
        addArena(arena);
        return success();
      })
      .Case([&](sched::StreamOp stream) {
        streamIndex[stream.getSymName()] = streams.size();
        streams.push_back(fb::CreateStream(
            fbb, text(stream.getSymName()),
            stream.getHost() ? fb::StreamKind::Host : fb::StreamKind::Device));
        return success();
      })
      .Case([&](sched::EventOp event) {
        eventIndex[event.getSymName()] = events.size();
        events.push_back(fb::CreateEvent(fbb, text(event.getSymName())));
        return success();
      })
      .Case([&](sched::KernelOp kernel) {
        kernelIndex[kernel.getSymName()] = kernels.size();
        kernels.push_back(
            fb::CreateKernel(fbb, text(kernel.getSymName()),
                             static_cast<int32_t>(kernel.getArity())));
        return success();
      })
      .Case([&](sched::BufferOp buffer) {
        return addBuffer(buffer, buffer.getArena(), buffer.getOffset(),
                         buffer.getSize(), buffer.getType(),
                         buffer.getRankStride().value_or(0),
                         buffer.getRankPeriod().value_or(0));
      })
      .Case([&](sched::ParamOp param) { return addParam(param); })
      .Case([&](sched::StateOp state) -> LogicalResult {
        FailureOr<uint32_t> index =
            addBuffer(state, state.getArena(), state.getOffset(),
                      state.getSize(), state.getType());
        if (failed(index)) {
          return failure();
        }
        FailureOr<flatbuffers::Offset<fb::StateShard>> shard =
            addStateShard(state);
        if (failed(shard)) {
          return failure();
        }
        // Error feedback is what this rank's own compression lost: each
        // rank's differs, so checkpoints keep every rank's.
        bool perRank = state.getKind() == "powersgd_error";
        states.push_back(fb::CreateState(fbb, text(state.getName()), *index,
                                         text(state.getParameter()),
                                         text(state.getKind()), *shard,
                                         perRank));
        return success();
      })
      .Case([&](sched::EntryOp entry) {
        closeEntry();
        entryName = entry.getName().str();
        entryFirst = static_cast<uint32_t>(steps.size());
        return success();
      })
      .Case([&](sched::ConstantOp constant) -> LogicalResult {
        FailureOr<uint32_t> index =
            addBuffer(constant, constant.getArena(), constant.getOffset(),
                      constant.getSize(), constant.getType());
        if (failed(index)) {
          return failure();
        }
        std::vector<uint8_t> bytes = constantBytes(constant.getValue());
        constants.push_back(
            fb::CreateConstant(fbb, *index, fbb.CreateVector(bytes)));
        return success();
      })
      .Case([&](sched::InputOp input) -> LogicalResult {
        FailureOr<uint32_t> index =
            addBuffer(input, input.getArena(), input.getOffset(),
                      input.getSize(), input.getType());
        if (failed(index)) {
          return failure();
        }
        inputs.push_back(fb::CreateBinding(fbb, text(input.getName()), *index,
                                           currentEntry()));
        return success();
      })
      .Case([&](sched::OutputOp output) -> LogicalResult {
        FailureOr<uint32_t> buffer = bufferOf(output, output.getBuffer());
        if (failed(buffer)) {
          return failure();
        }
        outputs.push_back(fb::CreateBinding(fbb, text(output.getName()),
                                            *buffer, currentEntry()));
        return success();
      })
      .Case([&](sched::LaunchOp launch) { return addLaunch(launch); })
      .Case([&](sched::CollectiveOp collective) {
        return addCollective(collective);
      })
      .Case([&](sched::CopyOp copy) { return addCopy(copy); })
      .Case([&](sched::RecordOp record) {
        return addEventStep(record, fb::Step::Record,
                            [](auto &b, uint32_t event, uint32_t stream) {
                              return fb::CreateRecord(b, event, stream);
                            });
      })
      .Case([&](sched::WaitOp wait) {
        return addEventStep(wait, fb::Step::Wait,
                            [](auto &b, uint32_t event, uint32_t stream) {
                              return fb::CreateWait(b, event, stream);
                            });
      })
      .Default([&](Operation *other) {
        return other->emitError() << "the plan writer cannot express "
                                  << other->getName() << " yet";
      });
}

FailureOr<flatbuffers::Offset<
    flatbuffers::Vector<flatbuffers::Offset<fb::DeviceCode>>>>
PlanBuilder::writeDeviceCodeOf(bool cuda) {
  if (!cuda) {
    return flatbuffers::Offset<
        flatbuffers::Vector<flatbuffers::Offset<fb::DeviceCode>>>(0);
  }
  std::vector<std::string> kernelNames;
  for (auto kernel : program.getBody().front().getOps<sched::KernelOp>()) {
    kernelNames.push_back(kernel.getSymName().str());
  }
  // The precision picks some launchers' entry points (fp16 attention).
  StringAttr precision = programString("sched.precision");
  runtime::cuda::HalfCompute half = runtime::cuda::halfComputeOf(
      precision ? precision.strref() : StringRef("fp32"));
  FailureOr<std::vector<flatbuffers::Offset<fb::DeviceCode>>> images =
      writeDeviceCode(fbb, module, program, programInt("sched.sm"), half,
                      kernelNames);
  if (failed(images)) {
    return failure();
  }
  return fbb.CreateVector(*images);
}

FailureOr<std::vector<uint8_t>> PlanBuilder::finish(bool cuda,
                                                    bool deviceCode) {
  closeEntry();
  uint64_t liveBytes =
      static_cast<uint64_t>(programInt("sched.activations_live_bytes"));
  auto memory = runtime::createMemoryReport(fbb, byCategory, liveBytes);
  auto code = writeDeviceCodeOf(cuda && deviceCode);
  if (failed(code)) {
    return failure();
  }
  auto stringAttr = [&](StringRef name, StringRef fallback) {
    StringAttr attr = programString(name);
    return attr ? attr.strref() : fallback;
  };
  auto target = fb::CreateTarget(
      fbb, cuda ? fb::Backend::Cuda : fb::Backend::Cpu,
      text(stringAttr("sched.hardware", cuda ? "cuda" : "cpu")),
      static_cast<int32_t>(programInt("sched.sm")),
      static_cast<int32_t>(programInt("sched.threads")),
      text(stringAttr("sched.precision", "fp32")),
      static_cast<uint64_t>(programInt("sched.device_memory")));
  std::string model;
  if (auto source = module->getAttrOfType<StringAttr>("tg.source")) {
    model = source.str();
  }
  auto plan = fb::CreatePlan(
      fbb, runtime::kPlanVersion, text("tailor " TAILOR_VERSION_STRING),
      text(model), target, static_cast<int32_t>(program.getRank()),
      static_cast<int32_t>(program.getWorldSize()), fbb.CreateVector(arenas),
      fbb.CreateVector(buffers), fbb.CreateVector(parameters),
      fbb.CreateVector(constants), fbb.CreateVector(kernels),
      fbb.CreateVector(streams), fbb.CreateVector(events),
      fbb.CreateVector(steps), fbb.CreateVector(inputs),
      fbb.CreateVector(outputs), memory,
      entries.empty() ? 0 : fbb.CreateVector(entries),
      states.empty() ? 0 : fbb.CreateVector(states), writeTraining(fbb, module),
      *code, writeNotes(fbb, module), writeParallel(fbb, module),
      writeGeneration(fbb, module), writePipelineStage(fbb, module));
  fb::FinishSizePrefixedPlanBuffer(fbb, plan);
  return std::vector<uint8_t>(fbb.GetBufferPointer(),
                              fbb.GetBufferPointer() + fbb.GetSize());
}

/// A layer split's plan: one whole plan per stage module, wrapped in an
/// outer plan with no program of its own that keeps the model, target and
/// training tables.
static FailureOr<std::vector<uint8_t>>
serializePipeline(ModuleOp module, StringRef planDirectory, bool deviceCode) {
  std::vector<std::vector<uint8_t>> stagePlans;
  for (ModuleOp stage : module.getOps<ModuleOp>()) {
    FailureOr<std::vector<uint8_t>> bytes =
        serializePlan(stage, planDirectory, deviceCode);
    if (failed(bytes)) {
      return failure();
    }
    stagePlans.push_back(std::move(*bytes));
  }
  if (stagePlans.empty()) {
    return module.emitError() << "a layer split module without stages";
  }
  // The first stage's tables describe the whole: copy its target.
  auto first = fb::GetSizePrefixedPlan(stagePlans.front().data());
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::StagePlan>> stages;
  for (const std::vector<uint8_t> &bytes : stagePlans) {
    stages.push_back(fb::CreateStagePlan(fbb, fbb.CreateVector(bytes)));
  }
  const fb::Target *target = first->target();
  auto str = [&](const flatbuffers::String *text) {
    return fbb.CreateString(text ? text->str() : "");
  };
  auto targetCopy = fb::CreateTarget(
      fbb, target->backend(), str(target->name()), target->sm(),
      target->threads(), str(target->precision()), target->device_memory());
  std::string model;
  if (auto source = module->getAttrOfType<StringAttr>("tg.source")) {
    model = source.str();
  }
  auto producer = fbb.CreateString("tailor " TAILOR_VERSION_STRING);
  auto modelText = fbb.CreateString(model);
  auto arenas =
      fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Arena>>());
  auto buffers =
      fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Buffer>>());
  auto ops = fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Op>>());
  auto training = writeTraining(fbb, module);
  auto stageVector = fbb.CreateVector(stages);
  fb::PlanBuilder builder(fbb);
  builder.add_version(runtime::kPlanVersion);
  builder.add_producer(producer);
  builder.add_model(modelText);
  builder.add_target(targetCopy);
  // Every stage's plan is for the whole world: stages x replicas.
  builder.add_world_size(first->world_size());
  builder.add_arenas(arenas);
  builder.add_buffers(buffers);
  builder.add_ops(ops);
  if (!training.IsNull()) {
    builder.add_training(training);
  }
  builder.add_stages(stageVector);
  fb::FinishSizePrefixedPlanBuffer(fbb, builder.Finish());
  return std::vector<uint8_t>(fbb.GetBufferPointer(),
                              fbb.GetBufferPointer() + fbb.GetSize());
}

FailureOr<std::vector<uint8_t>> serializePlan(ModuleOp module,
                                              StringRef planDirectory,
                                              bool deviceCode) {
  if (module->hasAttr(tg::TGDialect::kPipelineAttrName)) {
    return serializePipeline(module, planDirectory, deviceCode);
  }
  auto programs = module.getOps<sched::ProgramOp>();
  if (programs.empty()) {
    return module.emitError() << "no sched.program to write as a plan";
  }
  if (std::next(programs.begin()) != programs.end()) {
    return module.emitError()
           << "one plan file holds one rank's program; this module has more";
  }
  sched::ProgramOp program = *programs.begin();
  FailureOr<bool> cuda = targetsCuda(program);
  if (failed(cuda) || (!*cuda && failed(checkCpuKernels(program)))) {
    return failure();
  }
  PlanBuilder builder(module, program, planDirectory);
  for (Operation &op : program.getBody().front()) {
    if (failed(builder.addOp(op))) {
      return failure();
    }
  }
  return builder.finish(*cuda, deviceCode);
}

} // namespace tailor
