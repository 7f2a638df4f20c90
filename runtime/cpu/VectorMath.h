//===- VectorMath.h - f32 math and row sums that vectorize ------*- C++ -*-===//
//
// glibc's expf, tanhf and erff are scalar calls, so a loop that uses them
// never vectorizes (GCC only maps them to libmvec under -ffast-math, which
// the project does not use). The f32 kernels call these inline versions
// instead: straight-line code with selects, no calls and no float-to-int
// conversions, so `for (i) y[i] = expf32(x[i])` becomes SIMD code. Each is
// within a few ulp of the correctly rounded result and handles inf and NaN
// like the libm function. f64 kernels keep libm: they are the reference
// path, not the hot one. Below them are the row reductions (sum, max, sum
// of squares, softmax numerators) the kernel files share.
//
// The selects only become SIMD blends under -fno-trapping-math, and the
// reductions need -fopenmp-simd; runtime/CMakeLists.txt sets both for the
// kernel library. Neither changes any result.
//
//===----------------------------------------------------------------------===//

#ifndef TAILOR_RUNTIME_CPU_VECTORMATH_H
#define TAILOR_RUNTIME_CPU_VECTORMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

/// Hot loops compile twice, for x86-64-v3 (AVX2 + FMA) and the baseline, and
/// the loader picks one: the build has no -march flag. Clang does not accept
/// target_clones on templates, so it gets the baseline only; neither does
/// ThreadSanitizer, whose instrumented ifunc resolvers run before its
/// runtime is up.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&         \
    !defined(__SANITIZE_THREAD__)
#define TAILOR_VECTOR_CLONES                                                   \
  __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TAILOR_VECTOR_CLONES
#endif

/// Marks a loop whose reduction (a float sum, a max) may be reordered into
/// SIMD lanes: `TAILOR_SIMD(reduction(+ : sum))`. GCC needs -fopenmp-simd
/// (no OpenMP runtime is involved). Clang gets nothing: it cannot vectorize
/// the NaN-aware max and would warn that the request failed.
#define TAILOR_PRAGMA(x) _Pragma(#x)
#if defined(__GNUC__) && !defined(__clang__)
#define TAILOR_SIMD(...) TAILOR_PRAGMA(omp simd __VA_ARGS__)
#else
#define TAILOR_SIMD(...)
#endif

/// Marks a loop whose iterations touch disjoint elements even when the
/// output aliases an input exactly (in-place rope), which the compiler's
/// runtime alias checks cannot express.
#if defined(__clang__)
#define TAILOR_IVDEP TAILOR_PRAGMA(clang loop vectorize(assume_safety))
#elif defined(__GNUC__)
#define TAILOR_IVDEP TAILOR_PRAGMA(GCC ivdep)
#else
#define TAILOR_IVDEP
#endif

namespace tailor::runtime::vmath {

inline float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline uint32_t floatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

/// exp(x) in f32 (Cephes' expf polynomial): x = n ln2 + r with |r| <= ln2/2,
/// exp(r) by a degree-7 polynomial, 2^n applied as two factors built in the
/// exponent bits, so n = 128 does not overflow and results below FLT_MIN
/// underflow gradually into denormals as in libm. Inputs below -104, where
/// even the denormal result rounds to 0, are replaced before any arithmetic:
/// masked scores (-inf, or finfo.min in HF masks) then cost no slow
/// denormal assists.
inline float expf32(float x) {
  constexpr float kHi = 88.72283935546875f; // just above log(FLT_MAX)
  constexpr float kLo = -104.0f;            // exp(kLo) < FLT_TRUE_MIN / 2
  constexpr float kRound = 12582912.0f;     // 1.5 * 2^23: adds round to int
  float xc = x < kLo ? 0.0f : x;
  xc = xc > kHi ? 0.0f : xc;
  xc = x != x ? 0.0f : xc;
  float t = xc * 1.44269504088896341f + kRound;
  float n = t - kRound;
  int32_t ni = static_cast<int32_t>(floatToBits(t) - floatToBits(kRound));
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float e = p * (r * r) + r + 1.0f;
  // n in [-150, 128]: both halves are normal exponents.
  int32_t n1 = ni / 2;
  int32_t n2 = ni - n1;
  e = e * bitsToFloat(static_cast<uint32_t>(n1 + 127) << 23);
  e = e * bitsToFloat(static_cast<uint32_t>(n2 + 127) << 23);
  e = x < kLo ? 0.0f : e;
  e = x > kHi ? std::numeric_limits<float>::infinity() : e;
  return x != x ? x : e;
}

/// Logistic sigmoid without overflow: with e = exp(-|x|) in (0, 1], it is
/// 1 / (1 + e) for x >= 0 and e / (1 + e) below, so neither branch divides
/// by a huge number or cancels.
inline float sigmoidf32(float x) {
  float e = expf32(-std::fabs(x));
  float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

/// tanh(x) in f32 (Cephes' tanhf): an odd polynomial below |x| = 0.625,
/// where 1 - 2 / (exp(2|x|) + 1) would cancel, and that formula above.
inline float tanhf32(float x) {
  float ax = std::fabs(x);
  float z = x * x;
  float small = -5.70498872745e-3f;
  small = small * z + 2.06390887954e-2f;
  small = small * z - 5.37397155531e-2f;
  small = small * z + 1.33314422036e-1f;
  small = small * z - 3.33332819422e-1f;
  small = small * z * x + x;
  float big = 1.0f - 2.0f / (expf32(ax + ax) + 1.0f);
  big = x < 0.0f ? -big : big;
  return ax < 0.625f ? small : big;
}

/// erf(x) in f32: Eigen's rational approximation x P(x^2) / Q(x^2) on
/// [-4, 4]; outside it erf rounds to +-1 in f32.
inline float erff32(float x) {
  float xc = x > 4.0f ? 4.0f : x;
  xc = xc < -4.0f ? -4.0f : xc;
  float x2 = xc * xc;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  float r = xc * p / q;
  return x != x ? x : r;
}

/// The same functions for either element type: f32 takes the vectorizable
/// versions above, f64 libm.
inline float exp(float x) { return expf32(x); }
inline double exp(double x) { return std::exp(x); }
inline float tanh(float x) { return tanhf32(x); }
inline double tanh(double x) { return std::tanh(x); }
inline float erf(float x) { return erff32(x); }
inline double erf(double x) { return std::erf(x); }
inline float sigmoid(float x) { return sigmoidf32(x); }
inline double sigmoid(double x) {
  double e = std::exp(-std::fabs(x));
  double s = 1.0 / (1.0 + e);
  return x >= 0.0 ? s : e * s;
}

//===----------------------------------------------------------------------===//
// Row reductions. Inline, so they compile for whichever target the cloned
// kernel calling them was built for.
//===----------------------------------------------------------------------===//

/// The accumulator for sums of T: f64 for floats (a cascade-free f32 sum
/// would lose digits on long rows), wrapping u64 for integers.
template <typename T>
using SumAcc =
    std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

/// The identity of max: -inf, or the lowest integer.
template <typename T> constexpr T lowest() {
  if constexpr (std::is_floating_point_v<T>) {
    return -std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::lowest();
  }
}

/// max that keeps a NaN once seen (torch.max semantics).
template <typename T> inline T maxNan(T acc, T v) {
  return ((v != v) | (v > acc)) ? v : acc;
}

template <typename Acc, typename T> inline Acc rowSum(const T *x, int64_t n) {
  Acc sum = 0;
  TAILOR_SIMD(reduction(+ : sum))
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<Acc>(x[i]);
  }
  return sum;
}

/// A running max plus a NaN flag: a SIMD max reduction does not carry NaN
/// the way maxNan does.
template <typename T> inline T rowMax(const T *x, int64_t n) {
  T m = lowest<T>();
  int nan = 0;
  TAILOR_SIMD(reduction(max : m) reduction(| : nan))
  for (int64_t i = 0; i < n; ++i) {
    T v = x[i];
    m = v > m ? v : m;
    nan |= v != v;
  }
  if constexpr (std::is_floating_point_v<T>) {
    return nan ? std::numeric_limits<T>::quiet_NaN() : m;
  }
  return m;
}

/// Sum of (x - shift)^2 in T's precision (the norms' variance).
template <typename T> inline T rowSumSquares(const T *x, int64_t n, T shift) {
  T sum = 0;
  TAILOR_SIMD(reduction(+ : sum))
  for (int64_t i = 0; i < n; ++i) {
    T d = x[i] - shift;
    sum += d * d;
  }
  return sum;
}

/// y[i] = exp(x[i] - shift), returning the sum of y in T (softmax's
/// numerators and denominator). y may be x.
template <typename T>
inline T rowExpShiftSum(const T *x, T *y, int64_t n, T shift) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = exp(x[i] - shift);
  }
  return rowSum<T>(y, n);
}

} // namespace tailor::runtime::vmath

#endif // TAILOR_RUNTIME_CPU_VECTORMATH_H
