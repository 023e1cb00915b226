#pragma once
// A request that could never be served with the memory this process has (e.g. a turn whose
// model state outgrows the engine's whole state-memory budget, engine/state_budget.h);
// servers answer 507. Apart from core/error.h so that adding it touched no other file.
#include "core/error.h"

namespace ds4 {

class CapacityError : public Error {
 public:
  explicit CapacityError(const std::string& what) : Error(what) {}
};

}  // namespace ds4
