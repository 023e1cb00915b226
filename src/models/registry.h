#pragma once
// Family entry points, declared here so registry.cpp can list them.
#include <memory>
#include <string>

#include "models/model.h"
