#include "tessel/support/error.h"

namespace tessel {

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail("integer overflow in size computation (", a, " + ", b, ")");
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("integer overflow in size computation (", a, " * ", b, ")");
  return r;
}

}  // namespace tessel
