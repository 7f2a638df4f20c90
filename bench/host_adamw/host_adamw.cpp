//===- host_adamw.cpp - tailor's host AdamW on tensors a caller gives ------===//
//
// The kernel optimizer offload runs on the host (runtime/cpu's adamw_multi,
// the launch a plan's Host stream makes), driven on raw f32 tensors so
// bench/host_adamw.py can time it against torch.optim.AdamW on the very
// same tensors and check the first step's result against PyTorch's:
//
//   tailor-bench-host-adamw DIR SIZES THREADS ITERS LR BETA1 BETA2 EPS WD
//
// DIR holds param.bin, grad.bin, exp_avg.bin and exp_avg_sq.bin (the
// tensors of SIZES, a comma-separated list of element counts, back to
// back). Step 1 runs once and writes param.out.bin, exp_avg.out.bin and
// exp_avg_sq.out.bin; then ITERS more steps are timed (the kernel zeroes
// the gradients it reads, as a plan's accumulators; the work is the
// same). Prints "ms_per_step <ms>" and "threads <n>".
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernel.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace tailor::runtime;

namespace {

bool readFloats(const std::string &path, std::vector<float> &out, size_t n) {
  std::ifstream file(path, std::ios::binary);
  out.resize(n);
  file.read(reinterpret_cast<char *>(out.data()),
            static_cast<std::streamsize>(n * sizeof(float)));
  return file.gcount() == static_cast<std::streamsize>(n * sizeof(float));
}

bool writeFloats(const std::string &path, const std::vector<float> &data) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char *>(data.data()),
             static_cast<std::streamsize>(data.size() * sizeof(float)));
  return static_cast<bool>(file);
}

Attribute floatAttribute(const char *name, double value) {
  Attribute attribute;
  attribute.kind = Attribute::Kind::Float;
  attribute.name = name;
  attribute.f = value;
  return attribute;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "tailor-bench-host-adamw: %s\n", message.c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 10) {
    return fail("usage: tailor-bench-host-adamw DIR SIZES THREADS ITERS LR "
                "BETA1 BETA2 EPS WD");
  }
  std::string dir = argv[1];
  std::vector<int64_t> sizes;
  std::stringstream list(argv[2]);
  for (std::string item; std::getline(list, item, ',');) {
    sizes.push_back(std::atoll(item.c_str()));
  }
  int threads = std::atoi(argv[3]);
  int iters = std::atoi(argv[4]);
  float lr = std::strtof(argv[5], nullptr);
  size_t total = 0;
  for (int64_t n : sizes) {
    total += static_cast<size_t>(n);
  }
  std::vector<float> param, grad, expAvg, expAvgSq;
  for (auto [name, data] :
       {std::pair<const char *, std::vector<float> *>{"param", &param},
        {"grad", &grad},
        {"exp_avg", &expAvg},
        {"exp_avg_sq", &expAvgSq}}) {
    if (!readFloats(dir + "/" + name + ".bin", *data, total)) {
      return fail(dir + "/" + name + ".bin holds fewer than " +
                  std::to_string(total) + " floats");
    }
  }
  ThreadPool pool(threads);
  KernelCall call;
  call.pool = &pool;
  size_t at = 0;
  for (int64_t n : sizes) {
    for (std::vector<float> *data : {&param, &grad, &expAvg, &expAvgSq}) {
      call.operands.push_back({data->data() + at, DType::F32, {n}});
    }
    at += static_cast<size_t>(n);
  }
  int64_t step = 1;
  float gradScale = 1;
  call.operands.push_back({&lr, DType::F32, {}});
  call.operands.push_back({&step, DType::I64, {}});
  call.operands.push_back({&gradScale, DType::F32, {}});
  call.attributes = Attributes(
      {floatAttribute("beta1", std::atof(argv[6])),
       floatAttribute("beta2", std::atof(argv[7])),
       floatAttribute("epsilon", std::atof(argv[8])),
       floatAttribute("weight_decay", std::atof(argv[9]))});
  const KernelDef *kernel = findCpuKernel("adamw_multi");
  if (std::string problem = kernel->check(call); !problem.empty()) {
    return fail(problem);
  }
  if (std::string problem = kernel->run(call); !problem.empty()) {
    return fail(problem);
  }
  if (!writeFloats(dir + "/param.out.bin", param) ||
      !writeFloats(dir + "/exp_avg.out.bin", expAvg) ||
      !writeFloats(dir + "/exp_avg_sq.out.bin", expAvgSq)) {
    return fail("cannot write the results into " + dir);
  }
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    ++step;
    if (std::string problem = kernel->run(call); !problem.empty()) {
      return fail(problem);
    }
  }
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  std::printf("ms_per_step %.4f\nthreads %d\n", ms / std::max(iters, 1),
              threads);
  return 0;
}
