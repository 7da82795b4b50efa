// The HSA runtime entry points kad uses, as one table of function pointers
// filled by dlsym from libhsa-runtime64.so.1 at start. Nothing links against
// the runtime: a machine without it builds and runs kad all the same.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "backends/hsa/hsa_headers.h"

// Every function, once: declaration, loading and tests use this list.
#define KAD_HSA_FUNCTIONS(X)                   \
  X(hsa_init)                                  \
  X(hsa_shut_down)                             \
  X(hsa_status_string)                         \
  X(hsa_system_get_info)                       \
  X(hsa_iterate_agents)                        \
  X(hsa_agent_get_info)                        \
  X(hsa_agent_iterate_isas)                    \
  X(hsa_isa_get_info_alt)                      \
  X(hsa_amd_agent_iterate_memory_pools)        \
  X(hsa_amd_memory_pool_get_info)              \
  X(hsa_amd_memory_pool_allocate)              \
  X(hsa_amd_memory_pool_free)                  \
  X(hsa_amd_agents_allow_access)               \
  X(hsa_amd_memory_async_copy)                 \
  X(hsa_amd_memory_fill)                       \
  X(hsa_queue_create)                          \
  X(hsa_queue_destroy)                         \
  X(hsa_queue_add_write_index_relaxed)         \
  X(hsa_signal_create)                         \
  X(hsa_signal_destroy)                        \
  X(hsa_signal_store_relaxed)                  \
  X(hsa_signal_store_screlease)                \
  X(hsa_signal_load_scacquire)                 \
  X(hsa_signal_wait_scacquire)                 \
  X(hsa_code_object_reader_create_from_memory) \
  X(hsa_code_object_reader_destroy)            \
  X(hsa_executable_create_alt)                 \
  X(hsa_executable_load_agent_code_object)     \
  X(hsa_executable_freeze)                     \
  X(hsa_executable_get_symbol_by_name)         \
  X(hsa_executable_symbol_get_info)            \
  X(hsa_executable_destroy)

namespace kad::hsa {

inline constexpr char kDefaultLibrary[] = "libhsa-runtime64.so.1";

struct HsaApi {
#define KAD_DECLARE_FUNCTION(name) decltype(&::name) name = nullptr;
  KAD_HSA_FUNCTIONS(KAD_DECLARE_FUNCTION)
#undef KAD_DECLARE_FUNCTION
  std::string origin;  // the library the table came from
};

// Loads the runtime and every function of the list; calls none of them.
// NotFound when the library is absent; Internal when a symbol is missing
// (names it).
absl::StatusOr<HsaApi> load_hsa_runtime(const char* library = kDefaultLibrary);

}  // namespace kad::hsa
