// Symbol bookkeeping shared by the shape passes: substituting dims for
// symbols in Dims and Types, and collecting the symbols a type mentions.
#pragma once

#include <map>
#include <set>
#include <string>

#include "tessel/ir/graph.h"

namespace tessel {

using DimSubst = std::map<std::string, Dim>;

// Replaces every symbol bound in `s` (inside floordiv/mod/max/min too) and
// re-canonicalises. Unbound symbols stay.
Dim substitute_dim(const Dim& d, const DimSubst& s);
Type substitute_type(const Type& t, const DimSubst& s);
void collect_type_symbols(const Type& t, std::set<std::string>* out);

// True when `d` is exactly one symbol (coefficient 1); sets *name.
bool is_bare_symbol(const Dim& d, std::string* name = nullptr);

// Substitutes into every value type of the model (all graphs, including
// TypeProto attributes). Returns true if any type changed.
bool substitute_model_types(Model& m, const DimSubst& s);

}  // namespace tessel
