//===- ExploreTest.cpp - the space `tailor explore` searches ---------------===//
//
// compiler/Explore.h without compiling anything: the space around a recipe
// (micro batches that split the global batch, the knobs several ranks add,
// what cannot combine), --fix in knob and recipe spellings and its errors,
// the recipe keys of a configuration, the Pareto front, the nearest fits
// and the plot.
//
//===----------------------------------------------------------------------===//

#include "compiler/Explore.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

namespace tailor::explore {
namespace {

HardwareSpec cluster(int64_t nodes, int64_t gpus) {
  HardwareSpec h;
  h.name = "test";
  h.nodes = nodes;
  h.gpus = gpus;
  return h;
}

TrainingRecipe recipe(int64_t microBatch, int64_t accumulation) {
  TrainingRecipe r;
  r.microBatchSize = microBatch;
  r.gradientAccumulationSteps = accumulation;
  return r;
}

Space spaceOrDie(const TrainingRecipe &r, const HardwareSpec &h,
                 int64_t globalBatch, std::vector<std::string> fixed = {}) {
  llvm::Expected<Space> space = makeSpace(r, h, globalBatch, fixed);
  EXPECT_TRUE(static_cast<bool>(space)) << llvm::toString(space.takeError());
  return *space;
}

std::string fixError(std::vector<std::string> fixed) {
  llvm::Expected<Space> space =
      makeSpace(recipe(4, 1), cluster(1, 2), 0, fixed);
  return space ? "" : llvm::toString(space.takeError());
}

TEST(ExploreSpace, MicroBatchesSplitTheGlobalBatchPerRank) {
  // 4 x 2 on 2 ranks: 16 sequences a step, 8 per rank.
  Space space = spaceOrDie(recipe(4, 2), cluster(1, 2), 0);
  EXPECT_EQ(space.globalBatch, 16);
  EXPECT_EQ(space.microBatches, (std::vector<int64_t>{1, 2, 4, 8}));
  for (const Knobs &k : space.enumerate()) {
    // A layer split over both ranks has no data parallelism: one pipeline
    // takes it all.
    EXPECT_EQ(k.microBatch * k.accumulation * (k.stages > 1 ? 1 : 2), 16);
  }
  // On 4 ranks, 2 stages run 2 replicas each, sharing the global batch of
  // 32 as DDP's 4 ranks do; 4 stages run one pipeline.
  Space four = spaceOrDie(recipe(4, 2), cluster(1, 4), 0);
  EXPECT_EQ(four.stages, (std::vector<int64_t>{1, 2, 4}));
  int replicated = 0;
  for (const Knobs &k : four.enumerate()) {
    int64_t dataParallel = k.stages == 1 ? 4 : 4 / k.stages;
    EXPECT_EQ(k.replicas, k.stages == 1 ? 1 : 4 / k.stages);
    EXPECT_EQ(k.microBatch * k.accumulation * dataParallel, 32);
    if (k.stages == 2) {
      EXPECT_EQ(knobValue(k, "split"), "2 stages x 2 replicas");
      ++replicated;
    }
  }
  EXPECT_GT(replicated, 0);
  // --global-batch 12 on 2 ranks: micro batches dividing 6, the recipe's 3
  // included.
  EXPECT_EQ(spaceOrDie(recipe(3, 1), cluster(1, 2), 12).microBatches,
            (std::vector<int64_t>{1, 2, 3}));
  EXPECT_FALSE(static_cast<bool>(
      makeSpace(recipe(1, 1), cluster(1, 4), 6, {})));
}

TEST(ExploreSpace, RanksAddShardingAndInvalidCombinationsAreLeftOut) {
  EXPECT_EQ(spaceOrDie(recipe(1, 1), cluster(1, 1), 0).sharding,
            (std::vector<std::string>{"ddp"}));
  EXPECT_EQ(spaceOrDie(recipe(1, 1), cluster(2, 2), 0).sharding,
            (std::vector<std::string>{"ddp", "zero1", "zero2", "zero3",
                                      "zero3-hpz", "hybrid"}));
  Space space = spaceOrDie(recipe(1, 1), cluster(1, 2), 0);
  std::vector<Knobs> all = space.enumerate();
  EXPECT_FALSE(all.empty());
  for (const Knobs &k : all) {
    EXPECT_FALSE(k.adapter == "full" && k.weights != "fp32");
    EXPECT_FALSE(k.offloadParams && (k.adapter == "full" || k.zero3()));
  }
  // 5 weights x 2 adapters + full, x 3 recompute x 4 sharding, x 1 micro
  // batch; per sharding, the offloads: parameters (LoRA outside zero3) x
  // optimizer (always: ZeRO's chunks too) x activations (always); and the
  // four compression
  // methods of each ddp point without offload (two CPU ranks); and a
  // layer split over the two ranks of each weights x adapter point without
  // recomputation, sharding, offload or compression.
  size_t loraOffloads = 3 * (2 * 2 * 2) + 1 * 2 * 2; // ddp..zero2, zero3
  size_t fullOffloads = 4 * (2 * 2);
  size_t compressed = 4 * (10 * 3 + 1 * 3);
  // ZeRO++'s quantized collectives: qgz and qgz-int4 on every zero2
  // point, those and qwz, qwz+qgz, qwz+qgz-int4 on every zero3 point.
  size_t zeroQuantized = 2 * (10 * 3 * (2 * 2 * 2) + 1 * 3 * (2 * 2)) +
                         5 * (10 * 3 * (2 * 2) + 1 * 3 * (2 * 2));
  size_t splits = 10 + 1;
  EXPECT_EQ(all.size(), size_t(10 * 3 * loraOffloads + 1 * 3 * fullOffloads +
                               compressed + zeroQuantized + splits));
  for (const Knobs &k : all) {
    EXPECT_TRUE(Space::applies(k.compression, k));
    if (k.stages > 1) {
      EXPECT_EQ(k.stages, 2);
      EXPECT_TRUE(k.sharding == "ddp" && k.recompute == "none" &&
                  !k.offloadParams && !k.offloadOptimizer &&
                  !k.offloadActivations && k.compression == "none");
      EXPECT_EQ(knobValue(k, "split"), "2 stages");
    }
  }
  // One rank has no split to offer; --fix pins it either way.
  EXPECT_EQ(spaceOrDie(recipe(1, 1), cluster(1, 1), 0).stages,
            (std::vector<int64_t>{1}));
  EXPECT_EQ(spaceOrDie(recipe(1, 1), cluster(1, 2), 0, {"pipeline_stages=2"})
                .stages,
            (std::vector<int64_t>{2}));
  EXPECT_EQ(spaceOrDie(recipe(1, 1), cluster(1, 2), 0, {"split=none"}).stages,
            (std::vector<int64_t>{1}));
}

TEST(ExploreSpace, FixTakesKnobAndRecipeSpellings) {
  Space space = spaceOrDie(recipe(4, 1), cluster(1, 2), 0,
                           {"quantization=nf4", "gradient_checkpointing=true",
                            "zero_stage=2", "offload_param=cpu",
                            "offload_optimizer=none",
                            "enable_activation_offloading=true",
                            "micro_batch_size=2", "adapter=lora-fa",
                            "gradient_compression=none"});
  std::vector<Knobs> all = space.enumerate();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].weights, "nf4");
  EXPECT_EQ(all[0].recompute, "full");
  EXPECT_EQ(all[0].sharding, "zero2");
  EXPECT_TRUE(all[0].offloadParams);
  EXPECT_FALSE(all[0].offloadOptimizer);
  EXPECT_TRUE(all[0].offloadActivations);
  EXPECT_EQ(knobValue(all[0], "offload"), "param+activations");
  EXPECT_EQ(all[0].microBatch, 2);
  EXPECT_EQ(all[0].accumulation, 2);
  EXPECT_EQ(spaceOrDie(recipe(4, 1), cluster(1, 2), 0,
                       {"fsdp_sharding_strategy=FULL_SHARD"})
                .sharding,
            (std::vector<std::string>{"zero3"}));
}

// Tests that GPTQ is a weights knob exactly when the recipe names a
// calibrated checkpoint, selected by quantization=gptq (the checkpoint's
// settings come with the recipe), and that asking for it without one says
// how to make one.
TEST(ExploreSpace, GptqIsAKnobWithACheckpoint) {
  EXPECT_FALSE(llvm::is_contained(
      spaceOrDie(recipe(1, 1), cluster(1, 1), 0).weights, "gptq"));
  TrainingRecipe calibrated = recipe(1, 1);
  calibrated.gptqCheckpoint = "gptq.safetensors";
  Space space = spaceOrDie(calibrated, cluster(1, 1), 0, {"weights=gptq"});
  ASSERT_EQ(space.weights, (std::vector<std::string>{"gptq"}));
  Knobs k = space.enumerate().front();
  auto keys = recipeKeys(k, calibrated);
  EXPECT_TRUE(llvm::is_contained(
      keys, std::make_pair(std::string("quantization"), std::string("gptq"))));
  EXPECT_EQ(fixError({"weights=gptq"}).rfind(
                "--fix weights=gptq: the recipe names no gptq_checkpoint", 0),
            0u);
}

TEST(ExploreSpace, BadFixesSayWhy) {
  EXPECT_EQ(fixError({"colour=red"}).rfind("--fix colour: not a knob", 0), 0u);
  EXPECT_EQ(fixError({"weights"}), "--fix expects key=value, got 'weights'");
  EXPECT_EQ(fixError({"offload_optimizer=nvme"}),
            "--fix offload_optimizer=nvme: expected cpu/true or none/false");
  EXPECT_EQ(fixError({"weights=fp8"}),
            "--fix weights=fp8: not a value this knob takes here");
  EXPECT_EQ(fixError({"zero_stage=5"}), "--fix zero_stage must be 0..3, got '5'");
  EXPECT_EQ(fixError({"micro_batch_size=3"}),
            "--fix micro_batch_size=3: the global batch of 8 over 2 rank(s) "
            "does not split into micro batches of that size");
  EXPECT_EQ(fixError({"sharding=hybrid"}),
            "--fix sharding=hybrid: not a value this knob takes here");
}

// Tests that gradient compression is a knob on several CPU ranks only
// (none on one rank or on GPUs, where the pass has no kernels), applies to
// DDP without offload, is pinned by --fix in either spelling, and reaches
// the recipe as gradient_compression.
TEST(ExploreKnobs, CompressionIsAKnobOfSeveralCpuRanks) {
  EXPECT_EQ(spaceOrDie(recipe(1, 1), cluster(1, 1), 0).compression,
            (std::vector<std::string>{"none"}));
  HardwareSpec gpus = cluster(1, 2);
  gpus.backend = "cuda";
  EXPECT_EQ(spaceOrDie(recipe(1, 1), gpus, 0).compression,
            (std::vector<std::string>{"none"}));
  EXPECT_EQ(spaceOrDie(recipe(1, 1), cluster(1, 2), 0).compression,
            (std::vector<std::string>{"none", "powersgd", "acp-sgd", "topk",
                                      "signsgd", "qgz", "qgz-int4", "qwz",
                                      "qwz+qgz", "qwz+qgz-int4"}));
  Space space = spaceOrDie(recipe(1, 1), cluster(1, 2), 0,
                           {"gradient_compression=topk"});
  std::vector<Knobs> all = space.enumerate();
  ASSERT_FALSE(all.empty());
  for (const Knobs &k : all) {
    EXPECT_EQ(k.compression, "topk");
    EXPECT_EQ(k.sharding, "ddp");
    EXPECT_EQ(knobValue(k, "offload"), "none");
  }
  EXPECT_TRUE(llvm::is_contained(
      recipeKeys(all.front(), TrainingRecipe()),
      std::make_pair(std::string("gradient_compression"),
                     std::string("topk"))));
  EXPECT_EQ(spaceOrDie(recipe(1, 1), cluster(1, 2), 0,
                       {"compression=signsgd"})
                .compression,
            (std::vector<std::string>{"signsgd"}));
  EXPECT_EQ(fixError({"gradient_compression=randk"}),
            "--fix compression=randk: not a value this knob takes here");
  // A recipe that compresses gets `none` back where a point does not.
  TrainingRecipe compressing;
  compressing.gradientCompression = "powersgd";
  EXPECT_TRUE(llvm::is_contained(
      recipeKeys(Knobs(), compressing),
      std::make_pair(std::string("gradient_compression"),
                     std::string("none"))));
}

// Tests that ZeRO++'s int8 collectives are values of the compression knob
// on the shardings they quantize (qgz: zero2, zero3, hybrid; qwz and
// qwz+qgz: zero3), read back from a recipe's keys, and written as
// zero_quantized_weights / zero_quantized_gradients (false over a base
// recipe's true where a point does not quantize; never a
// gradient_compression method).
TEST(ExploreKnobs, ZeroQuantizationIsAKnobOfShardedPoints) {
  Space space = spaceOrDie(recipe(1, 1), cluster(2, 2), 0);
  int quantizing = 0;
  for (const Knobs &k : space.enumerate()) {
    if (quantizesWeights(k.compression)) {
      EXPECT_TRUE(k.zero3()) << k.sharding;
    }
    if (quantizesGradients(k.compression)) {
      EXPECT_TRUE(k.sharding == "zero2" || k.zero3() || k.sharding == "hybrid")
          << k.sharding;
      ++quantizing;
    }
  }
  EXPECT_GT(quantizing, 0);
  HardwareSpec gpus = cluster(1, 2);
  gpus.backend = "cuda";
  EXPECT_FALSE(
      llvm::is_contained(spaceOrDie(recipe(1, 1), gpus, 0).compression, "qgz"));

  TrainingRecipe both = recipe(1, 1);
  both.sharding = "zero3";
  both.zeroQuantizedWeights = true;
  both.zeroQuantizedGradients = true;
  Knobs k = knobsOf(both, cluster(1, 2));
  EXPECT_EQ(k.compression, "qwz+qgz");
  auto keys = recipeKeys(k, TrainingRecipe());
  EXPECT_TRUE(llvm::is_contained(
      keys, std::make_pair(std::string("zero_quantized_weights"),
                           std::string("true"))));
  EXPECT_TRUE(llvm::is_contained(
      keys, std::make_pair(std::string("zero_quantized_gradients"),
                           std::string("true"))));
  for (const auto &[key, value] : keys) {
    EXPECT_NE(key, "gradient_compression");
  }
  Knobs plain = k;
  plain.compression = "qgz";
  keys = recipeKeys(plain, both);
  EXPECT_TRUE(llvm::is_contained(
      keys, std::make_pair(std::string("zero_quantized_weights"),
                           std::string("false"))));
  EXPECT_TRUE(llvm::is_contained(
      keys, std::make_pair(std::string("zero_quantized_gradients"),
                           std::string("true"))));
  EXPECT_EQ(spaceOrDie(recipe(1, 1), cluster(1, 2), 0, {"compression=qwz"})
                .compression,
            (std::vector<std::string>{"qwz"}));
  // int4 gradients: the knob's -int4 values write the width, 8 over a
  // recipe's 4 where a point quantizes at int8; read back from a recipe.
  Knobs int4 = k;
  int4.compression = "qgz-int4";
  EXPECT_TRUE(llvm::is_contained(
      recipeKeys(int4, TrainingRecipe()),
      std::make_pair(std::string("zero_quantized_gradients_bits"),
                     std::string("4"))));
  TrainingRecipe fourBits = both;
  fourBits.zeroQuantizedGradientsBits = 4;
  EXPECT_EQ(knobsOf(fourBits, cluster(1, 2)).compression, "qwz+qgz-int4");
  EXPECT_TRUE(llvm::is_contained(
      recipeKeys(k, fourBits),
      std::make_pair(std::string("zero_quantized_gradients_bits"),
                     std::string("8"))));
  EXPECT_TRUE(quantizesWeights("qwz+qgz-int4"));
  EXPECT_FALSE(quantizesGradientsInt4("qwz"));
}

// Tests that ZeRO++'s hpZ is a sharding of several nodes of several CPU
// ranks (zero3-hpz, partitioned over a node's ranks), read back from a
// recipe's zero_hpz_partition_size, written as it (1 over a recipe's size
// where a point does not partition), and given ZeRO-3's other values.
TEST(ExploreKnobs, HpzIsAShardingOfSeveralNodes) {
  EXPECT_FALSE(llvm::is_contained(
      spaceOrDie(recipe(1, 1), cluster(1, 4), 0).sharding, "zero3-hpz"));
  HardwareSpec gpus = cluster(2, 2);
  gpus.backend = "cuda";
  EXPECT_FALSE(llvm::is_contained(spaceOrDie(recipe(1, 1), gpus, 0).sharding,
                                  "zero3-hpz"));
  TrainingRecipe kept = recipe(1, 1);
  kept.reshardAfterForward = false;
  EXPECT_FALSE(llvm::is_contained(spaceOrDie(kept, cluster(2, 2), 0).sharding,
                                  "zero3-hpz"));
  Space space =
      spaceOrDie(recipe(1, 1), cluster(2, 4), 0, {"sharding=zero3-hpz"});
  std::vector<Knobs> all = space.enumerate();
  ASSERT_FALSE(all.empty());
  bool quantized = false;
  for (const Knobs &k : all) {
    EXPECT_EQ(k.hpzPartition, 4);
    EXPECT_FALSE(k.offloadParams);
    quantized |= k.compression == "qwz+qgz";
  }
  EXPECT_TRUE(quantized);
  auto keys = recipeKeys(all.front(), TrainingRecipe());
  EXPECT_TRUE(llvm::is_contained(
      keys, std::make_pair(std::string("zero_stage"), std::string("3"))));
  EXPECT_TRUE(llvm::is_contained(
      keys, std::make_pair(std::string("zero_hpz_partition_size"),
                           std::string("4"))));
  TrainingRecipe hpz = recipe(1, 1);
  hpz.sharding = "zero3";
  hpz.zeroHpzPartitionSize = 2;
  Knobs k = knobsOf(hpz, cluster(2, 2));
  EXPECT_EQ(k.sharding, "zero3-hpz");
  EXPECT_EQ(k.hpzPartition, 2);
  Knobs plain = k;
  plain.sharding = "zero3";
  EXPECT_TRUE(
      llvm::is_contained(recipeKeys(plain, hpz),
                         std::make_pair(std::string("zero_hpz_partition_size"),
                                        std::string("1"))));
}

TEST(ExploreKnobs, ABudgetIsTheBudgetPolicy) {
  Knobs k;
  k.recompute = "budget-0.3";
  auto keys = recipeKeys(k, TrainingRecipe());
  EXPECT_TRUE(llvm::is_contained(
      keys, std::make_pair(std::string("gradient_checkpointing"),
                           std::string("false"))));
  EXPECT_TRUE(llvm::is_contained(
      keys, std::make_pair(std::string("activation_memory_budget"),
                           std::string("0.3"))));
  Space space = spaceOrDie(recipe(1, 1), cluster(1, 1), 0,
                           {"recompute=budget-0.25"});
  EXPECT_EQ(space.recompute, (std::vector<std::string>{"budget-0.25"}));
  EXPECT_EQ(fixError({"recompute=budget-2"}),
            "--fix recompute=budget-2: a budget is a fraction in (0, 1]");
  TrainingRecipe budgeted = recipe(1, 1);
  budgeted.recomputePolicy = "budget";
  budgeted.activationMemoryBudget = 0.3;
  EXPECT_EQ(knobsOf(budgeted, cluster(1, 1)).recompute, "budget-0.3");
  EXPECT_TRUE(llvm::is_contained(
      spaceOrDie(budgeted, cluster(1, 1), 0).recompute, "budget-0.3"));
}

TEST(ExploreKnobs, RecipeKeysSelectTheConfiguration) {
  Knobs k;
  k.weights = "nf4-dq";
  k.adapter = "lora-fa";
  k.recompute = "selective";
  k.sharding = "zero3";
  k.microBatch = 2;
  k.accumulation = 4;
  auto keys = recipeKeys(k, TrainingRecipe());
  std::vector<std::pair<std::string, std::string>> expected = {
      {"adapter", "lora-fa"},
      {"quantization", "nf4"},
      {"double_quant", "true"},
      {"gradient_checkpointing", "selective"},
      {"zero_stage", "3"},
      {"offload_param", "none"},
      {"offload_optimizer", "none"},
      {"enable_activation_offloading", "false"},
      {"micro_batch_size", "2"},
      {"gradient_accumulation_steps", "4"}};
  EXPECT_EQ(keys, expected);
  // A recipe that chose FSDP's spelling gets FSDP's spelling back (both
  // keys must agree).
  TrainingRecipe fsdp;
  fsdp.givenKeys.insert("fsdp_sharding_strategy");
  auto fsdpKeys = recipeKeys(k, fsdp);
  EXPECT_TRUE(llvm::is_contained(
      fsdpKeys, std::make_pair(std::string("fsdp_sharding_strategy"),
                               std::string("FULL_SHARD"))));
  EXPECT_FALSE(llvm::any_of(fsdpKeys, [](auto &kv) {
    return kv.first == "zero_stage";
  }));
}

Evaluation evaluation(int64_t peak, double seconds, bool fits,
                      const std::string &recompute = "none") {
  Evaluation e;
  e.devicePeakBytes = peak;
  e.stepSeconds = seconds;
  e.fits = fits;
  e.knobs.recompute = recompute;
  return e;
}

TEST(ExploreChoice, TheFrontIsWhatNothingBeatsFastestFirst) {
  std::vector<Evaluation> all = {
      evaluation(100, 1.0, true),  // fastest
      evaluation(80, 1.5, true),   // on the front
      evaluation(90, 2.0, true),   // beaten by 80/1.5
      evaluation(50, 3.0, true),   // on the front
      evaluation(10, 0.5, false),  // does not fit
      evaluation(50, 3.0, true)};  // a tie with index 3
  EXPECT_EQ(paretoFront(all), (std::vector<size_t>{0, 1, 3}));
}

TEST(ExploreChoice, NearestFitsChangeTheFewestKnobs) {
  Knobs given;
  given.recompute = "none";
  given.microBatch = 4;
  std::vector<Evaluation> all = {evaluation(10, 1.0, true, "full"),
                                 evaluation(20, 0.5, true, "selective"),
                                 evaluation(30, 0.1, false, "none")};
  all[0].knobs.microBatch = 2; // two changes
  all[1].knobs.microBatch = 4; // one change
  all[2].knobs.microBatch = 4; // the given itself, which does not fit
  EXPECT_EQ(nearestFits(all, given, 5), (std::vector<size_t>{1, 0}));
  EXPECT_EQ(describeChange(given, all[0].knobs),
            "recompute none -> full, micro_batch 4x1 -> 2x1");
}

TEST(ExplorePlot, TheSvgHasEveryPointTheFrontAndTheBudget) {
  std::vector<Evaluation> all = {evaluation(1 << 30, 0.1, true),
                                 evaluation(int64_t(3) << 30, 0.05, false),
                                 evaluation(int64_t(1) << 29, 0.2, true)};
  std::string svg = plotSvg(all, paretoFront(all), int64_t(2) << 30,
                            "a <model> & co");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  size_t circles = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos;
       at = svg.find("<circle", at + 1)) {
    ++circles;
  }
  EXPECT_EQ(circles, 4u); // three points and the ring around the best
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("budget 2.0 GiB"), std::string::npos);
  EXPECT_NE(svg.find("a &lt;model&gt; &amp; co"), std::string::npos);
}

} // namespace
} // namespace tailor::explore
