//===- ElementwiseKernels.cu - unary maps, broadcasting binaries, cast ----===//
//
// Layout: every operand dense and row-major. Unary maps, is_nan and cast walk
// x and y as one flat range; binary ops and select walk the output's index
// space with the inputs broadcast into it (NumPy rules), after the launcher
// (runtime/cuda/ElementwiseLaunchers.cpp) has collapsed it as the CPU's
// BroadcastPlan does: extent-1 dimensions dropped, dimensions every operand
// walks contiguously merged. y may alias a same-shaped input: each thread
// reads and writes the same elements, so in-place updates are safe.
//
// Precision: f32 and bf16 storage both compute in f32 (bf16 through
// tl::load-style widening, rounded to nearest even on the store); the math
// is the precise CUDA library (expf, not __expf), and sigmoid, silu, rsqrt,
// reciprocal and gelu use the CPU kernel's formulas term for term, so the
// two backends agree within a few f32 ulp. Integer ops are the CPU kernel's:
// add, sub and mul wrap, division truncates toward zero (x / -1 negates with
// wraparound), pow works by squaring. Integer division by zero, a run error
// on the CPU, gives 0 here and is reported in the device error record by a
// pass over the divisors the launcher runs first (nonzeroDivisors below).
//
// Shape: these kernels are memory-bound, so the design goal is full-width
// coalesced accesses and no integer division per element:
//   - flat maps (unary, cast) move 16-byte packs per thread in a
//     grid-stride loop when every pointer is aligned, with one extra slot
//     per walk for the tail that is not a whole pack;
//   - binary ops and select see the collapsed space as rows (every
//     dimension but the innermost) by columns (the innermost), on 2-D
//     blocks: rows on y, column packs on x, so short rows stack in one
//     block. A thread finds its row's input offsets once (one 64-bit
//     div/mod per outer dimension) and then walks columns with stride 0 or
//     1 per input; a broadcast input is read once per pack. Same shapes,
//     scalars, a bias row, a per-row column and head-broadcast masks all
//     take this one path.
// Entry points are instantiated per op and storage type (suffix f32, bf16,
// i32, i64, bool) so the inner loops carry no switch.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Device.cuh"
#include "codegen/cuda/ElementwiseMath.cuh"

namespace tl {
namespace ew {

typedef unsigned char u8;

/// The most outer dimensions a broadcast walk takes (8 with the columns);
/// the launcher rejects broadcasts that do not collapse this far (none
/// that a model produces).
constexpr int kMaxRank = 7;

/// A collapsed broadcast space as rows x cols. Row r's coordinates in the
/// outer dimensions (dimension 0 the innermost of them, `rank` of them;
/// `rows` is their product) give input i's row offset through
/// strides[i][d]; columns step colStride[i] (0 or 1). y is dense. `vec`
/// says the launcher found every row of every packed operand aligned.
/// Mirrored by the launcher's BroadcastWalk.
struct Walk {
  i64 rows, cols, vec, rank;
  i64 extents[kMaxRank];
  i64 strides[3][kMaxRank];
  i64 colStride[3];
};

/// V elements moved as one aligned access (16 bytes for the widest packs).
template <typename T, int V> struct alignas(sizeof(T) * V) Pack { T v[V]; };

template <typename A, typename B> struct IsSame {
  static constexpr bool value = false;
};
template <typename A> struct IsSame<A, A> {
  static constexpr bool value = true;
};

/// Elements per 16-byte pack.
template <typename T> struct PackOf {
  static constexpr int value = int(16 / sizeof(T));
};

//===----------------------------------------------------------------------===//
// Storage <-> compute values: floats compute in f32, integers in their own
// type, bool (one byte) as int.
//===----------------------------------------------------------------------===//

TL_DEVICE float widen(float x) { return x; }
TL_DEVICE float widen(bf16 x) { return toFloat(x); }
TL_DEVICE int widen(int x) { return x; }
TL_DEVICE i64 widen(i64 x) { return x; }
TL_DEVICE int widen(u8 x) { return x; }

TL_DEVICE void put(float &d, float v) { d = v; }
TL_DEVICE void put(bf16 &d, float v) { d = toBf16(v); }
TL_DEVICE void put(int &d, int v) { d = v; }
TL_DEVICE void put(i64 &d, i64 v) { d = v; }
TL_DEVICE void put(u8 &d, int v) { d = u8(v); }

//===----------------------------------------------------------------------===//
// Unary ops on f32 values.
//===----------------------------------------------------------------------===//

// The activations' formulas live in ElementwiseMath.cuh, shared with the
// generated fused kernels.

struct Neg {
  static TL_DEVICE float apply(float x) { return -x; }
};
struct Abs {
  static TL_DEVICE float apply(float x) { return fabsf(x); }
};
struct Exp {
  static TL_DEVICE float apply(float x) { return expf(x); }
};
struct Log {
  static TL_DEVICE float apply(float x) { return logf(x); }
};
struct Sqrt {
  static TL_DEVICE float apply(float x) { return sqrtf(x); }
};
struct Rsqrt {
  static TL_DEVICE float apply(float x) { return math::rsqrt(x); }
};
struct Reciprocal {
  static TL_DEVICE float apply(float x) { return math::reciprocal(x); }
};
struct Tanh {
  static TL_DEVICE float apply(float x) { return tanhf(x); }
};
struct Sigmoid {
  static TL_DEVICE float apply(float x) { return math::sigmoid(x); }
};
struct Silu {
  static TL_DEVICE float apply(float x) { return math::silu(x); }
};
struct Relu {
  static TL_DEVICE float apply(float x) { return math::relu(x); }
};
struct Erf {
  static TL_DEVICE float apply(float x) { return erff(x); }
};
struct Sin {
  static TL_DEVICE float apply(float x) { return sinf(x); }
};
struct Cos {
  static TL_DEVICE float apply(float x) { return cosf(x); }
};
struct GeluErf {
  static TL_DEVICE float apply(float x) { return math::gelu(x); }
};
struct GeluTanh {
  static TL_DEVICE float apply(float x) { return math::geluTanh(x); }
};
struct IsNan {
  static TL_DEVICE int apply(float x) { return x != x; }
};

//===----------------------------------------------------------------------===//
// Binary ops on compute values (float, int, i64; compares also bool as int).
//===----------------------------------------------------------------------===//

/// a^b for integers by squaring; negative exponents truncate toward zero
/// like 1 / a^-b (so only |a| = 1 survives), as the CPU kernel.
template <typename T, typename U> TL_DEVICE T intPow(T a, T b) {
  if (b < 0) {
    return a == 1 ? T(1) : a == -1 ? (b % 2 ? T(-1) : T(1)) : T(0);
  }
  U result = 1;
  U base = U(a);
  for (U e = U(b); e; e >>= 1) {
    if (e & 1) {
      result *= base;
    }
    base *= base;
  }
  return T(result);
}

/// Integer division truncating toward zero; x / -1 negates with wraparound
/// (INT_MIN / -1 must not trap) and x / 0 gives 0 (see the file comment).
template <typename T, typename U> TL_DEVICE T intDiv(T a, T b) {
  return b == 0 ? T(0) : b == -1 ? T(U(0) - U(a)) : T(a / b);
}

struct Add {
  static TL_DEVICE float apply(float a, float b) { return a + b; }
  static TL_DEVICE int apply(int a, int b) { return int(u32(a) + u32(b)); }
  static TL_DEVICE i64 apply(i64 a, i64 b) { return i64(u64(a) + u64(b)); }
};
struct Sub {
  static TL_DEVICE float apply(float a, float b) { return a - b; }
  static TL_DEVICE int apply(int a, int b) { return int(u32(a) - u32(b)); }
  static TL_DEVICE i64 apply(i64 a, i64 b) { return i64(u64(a) - u64(b)); }
};
struct Mul {
  static TL_DEVICE float apply(float a, float b) { return a * b; }
  static TL_DEVICE int apply(int a, int b) { return int(u32(a) * u32(b)); }
  static TL_DEVICE i64 apply(i64 a, i64 b) { return i64(u64(a) * u64(b)); }
};
struct Div {
  static TL_DEVICE float apply(float a, float b) { return a / b; }
  static TL_DEVICE int apply(int a, int b) { return intDiv<int, u32>(a, b); }
  static TL_DEVICE i64 apply(i64 a, i64 b) { return intDiv<i64, u64>(a, b); }
};
struct Pow {
  static TL_DEVICE float apply(float a, float b) { return powf(a, b); }
  static TL_DEVICE int apply(int a, int b) { return intPow<int, u32>(a, b); }
  static TL_DEVICE i64 apply(i64 a, i64 b) { return intPow<i64, u64>(a, b); }
};
struct Max {
  // NaN in either operand wins, as in torch.maximum (and the CPU kernel).
  template <typename T> static TL_DEVICE T apply(T a, T b) {
    return a != a ? a : (a > b ? a : b);
  }
};
struct Min {
  template <typename T> static TL_DEVICE T apply(T a, T b) {
    return a != a ? a : (a < b ? a : b);
  }
};
struct Eq {
  template <typename T> static TL_DEVICE int apply(T a, T b) { return a == b; }
};
struct Lt {
  template <typename T> static TL_DEVICE int apply(T a, T b) { return a < b; }
};
struct Gt {
  template <typename T> static TL_DEVICE int apply(T a, T b) { return a > b; }
};

//===----------------------------------------------------------------------===//
// Flat maps: unary, is_nan, cast.
//===----------------------------------------------------------------------===//

/// y[i] = F(x[i]) over n elements. V > 1 moves packs (pointers aligned);
/// slot n / V then takes the n % V tail.
template <int V, typename F, typename TX, typename TY>
TL_DEVICE void flatMapBody(const TX *x, TY *y, i64 n, F f) {
  const i64 packs = n / V;
  const i64 slots = packs + (packs * V < n ? 1 : 0);
  for (i64 s = globalThread(); s < slots; s += gridThreads()) {
    if (s < packs) {
      Pack<TX, V> in = reinterpret_cast<const Pack<TX, V> *>(x)[s];
      Pack<TY, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        out.v[k] = f(in.v[k]);
      }
      reinterpret_cast<Pack<TY, V> *>(y)[s] = out;
    } else {
      for (i64 i = packs * V; i < n; ++i) {
        y[i] = f(x[i]);
      }
    }
  }
}

template <int V, typename F, typename TX, typename TY>
TL_DEVICE void flatMap(const TX *x, TY *y, i64 n, int vec, F f) {
  if (vec) {
    flatMapBody<V>(x, y, n, f);
  } else {
    flatMapBody<1>(x, y, n, f);
  }
}

template <typename Op, typename T> struct UnaryFn {
  TL_DEVICE T operator()(T x) const {
    T r;
    put(r, Op::apply(widen(x)));
    return r;
  }
};

template <typename Op, typename T>
TL_DEVICE void unary(const T *x, T *y, i64 n, int vec) {
  flatMap<PackOf<T>::value>(x, y, n, vec, UnaryFn<Op, T>());
}

template <typename T> struct IsNanFn {
  TL_DEVICE u8 operator()(T x) const { return u8(IsNan::apply(widen(x))); }
};

/// Float to integer truncating toward zero; NaN reads 0 and out-of-range
/// values saturate, as the CPU kernel defines them.
template <typename To> TL_DEVICE To floatToInt(float x) {
  const float lo =
      IsSame<To, int>::value ? -2147483648.0f : -9223372036854775808.0f;
  const float hi = -lo; // 2^31 or 2^63, exact in f32
  const To top =
      IsSame<To, int>::value ? To(2147483647) : To(9223372036854775807LL);
  float c = x != x ? 0.0f : x;
  c = c < lo ? lo : c;
  return c >= hi ? top : To(c);
}

template <typename T> TL_DEVICE constexpr bool isFloatish() {
  return IsSame<T, float>::value || IsSame<T, bf16>::value;
}

template <typename To> TL_DEVICE To fromFloat(float v) {
  To r;
  put(r, v);
  return r;
}

template <typename From, typename To> struct CastFn {
  TL_DEVICE To operator()(From x) const {
    if constexpr (IsSame<To, u8>::value) {
      return u8(widen(x) != 0); // NaN != 0: true, as the CPU
    } else if constexpr (IsSame<From, u8>::value) {
      if constexpr (isFloatish<To>()) {
        return fromFloat<To>(x != 0 ? 1.0f : 0.0f);
      } else {
        return To(x != 0 ? 1 : 0);
      }
    } else if constexpr (isFloatish<From>() && !isFloatish<To>()) {
      return floatToInt<To>(widen(x));
    } else if constexpr (isFloatish<To>()) {
      // From a float or an integer: through f32 (as PyTorch's bf16 does).
      return fromFloat<To>(float(widen(x)));
    } else {
      return To(x); // integer narrowing wraps, as static_cast on the CPU
    }
  }
};

/// Casts pack 4 elements whatever the types: 16 bytes of f32 or i32, 8 of
/// bf16, 32 of i64 (two accesses), 4 of bool.
constexpr int kCastPack = 4;

//===----------------------------------------------------------------------===//
// Broadcasting walks: binary ops and select.
//===----------------------------------------------------------------------===//

/// V consecutive outputs of a binary op at y, from inputs at a and b that
/// step ca and cb (0 or 1) per column: a broadcast input is read once.
template <typename Op, int V, typename T, typename R>
TL_DEVICE void binaryPack(const T *a, i64 ca, const T *b, i64 cb, R *y) {
  Pack<T, V> pa, pb;
  if (ca) {
    pa = *reinterpret_cast<const Pack<T, V> *>(a);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      pa.v[k] = a[0];
    }
  }
  if (cb) {
    pb = *reinterpret_cast<const Pack<T, V> *>(b);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      pb.v[k] = b[0];
    }
  }
  Pack<R, V> out;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    put(out.v[k], Op::apply(widen(pa.v[k]), widen(pb.v[k])));
  }
  *reinterpret_cast<Pack<R, V> *>(y) = out;
}

/// Input offsets of row r: one 64-bit div/mod per outer dimension.
template <int Inputs>
TL_DEVICE void rowOffsets(const Walk &w, i64 r, i64 (&off)[3]) {
#pragma unroll
  for (int k = 0; k < Inputs; ++k) {
    off[k] = 0;
  }
#pragma unroll
  for (int d = 0; d < kMaxRank; ++d) {
    if (d >= w.rank) {
      break;
    }
    const i64 e = w.extents[d];
    const i64 q = r / e;
    const i64 idx = r - q * e;
    r = q;
#pragma unroll
    for (int k = 0; k < Inputs; ++k) {
      off[k] += idx * w.strides[k][d];
    }
  }
}

/// Rows on the block's and grid's y, column slots on x: a slot is a pack
/// of V columns, and slot cols / V takes the row's tail when V does not
/// divide it (then rows is 1: the launcher asks for packs only where every
/// row starts aligned).
template <typename Op, int V, typename T, typename R>
TL_DEVICE void binaryBody(const T *a, const T *b, R *y, const Walk &w) {
  const i64 packs = w.cols / V;
  const i64 slots = packs + (packs * V < w.cols ? 1 : 0);
  const i64 ca = w.colStride[0], cb = w.colStride[1];
  const i64 rowStep = i64(gridDim.y) * blockDim.y;
  const i64 slotStep = i64(gridDim.x) * blockDim.x;
  const i64 firstSlot = i64(blockIdx.x) * blockDim.x + threadIdx.x;
  if (firstSlot >= slots) {
    return; // spare lanes of a row rounded up to a power of two
  }
  for (i64 r = i64(blockIdx.y) * blockDim.y + threadIdx.y; r < w.rows;
       r += rowStep) {
    i64 off[3];
    rowOffsets<2>(w, r, off);
    const T *ar = a + off[0];
    const T *br = b + off[1];
    R *yr = y + r * w.cols;
    for (i64 s = firstSlot; s < slots; s += slotStep) {
      if (s < packs) {
        const i64 c = s * V;
        binaryPack<Op, V>(ar + c * ca, ca, br + c * cb, cb, yr + c);
      } else {
        for (i64 c = packs * V; c < w.cols; ++c) {
          binaryPack<Op, 1>(ar + c * ca, ca, br + c * cb, cb, yr + c);
        }
      }
    }
  }
}

template <typename Op, typename T, typename R>
TL_DEVICE void binary(const T *a, const T *b, R *y, const Walk &w) {
  if (w.vec) {
    binaryBody<Op, PackOf<T>::value>(a, b, y, w);
  } else {
    binaryBody<Op, 1>(a, b, y, w);
  }
}

/// select moves elements as same-sized unsigned integers: it never looks at
/// values, so one instantiation per element size serves every dtype. It is
/// rarer than arithmetic and gets no packs.
template <typename T>
TL_DEVICE void selectWalk(const u8 *c, const T *a, const T *b, T *y,
                          const Walk &w) {
  const i64 cc = w.colStride[0], ca = w.colStride[1], cb = w.colStride[2];
  const i64 rowStep = i64(gridDim.y) * blockDim.y;
  const i64 colStep = i64(gridDim.x) * blockDim.x;
  const i64 firstCol = i64(blockIdx.x) * blockDim.x + threadIdx.x;
  if (firstCol >= w.cols) {
    return;
  }
  for (i64 r = i64(blockIdx.y) * blockDim.y + threadIdx.y; r < w.rows;
       r += rowStep) {
    i64 off[3];
    rowOffsets<3>(w, r, off);
    const u8 *cr = c + off[0];
    const T *ar = a + off[1];
    const T *br = b + off[2];
    T *yr = y + r * w.cols;
    for (i64 j = firstCol; j < w.cols; j += colStep) {
      yr[j] = cr[j * cc] ? ar[j * ca] : br[j * cb];
    }
  }
}

//===----------------------------------------------------------------------===//
// Band mask: y[..., i, j] = inside when lower <= j - i <= upper, else
// outside. Rows of y (every leading index and i) on grid y, columns on
// threads: one comparison per element, coalesced stores, no division
// inside the column loop.
//===----------------------------------------------------------------------===//

template <typename T> TL_DEVICE T bandValue(double v) { return T(v); }
template <> TL_DEVICE bf16 bandValue<bf16>(double v) {
  return toBf16(float(v));
}
template <> TL_DEVICE u8 bandValue<u8>(double v) { return u8(v != 0.0); }

template <typename T>
TL_DEVICE void bandMask(T *y, i64 rowsTotal, i64 rows, i64 cols, i64 lower,
                        i64 upper, T inside, T outside) {
  for (i64 r = blockIdx.y; r < rowsTotal; r += gridDim.y) {
    i64 i = r % rows;
    T *row = y + r * cols;
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < cols;
         j += i64(gridDim.x) * blockDim.x) {
      i64 d = j - i;
      row[j] = (d >= lower && d <= upper) ? inside : outside;
    }
  }
}

} // namespace ew
} // namespace tl

//===----------------------------------------------------------------------===//
// Entry points.
//===----------------------------------------------------------------------===//

#define TL_EW_UNARY(name, Op, T, sfx)                                          \
  TL_GLOBAL void tailor_##name##_##sfx(const T *x, T *y, long long n,          \
                                       int vec) {                              \
    ::tl::ew::unary<::tl::ew::Op>(x, y, n, vec);                               \
  }                                                                            \
  TL_REGISTER(tailor_##name##_##sfx)

#define TL_EW_UNARY_FLOATS(name, Op)                                           \
  TL_EW_UNARY(name, Op, float, f32)                                            \
  TL_EW_UNARY(name, Op, ::tl::bf16, bf16)

TL_EW_UNARY_FLOATS(neg, Neg)
TL_EW_UNARY_FLOATS(abs, Abs)
TL_EW_UNARY_FLOATS(exp, Exp)
TL_EW_UNARY_FLOATS(log, Log)
TL_EW_UNARY_FLOATS(sqrt, Sqrt)
TL_EW_UNARY_FLOATS(rsqrt, Rsqrt)
TL_EW_UNARY_FLOATS(reciprocal, Reciprocal)
TL_EW_UNARY_FLOATS(tanh, Tanh)
TL_EW_UNARY_FLOATS(sigmoid, Sigmoid)
TL_EW_UNARY_FLOATS(silu, Silu)
TL_EW_UNARY_FLOATS(relu, Relu)
TL_EW_UNARY_FLOATS(erf, Erf)
TL_EW_UNARY_FLOATS(sin, Sin)
TL_EW_UNARY_FLOATS(cos, Cos)
TL_EW_UNARY_FLOATS(gelu, GeluErf)
TL_EW_UNARY_FLOATS(gelu_tanh, GeluTanh)

#define TL_EW_IS_NAN(T, sfx)                                                   \
  TL_GLOBAL void tailor_is_nan_##sfx(const T *x, unsigned char *y,             \
                                     long long n, int vec) {                   \
    ::tl::ew::flatMap<::tl::ew::PackOf<T>::value>(x, y, n, vec,                \
                                                  ::tl::ew::IsNanFn<T>());     \
  }                                                                            \
  TL_REGISTER(tailor_is_nan_##sfx)

TL_EW_IS_NAN(float, f32)
TL_EW_IS_NAN(::tl::bf16, bf16)

#define TL_EW_CAST(From, fromSfx, To, toSfx)                                   \
  TL_GLOBAL void tailor_cast_##fromSfx##_##toSfx(const From *x, To *y,         \
                                                 long long n, int vec) {       \
    ::tl::ew::flatMap<::tl::ew::kCastPack>(x, y, n, vec,                       \
                                           ::tl::ew::CastFn<From, To>());      \
  }                                                                            \
  TL_REGISTER(tailor_cast_##fromSfx##_##toSfx)

#define TL_EW_CAST_FROM(From, fromSfx)                                         \
  TL_EW_CAST(From, fromSfx, float, f32)                                        \
  TL_EW_CAST(From, fromSfx, ::tl::bf16, bf16)                                  \
  TL_EW_CAST(From, fromSfx, int, i32)                                          \
  TL_EW_CAST(From, fromSfx, long long, i64)                                    \
  TL_EW_CAST(From, fromSfx, unsigned char, bool)

TL_EW_CAST_FROM(float, f32)
TL_EW_CAST_FROM(::tl::bf16, bf16)
TL_EW_CAST_FROM(int, i32)
TL_EW_CAST_FROM(long long, i64)
TL_EW_CAST_FROM(unsigned char, bool)

#define TL_EW_BINARY(name, Op, T, R, sfx)                                      \
  TL_GLOBAL void tailor_##name##_##sfx(const T *a, const T *b, R *y,           \
                                       ::tl::ew::Walk w) {                     \
    ::tl::ew::binary<::tl::ew::Op>(a, b, y, w);                                \
  }                                                                            \
  TL_REGISTER(tailor_##name##_##sfx)

#define TL_EW_ARITH(name, Op)                                                  \
  TL_EW_BINARY(name, Op, float, float, f32)                                    \
  TL_EW_BINARY(name, Op, ::tl::bf16, ::tl::bf16, bf16)                         \
  TL_EW_BINARY(name, Op, int, int, i32)                                        \
  TL_EW_BINARY(name, Op, long long, long long, i64)

TL_EW_ARITH(add, Add)
TL_EW_ARITH(sub, Sub)
TL_EW_ARITH(mul, Mul)
TL_EW_ARITH(div, Div)
TL_EW_ARITH(pow, Pow)
TL_EW_ARITH(max, Max)
TL_EW_ARITH(min, Min)

#define TL_EW_COMPARE(name, Op)                                                \
  TL_EW_BINARY(name, Op, float, unsigned char, f32)                            \
  TL_EW_BINARY(name, Op, ::tl::bf16, unsigned char, bf16)                      \
  TL_EW_BINARY(name, Op, int, unsigned char, i32)                              \
  TL_EW_BINARY(name, Op, long long, unsigned char, i64)                        \
  TL_EW_BINARY(name, Op, unsigned char, unsigned char, bool)

TL_EW_COMPARE(eq, Eq)
TL_EW_COMPARE(lt, Lt)
TL_EW_COMPARE(gt, Gt)

// Integer div's divisors, checked before the division: one coalesced read
// of b (in practice a scalar or a short vector for integer division, the
// only case that runs it), reporting a zero element as the CPU kernel's
// run error (kDivByZero, DeviceError.cuh); the division's own loop stays
// free of it.
#define TL_EW_NONZERO_DIVISORS(T, sfx)                                         \
  TL_GLOBAL void tailor_nonzero_divisors_##sfx(                                \
      const T *b, long long n, ::tl::ErrorRecord *error, int site) {           \
    for (long long i = ::tl::globalThread(); i < n;                            \
         i += ::tl::gridThreads()) {                                           \
      if (b[i] == 0) {                                                         \
        ::tl::reportError(error, ::tl::kDivByZero, site, 0, i, 0);             \
      }                                                                        \
    }                                                                          \
  }                                                                            \
  TL_REGISTER(tailor_nonzero_divisors_##sfx)

TL_EW_NONZERO_DIVISORS(int, i32)
TL_EW_NONZERO_DIVISORS(long long, i64)

#define TL_EW_SELECT(T, sfx)                                                   \
  TL_GLOBAL void tailor_select_##sfx(const unsigned char *c, const T *a,       \
                                     const T *b, T *y, ::tl::ew::Walk w) {     \
    ::tl::ew::selectWalk(c, a, b, y, w);                                       \
  }                                                                            \
  TL_REGISTER(tailor_select_##sfx)

TL_EW_SELECT(unsigned char, b8)
TL_EW_SELECT(unsigned short, b16)
TL_EW_SELECT(unsigned int, b32)
TL_EW_SELECT(unsigned long long, b64)

#define TL_EW_BAND_MASK(T, sfx)                                                \
  TL_GLOBAL void tailor_band_mask_##sfx(T *y, long long rowsTotal,             \
                                        long long rows, long long cols,        \
                                        long long lower, long long upper,      \
                                        double inside, double outside) {       \
    ::tl::ew::bandMask(y, rowsTotal, rows, cols, lower, upper,                 \
                       ::tl::ew::bandValue<T>(inside),                         \
                       ::tl::ew::bandValue<T>(outside));                       \
  }                                                                            \
  TL_REGISTER(tailor_band_mask_##sfx)

TL_EW_BAND_MASK(float, f32)
TL_EW_BAND_MASK(::tl::bf16, bf16)
TL_EW_BAND_MASK(int, i32)
TL_EW_BAND_MASK(long long, i64)
TL_EW_BAND_MASK(unsigned char, bool)

#undef TL_EW_BAND_MASK
#undef TL_EW_SELECT
#undef TL_EW_NONZERO_DIVISORS
#undef TL_EW_COMPARE
#undef TL_EW_ARITH
#undef TL_EW_BINARY
#undef TL_EW_CAST_FROM
#undef TL_EW_CAST
#undef TL_EW_IS_NAN
#undef TL_EW_UNARY_FLOATS
#undef TL_EW_UNARY
