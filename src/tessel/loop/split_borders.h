// split_borders: a serial loop whose body tests or clamps its variable
// (a window's padding: Pad, pooling, a convolution's taps) is split into
// its borders and an interior where every such test holds,
//
//   for i in [a, b) body   =>   for i in [a, lo) body
//                               for i in [lo, hi) simplify(body, a <= lo <= i < hi)
//                               for i in [hi, b) body
//
// In the interior the simplifier removes the selects' tests and the
// clamps of the index, which leaves loads affine in i: the code generator's
// loop vectorizer then reads whole vectors where it read one element at a
// time. The interior is the widest [lo, hi) with lo - a and b - hi at most
// kMaxBorder that the simplifier proves free of tests of i (each border is
// as wide as the window's reach, a few iterations) and holds more
// iterations than the two borders together. Border copies keep the
// original body, their loops and lets renamed; loops nested in the interior
// are split in turn. Loops without such tests, or whose tests hold nowhere
// or everywhere, are left as they are.
#pragma once

#include "tessel/loop/ir.h"

namespace tessel::loop {

Kernel split_borders(const Kernel& k);

}  // namespace tessel::loop
