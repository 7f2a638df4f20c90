# lit configuration for tailor (in the style of mlir/examples/standalone).

import os
import subprocess

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "tailor"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test", ".onnxtxt"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tailor_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%tailor_src_root", config.tailor_src_root))
config.substitutions.append(("%tailor_tools_dir", config.tailor_tools_dir))
config.substitutions.append(("%tailor_lib_dir", os.path.join(config.tailor_obj_root, "lib")))

# The project's Python (bootstrap's venv: onnx, torch, transformers) for tests
# that generate models; tests that need it say `REQUIRES: python-onnx`.
venv_python = os.path.join(config.tailor_src_root, ".venv", "bin", "python")
if os.path.exists(venv_python):
    config.substitutions.append(("%python", venv_python))
    config.available_features.add("python-onnx")

# Captured variables must be redefined per CHECK-LABEL block.
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tool_dirs = [config.tailor_tools_dir, config.llvm_tools_dir]
tools = ["tailor", "tailor-opt", "tailor-translate", "tailor-run", "tailor-embed-example",
         "tailor-embed-train", "tailor-embed-trainer"]
llvm_config.add_tool_substitutions(tools, tool_dirs)


def usable_gpu_count():
    """GPUs the runtime can actually use: the toolkit alone is not enough."""
    if not config.tailor_cuda_built:
        return 0
    try:
        out = subprocess.run(
            [os.path.join(config.tailor_tools_dir, "tailor"), "devices", "--count"],
            capture_output=True, text=True, timeout=60, check=False,
        ).stdout.strip()
        return int(out or "0")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0


# Built with the CUDA toolkit: tailor embeds device code in GPU plans.
if config.tailor_cuda_built:
    config.available_features.add("cuda-build")

if usable_gpu_count() > 0:
    config.available_features.add("cuda")
