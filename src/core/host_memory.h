#pragma once
// The host's available memory (Linux /proc/meminfo MemAvailable), in bytes; 0 when unknown.
// Shared by the CPU models' state budget (Model::state_memory_available) and the engine's
// swap-to-host budget.
#include <cstddef>

namespace ds4 {

size_t host_memory_available();

}  // namespace ds4
