//===- CudaDeviceBackend.cpp - the "cuda" test backend: a real GPU --------===//
//
// Runs the launchers on GPU TAILOR_CUDA_DEVICE (default 0) with the device
// code nvcc built for this tree (codegen/cuda/, or TAILOR_CUDA_MODULE_DIR):
// the cubin for the GPU's SM when there is one, else the PTX. Without CUDA in the build, or without a
// usable GPU, every test skips saying why.
//
//===----------------------------------------------------------------------===//

#include "test/runtime/cuda/CudaTestUtil.h"

#if TAILOR_ENABLE_CUDA
#include "runtime/cuda/DeviceContext.h"
#include "runtime/cuda/DeviceImage.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <iterator>
#endif

namespace tailor::runtime::cuda::testing {

#if TAILOR_ENABLE_CUDA
namespace {

class DeviceBackend final : public TestBackend {
public:
  ~DeviceBackend() override {
    deviceContext.reset();
    for (void *p : allocations) {
      cudaFree(p);
    }
    if (stream) {
      cudaStreamDestroy(stream);
    }
  }
  const char *name() const override { return "cuda"; }
  void *allocate(size_t bytes) override {
    void *p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 256)) != cudaSuccess) {
      ADD_FAILURE() << "cudaMalloc of " << bytes << " bytes failed";
      return nullptr;
    }
    cudaMemset(p, 0, std::max<size_t>(bytes, 256));
    allocations.push_back(p);
    return p;
  }
  void upload(void *device, const void *host, size_t bytes) override {
    cudaStreamSynchronize(stream);
    EXPECT_EQ(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  void download(void *host, const void *device, size_t bytes) override {
    cudaStreamSynchronize(stream);
    EXPECT_EQ(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  LaunchContext &context() override { return *deviceContext; }
  void setHalfCompute(HalfCompute format) override {
    deviceContext->setHalfCompute(format);
  }
  std::string synchronize() override {
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) {
      e = cudaGetLastError();
    }
    return e == cudaSuccess ? "" : cudaCallError("cudaStreamSynchronize", e);
  }

  std::unique_ptr<DeviceContext> deviceContext;
  cudaStream_t stream = nullptr;
  std::vector<void *> allocations;
  std::vector<std::vector<uint8_t>> images;
  std::vector<std::string> modules;
};

std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(file)),
                              std::istreambuf_iterator<char>());
}

} // namespace

std::unique_ptr<TestBackend> makeCudaDeviceBackend(std::string &why) {
  const std::string prefix = "no GPU for the cuda backend: ";
  DeviceProperties device;
  if (std::string problem = openDevice(defaultDeviceOrdinal(), device);
      !problem.empty()) {
    why = prefix + problem;
    return nullptr;
  }
  auto backend = std::make_unique<DeviceBackend>();
  // The build's device code, or a copy elsewhere (a bundle carried to a GPU
  // machine): TAILOR_CUDA_MODULE_DIR.
  const char *override = std::getenv("TAILOR_CUDA_MODULE_DIR");
  const std::string dir =
      override && *override ? override : TAILOR_TEST_CUDA_MODULE_DIR;
  // Every module in the directory: its cubin for this GPU, else its newest
  // PTX this GPU can compile (compute_80 over compute_75).
  std::map<std::string, std::string> chosen; // module -> file
  std::map<std::string, int> chosenPtx;      // module -> its PTX's SM
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    size_t dot = name.find('.');
    if (dot == std::string::npos) {
      continue;
    }
    std::string module = name.substr(0, dot);
    bool isPtx = name.size() > 4 && name.compare(name.size() - 4, 4, ".ptx") == 0;
    bool isCubin = name.size() > 6 && name.compare(name.size() - 6, 6, ".cubin") == 0;
    if (isCubin) {
      std::vector<uint8_t> bytes = readFile(entry.path().string());
      DeviceImageInfo info;
      std::string arch = name.substr(dot + 1, name.size() - dot - 7);
      if (readCubin(bytes.data(), bytes.size(), info).empty() &&
          cubinRunsOn(info.sm, arch.back() == 'a', device.sm)) {
        chosen[module] = entry.path().string();
        chosenPtx.erase(module);
      }
    } else if (isPtx) {
      // "attention.compute_80.ptx" -> 80.
      int sm = std::atoi(name.c_str() + name.find("compute_") + 8);
      bool better = !chosen.count(module) ||
                    (chosenPtx.count(module) && chosenPtx[module] < sm);
      if (name.find("compute_") != std::string::npos && sm <= device.sm &&
          better) {
        chosen[module] = entry.path().string();
        chosenPtx[module] = sm;
      }
    }
  }
  // A cubin found after the PTX of its module replaces it above; a PTX
  // found after a cubin must not (a cubin leaves no chosenPtx entry).
  for (const auto &[module, path] : chosen) {
    std::vector<uint8_t> bytes = readFile(path);
    if (path.size() > 4 && path.compare(path.size() - 4, 4, ".ptx") == 0) {
      bytes.push_back(0); // PTX is loaded as a C string
    }
    backend->images.push_back(std::move(bytes));
    backend->modules.push_back(module);
  }
  if (backend->images.empty()) {
    why = "the cuda backend has no device code in " + dir;
    return nullptr;
  }
  if (cudaStreamCreate(&backend->stream) != cudaSuccess) {
    why = prefix + "cudaStreamCreate failed";
    return nullptr;
  }
  size_t workspaceBytes = 32u << 20;
  void *workspace = backend->allocate(workspaceBytes);
  std::string error;
  std::vector<DeviceContext::Image> images;
  for (size_t i = 0; i < backend->images.size(); ++i) {
    images.push_back({backend->modules[i], backend->images[i].data(),
                      backend->images[i].size()});
  }
  backend->deviceContext = DeviceContext::create(device, images, workspace,
                                                 workspaceBytes, HalfCompute::None, error);
  if (!backend->deviceContext) {
    why = "cannot load the device code on " + device.name + ": " + error;
    return nullptr;
  }
  backend->deviceContext->setStream(backend->stream);
  return backend;
}
#else
std::unique_ptr<TestBackend> makeCudaDeviceBackend(std::string &why) {
  why = "no GPU for the cuda backend: this build has no CUDA "
        "(TAILOR_ENABLE_CUDA=OFF)";
  return nullptr;
}
#endif

} // namespace tailor::runtime::cuda::testing
