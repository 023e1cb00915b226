#pragma once
// Family entry points, declared here so registry.cpp can list them.
#include <memory>
#include <string>

#include "models/model.h"

namespace ds4::glm5 {
bool probe(const std::string& path);
std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options);
}  // namespace ds4::glm5
