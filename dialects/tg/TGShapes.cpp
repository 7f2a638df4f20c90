//===- TGShapes.cpp - shape rules of tg ops -------------------------------===//

#include "dialects/tg/TGShapes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tailor::tg {

static constexpr int64_t kDynamic = ShapedType::kDynamic;

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os, [&](int64_t dim) {
    if (dim == kDynamic) {
      os << "?";
    } else {
      os << dim;
    }
  });
  os << "]";
  return text;
}

bool dimsCompatible(int64_t a, int64_t b) {
  return a == b || a == kDynamic || b == kDynamic;
}

bool shapesCompatible(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (auto [x, y] : llvm::zip_equal(a, b)) {
    if (!dimsCompatible(x, y)) {
      return false;
    }
  }
  return true;
}

int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim == kDynamic) {
      return kDynamic;
    }
    count *= dim;
  }
  return count;
}

int64_t byteSize(ShapedType type) {
  int64_t count = numElements(type.getShape());
  if (count == kDynamic) {
    return kDynamic;
  }
  Type element = type.getElementType();
  int64_t bits = element.isIntOrFloat() ? element.getIntOrFloatBitWidth() : 0;
  if (auto complex = llvm::dyn_cast<ComplexType>(element)) {
    bits = 2 * complex.getElementType().getIntOrFloatBitWidth();
  }
  return (count * bits + 7) / 8;
}

FailureOr<Shape> broadcastShapes(llvm::ArrayRef<int64_t> lhs,
                                 llvm::ArrayRef<int64_t> rhs,
                                 EmitErrorFn emitError) {
  size_t rank = std::max(lhs.size(), rhs.size());
  Shape result(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right, as NumPy does.
    int64_t a = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t b = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (a == 1) {
      result[i] = b;
    } else if (b == 1) {
      result[i] = a;
    } else if (a == kDynamic) {
      result[i] = b;
    } else if (b == kDynamic || a == b) {
      result[i] = a;
    } else {
      return emitError() << "shapes " << formatShape(lhs) << " and "
                         << formatShape(rhs)
                         << " do not broadcast: dim " << a << " vs " << b;
    }
  }
  return result;
}

FailureOr<Shape> matmulShape(llvm::ArrayRef<int64_t> lhs,
                             llvm::ArrayRef<int64_t> rhs,
                             EmitErrorFn emitError) {
  if (lhs.size() < 2 || rhs.size() < 2) {
    return emitError() << "expected operands of rank >= 2, got "
                       << formatShape(lhs) << " and " << formatShape(rhs);
  }
  int64_t lhsK = lhs.back();
  int64_t rhsK = rhs[rhs.size() - 2];
  if (!dimsCompatible(lhsK, rhsK)) {
    return emitError() << "contraction dims differ: lhs " << formatShape(lhs)
                       << " has K = " << lhsK << " but rhs " << formatShape(rhs)
                       << " has K = " << rhsK;
  }
  FailureOr<Shape> batch =
      broadcastShapes(lhs.drop_back(2), rhs.drop_back(2), emitError);
  if (failed(batch)) {
    return failure();
  }
  Shape result = *batch;
  result.push_back(lhs[lhs.size() - 2]);
  result.push_back(rhs.back());
  return result;
}

FailureOr<Shape> linearShape(llvm::ArrayRef<int64_t> input,
                             llvm::ArrayRef<int64_t> weight,
                             std::optional<llvm::ArrayRef<int64_t>> bias,
                             EmitErrorFn emitError) {
  if (input.empty()) {
    return emitError() << "expected an input of rank >= 1";
  }
  if (weight.size() != 2) {
    return emitError() << "expected a weight of shape [out, in], got "
                       << formatShape(weight);
  }
  if (!dimsCompatible(input.back(), weight[1])) {
    return emitError() << "input features " << input.back()
                       << " do not match weight " << formatShape(weight)
                       << " (expected [out, " << input.back() << "])";
  }
  if (bias && (bias->size() != 1 || !dimsCompatible((*bias)[0], weight[0]))) {
    return emitError() << "expected a bias of shape [" << weight[0]
                       << "], got " << formatShape(*bias);
  }
  Shape result(input.begin(), input.end());
  result.back() = weight[0];
  return result;
}

FailureOr<Shape> reduceShape(llvm::ArrayRef<int64_t> input,
                             llvm::ArrayRef<int64_t> axes, bool keepDims,
                             EmitErrorFn emitError) {
  llvm::SmallBitVector reduced(input.size());
  for (int64_t axis : axes) {
    if (axis < 0 || axis >= static_cast<int64_t>(input.size())) {
      return emitError() << "axis " << axis << " is out of range [0, "
                         << input.size() << ")";
    }
    if (reduced.test(axis)) {
      return emitError() << "axis " << axis << " is listed twice";
    }
    reduced.set(axis);
  }
  Shape result;
  for (auto [i, dim] : llvm::enumerate(input)) {
    if (!reduced.test(i)) {
      result.push_back(dim);
    } else if (keepDims) {
      result.push_back(1);
    }
  }
  return result;
}

FailureOr<Shape> transposeShape(llvm::ArrayRef<int64_t> input,
                                llvm::ArrayRef<int64_t> permutation,
                                EmitErrorFn emitError) {
  if (permutation.size() != input.size()) {
    return emitError() << "expected a permutation of " << input.size()
                       << " dims, got " << permutation.size();
  }
  llvm::SmallBitVector seen(input.size());
  Shape result;
  for (int64_t source : permutation) {
    if (source < 0 || source >= static_cast<int64_t>(input.size()) ||
        seen.test(source)) {
      return emitError() << "permutation " << formatShape(permutation)
                         << " is not a permutation of [0, " << input.size()
                         << ")";
    }
    seen.set(source);
    result.push_back(input[source]);
  }
  return result;
}

FailureOr<Shape> sliceShape(llvm::ArrayRef<int64_t> input,
                            llvm::ArrayRef<int64_t> starts,
                            llvm::ArrayRef<int64_t> ends,
                            llvm::ArrayRef<int64_t> steps,
                            EmitErrorFn emitError) {
  if (starts.size() != input.size() || ends.size() != input.size() ||
      steps.size() != input.size()) {
    return emitError() << "expected " << input.size()
                       << " starts, ends and steps (one per dim), got "
                       << starts.size() << ", " << ends.size() << " and "
                       << steps.size();
  }
  Shape result;
  for (size_t i = 0; i < input.size(); ++i) {
    int64_t dim = input[i];
    if (steps[i] < 1) {
      return emitError() << "step " << steps[i] << " of dim " << i
                         << " must be >= 1";
    }
    if (starts[i] < 0 || starts[i] > ends[i] ||
        (dim != kDynamic && ends[i] > dim)) {
      return emitError() << "slice [" << starts[i] << ", " << ends[i]
                         << ") of dim " << i << " is outside [0, "
                         << (dim == kDynamic ? std::string("?")
                                             : std::to_string(dim))
                         << "]";
    }
    result.push_back((ends[i] - starts[i] + steps[i] - 1) / steps[i]);
  }
  return result;
}

FailureOr<Shape> concatShape(llvm::ArrayRef<Shape> inputs, int64_t axis,
                             EmitErrorFn emitError) {
  if (inputs.empty()) {
    return emitError() << "expected at least one input";
  }
  const Shape &first = inputs.front();
  if (axis < 0 || axis >= static_cast<int64_t>(first.size())) {
    return emitError() << "axis " << axis << " is out of range [0, "
                       << first.size() << ")";
  }
  Shape result = first;
  for (auto [index, shape] : llvm::enumerate(inputs.drop_front())) {
    if (shape.size() != first.size()) {
      return emitError() << "input " << index + 1 << " has rank "
                         << shape.size() << ", expected " << first.size();
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<int64_t>(d) == axis) {
        result[d] = (result[d] == kDynamic || shape[d] == kDynamic)
                        ? kDynamic
                        : result[d] + shape[d];
      } else if (!dimsCompatible(result[d], shape[d])) {
        return emitError() << "input " << index + 1 << " has shape "
                           << formatShape(shape) << ", expected dim " << d
                           << " = " << result[d] << " as in input 0";
      }
    }
  }
  return result;
}

FailureOr<llvm::SmallVector<Shape>> splitShapes(llvm::ArrayRef<int64_t> input,
                                                int64_t axis,
                                                llvm::ArrayRef<int64_t> sizes,
                                                EmitErrorFn emitError) {
  if (axis < 0 || axis >= static_cast<int64_t>(input.size())) {
    return emitError() << "axis " << axis << " is out of range [0, "
                       << input.size() << ")";
  }
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0) {
      return emitError() << "split size " << size << " is negative";
    }
    total += size;
  }
  if (input[axis] != kDynamic && total != input[axis]) {
    return emitError() << "split sizes sum to " << total << " but dim "
                       << axis << " is " << input[axis];
  }
  llvm::SmallVector<Shape> pieces;
  for (int64_t size : sizes) {
    Shape piece(input.begin(), input.end());
    piece[axis] = size;
    pieces.push_back(piece);
  }
  return pieces;
}

FailureOr<Shape> embeddingShape(llvm::ArrayRef<int64_t> table,
                                llvm::ArrayRef<int64_t> ids,
                                EmitErrorFn emitError) {
  if (table.size() != 2) {
    return emitError() << "expected a table of shape [vocab, dim], got "
                       << formatShape(table);
  }
  Shape result(ids.begin(), ids.end());
  result.push_back(table[1]);
  return result;
}

FailureOr<Shape> attentionShape(llvm::ArrayRef<int64_t> query,
                                llvm::ArrayRef<int64_t> key,
                                llvm::ArrayRef<int64_t> value,
                                EmitErrorFn emitError) {
  if (query.size() != 4 || key.size() != 4 || value.size() != 4) {
    return emitError() << "expected q, k, v of rank 4 ([batch, heads, seq, "
                          "head_dim]), got "
                       << formatShape(query) << ", " << formatShape(key)
                       << ", " << formatShape(value);
  }
  if (!dimsCompatible(query[0], key[0]) || !dimsCompatible(key[0], value[0])) {
    return emitError() << "batch dims differ: q " << formatShape(query)
                       << ", k " << formatShape(key) << ", v "
                       << formatShape(value);
  }
  if (!dimsCompatible(key[1], value[1]) || !dimsCompatible(key[2], value[2])) {
    return emitError() << "k " << formatShape(key) << " and v "
                       << formatShape(value)
                       << " must agree in kv heads and key length";
  }
  if (!dimsCompatible(query[3], key[3])) {
    return emitError() << "head dims differ: q has " << query[3]
                       << ", k has " << key[3];
  }
  int64_t queryHeads = query[1], kvHeads = key[1];
  if (queryHeads != kDynamic && kvHeads != kDynamic &&
      (kvHeads == 0 || queryHeads % kvHeads != 0)) {
    return emitError() << "grouped-query attention needs query heads ("
                       << queryHeads << ") to be a multiple of kv heads ("
                       << kvHeads << ")";
  }
  return Shape{query[0], query[1], query[2], value[3]};
}

} // namespace tailor::tg
