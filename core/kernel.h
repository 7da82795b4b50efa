// A kernel: (module, entry) plus its static launch metadata (DESIGN §2), and
// the specialisations it has been compiled to.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/backend.h"
#include "core/kernel_cache.h"
#include "core/kernel_signature.h"
#include "core/module.h"
#include "core/specialization.h"

namespace kad {

// The most arguments a kernel may declare: OpenCL guarantees 1024 bytes of
// parameters, which the 256-byte context and 96 pointers fill exactly.
inline constexpr size_t kMaxKernelArgs = 96;

class Kernel {
 public:
  // Checks the signature: entry name, static sizes, argument count.
  static absl::StatusOr<std::unique_ptr<Kernel>> create(std::shared_ptr<const Module> module,
                                                        KernelSignature signature);

  const KernelSignature& signature() const { return signature_; }
  const Module& module() const { return *module_; }
  const std::string& name() const { return signature_.entry; }

  // The compiled kernel for `spec` on `device`. Warm lookups scan a small
  // table in the kernel and never allocate; a miss builds the full key and
  // asks the shared cache, which compiles if no kernel has this key yet.
  // The kernel keeps what it used alive (the cache may drop it), so the
  // pointer is valid as long as the kernel; at most kMaxSpecializations per
  // kernel (RESOURCE_EXHAUSTED past it, naming the kernel).
  absl::StatusOr<CompiledKernel*> specialization(Device& device, const Specialization& spec,
                                                 KernelCache& cache, bool* compiled);
  // The same, but never compiles: null when `spec` is not compiled yet, for a
  // caller that holds a lock others need and compiles after releasing it.
  absl::StatusOr<CompiledKernel*> find_specialization(Device& device, const Specialization& spec,
                                                      KernelCache& cache);

 private:
  // The full cache key of `spec` on `device` (allocates: a miss only).
  SpecializationKey key_for(const Device& device, const Specialization& spec) const;
  CompiledKernel* find_in_table(const Device& device, const Specialization& spec,
                                KernelCache& cache) ABSL_LOCKS_EXCLUDED(mu_);
  // The table's entry for `spec` on `device`, or null; counts no hit.
  CompiledKernel* table_entry(const Device& device, const Specialization& spec)
      ABSL_LOCKS_EXCLUDED(mu_);
  CompiledKernel* find_locked(const Device& device, const Specialization& spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void remember(const Device& device, const Specialization& spec,
                std::shared_ptr<CompiledKernel> compiled) ABSL_LOCKS_EXCLUDED(mu_);
  // RESOURCE_EXHAUSTED when the kernel holds kMaxSpecializations already.
  absl::Status check_room(const Device& device) ABSL_LOCKS_EXCLUDED(mu_);

  Kernel(std::shared_ptr<const Module> module, KernelSignature signature)
      : module_(std::move(module)), signature_(std::move(signature)) {}

  struct Entry {
    const Device* device = nullptr;
    Specialization spec;
    std::shared_ptr<CompiledKernel> compiled;
  };
  static constexpr size_t kInlineEntries = 16;

 public:
  // Distinct specializations (static sizes, index widths, devices) one
  // kernel holds compiled: each stays alive with the kernel.
  static constexpr size_t kMaxSpecializations = 64;

 private:
  std::shared_ptr<const Module> module_;
  KernelSignature signature_;
  absl::Mutex mu_;
  std::array<Entry, kInlineEntries> entries_ ABSL_GUARDED_BY(mu_);
  size_t entry_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Entry> more_entries_ ABSL_GUARDED_BY(mu_);  // past kInlineEntries
};

// Checks launch arguments against the kernel's signature: count, kinds,
// scalar types, buffers on the launch's device, and no const buffer aliased
// by a written one. Allocates only to build an error.
absl::Status validate_args(const KernelSignature& signature, std::span<const KernelArg> args,
                           const Device& device);

}  // namespace kad
