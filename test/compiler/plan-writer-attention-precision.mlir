// REQUIRES: cuda-build
// RUN: rm -rf %t && mkdir -p %t
// RUN: sed s/PRECISION/fp16/ %S/Inputs/attention-precision.mlir > %t/fp16.mlir
// RUN: sed s/PRECISION/bf16/ %S/Inputs/attention-precision.mlir > %t/bf16.mlir
// RUN: sed s/PRECISION/fp32/ %S/Inputs/attention-precision.mlir > %t/fp32.mlir
// RUN: tailor-translate --mlir-to-tplan %t/fp16.mlir -o %t/fp16.tplan
// RUN: tailor-translate --mlir-to-tplan %t/bf16.mlir -o %t/bf16.tplan
// RUN: tailor-translate --mlir-to-tplan %t/fp32.mlir -o %t/fp32.tplan
// RUN: tailor inspect %t/fp16.tplan | FileCheck %s --check-prefix=FP16
// RUN: grep -a -o 'tailor_attention_[a-z0-9_]*' %t/fp16.tplan | sort -u > %t/fp16.entries
// RUN: not grep -v '_f32_fp16$' %t/fp16.entries
// RUN: wc -l < %t/fp16.entries | FileCheck %s --check-prefix=ENTRIES
// RUN: tailor inspect %t/bf16.tplan | FileCheck %s --check-prefix=BF16
// RUN: tailor inspect %t/fp32.tplan | FileCheck %s --check-prefix=BF16

// Tests that a CUDA plan embeds the attention module of its precision:
// fp16 plans the module attention_fp16 (half tensor cores), as PTX and a
// cubin, with its 17 entry points and no other attention code; bf16 and
// fp32 plans the module attention (bf16 tensor cores) and not
// attention_fp16. (The entry points are read with grep: they are plain
// flatbuffer strings.)
// FP16-NOT: device code: attention {{ptx|cubin}}
// FP16-DAG: device code: attention_fp16 ptx compute_80 (17 kernels
// FP16-DAG: device code: attention_fp16 cubin sm_90a (17 kernels
// FP16-NOT: device code: attention {{ptx|cubin}}
// ENTRIES: 17
// BF16-NOT: device code: attention_fp16
// BF16-DAG: device code: attention ptx compute_80 (34 kernels
// BF16-DAG: device code: attention cubin sm_90a (34 kernels
// BF16-NOT: device code: attention_fp16
