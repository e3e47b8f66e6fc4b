// The text form of the loop IR (docs/loop_ir.md). It is stable: tests compare
// it, and parse() reads it back so that print(parse(print(k))) == print(k).
//
//   kernel add_relu(in %x: f32[n, 128], out %z: f32[n, 128]) syms(n) {
//     parallel for i0 in [0, n) {
//       vectorized for i1 in [0, 128) {
//         z[i0, i1] = max(x[i0, i1], 0.0f32)
//       }
//     }
//   }
#pragma once

#include <string>

#include "tessel/loop/ir.h"

namespace tessel::loop {

std::string print(const Expr& e);
std::string print(const Stmt& s, int indent = 0);
std::string print(const Kernel& k);

// Pieces of the text form shared with the parser.
// Infix spelling of a binary operator ("+", "==", "<<"), or the function
// name for the ones printed as calls ("min", "max", "floordiv", "floormod").
const char* binary_op_spelling(BinaryOp op);
// Binding strength of an infix operator (higher binds tighter); 0 for the
// operators printed as calls.
int binary_op_precedence(BinaryOp op);
// Every BinaryOp, for tables built from the two functions above.
const std::vector<BinaryOp>& all_binary_ops();
const std::vector<ForKind>& all_for_kinds();
// An immediate as it is printed: "3", "3i32", "true", "1.5f32", "-inff32", "0x1.8p+0f16".
std::string immediate_text(const Expr& imm);
// Words that are builtins when followed by "(" (a Call of that name prints with its type).
bool is_builtin_function(const std::string& name);

}  // namespace tessel::loop
