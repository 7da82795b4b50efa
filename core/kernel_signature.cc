#include "core/kernel_signature.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kad {

absl::string_view scalar_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::kNone:
      return "none";
    case ScalarType::kI8:
      return "char";
    case ScalarType::kU8:
      return "uchar";
    case ScalarType::kI16:
      return "short";
    case ScalarType::kU16:
      return "ushort";
    case ScalarType::kI32:
      return "int";
    case ScalarType::kU32:
      return "uint";
    case ScalarType::kI64:
      return "long";
    case ScalarType::kU64:
      return "ulong";
    case ScalarType::kF16:
      return "half";
    case ScalarType::kF32:
      return "float";
    case ScalarType::kF64:
      return "double";
  }
  return "unknown";
}

size_t scalar_type_size(ScalarType type) {
  switch (type) {
    case ScalarType::kNone:
      return 0;
    case ScalarType::kI8:
    case ScalarType::kU8:
      return 1;
    case ScalarType::kI16:
    case ScalarType::kU16:
    case ScalarType::kF16:
      return 2;
    case ScalarType::kI32:
    case ScalarType::kU32:
    case ScalarType::kF32:
      return 4;
    case ScalarType::kI64:
    case ScalarType::kU64:
    case ScalarType::kF64:
      return 8;
  }
  return 0;
}

absl::string_view arg_kind_name(ArgKind kind) {
  switch (kind) {
    case ArgKind::kBuffer:
      return "buffer";
    case ArgKind::kConstBuffer:
      return "const buffer";
    case ArgKind::kScalar:
      return "scalar";
    case ArgKind::kLocal:
      return "local memory";
  }
  return "unknown";
}

std::string to_string(const ArgSpec& spec) {
  if (spec.kind == ArgKind::kScalar) return std::string(scalar_type_name(spec.scalar));
  return std::string(arg_kind_name(spec.kind));
}

std::string signature_text(const KernelSignature& signature) {
  return absl::StrJoin(signature.args, ", ",
                       [](std::string* out, const ArgSpec& a) { out->append(to_string(a)); });
}

namespace {

bool matches(const ArgSpec& want, const KernelParameter& got) {
  using Space = KernelParameter::Space;
  switch (want.kind) {
    case ArgKind::kBuffer:
      return got.space == Space::kGlobal;
    case ArgKind::kConstBuffer:
      return (got.space == Space::kGlobal || got.space == Space::kConstant) && got.is_const;
    case ArgKind::kLocal:
      return got.space == Space::kLocal;
    case ArgKind::kScalar:
      return got.space == Space::kPrivate && got.type == scalar_type_name(want.scalar);
  }
  return false;
}

}  // namespace

absl::Status check_signature(const KernelSignature& sig,
                             std::span<const KernelParameter> parameters) {
  if (parameters.size() != sig.args.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel `%s` has %d parameters after KAD_CONTEXT, its signature declares %d", sig.entry,
        parameters.size(), sig.args.size()));
  }
  for (size_t i = 0; i < parameters.size(); ++i) {
    const ArgSpec& want = sig.args[i];
    const KernelParameter& got = parameters[i];
    if (!matches(want, got)) {
      // IR modules may carry no parameter names.
      return absl::InvalidArgumentError(absl::StrFormat(
          "kernel `%s`: argument %d is declared a %s but the kernel's parameter%s has type `%s%s`",
          sig.entry, i, to_string(want), got.name.empty() ? "" : absl::StrCat(" `", got.name, "`"),
          got.is_const ? "const " : "", got.type));
    }
  }
  return absl::OkStatus();
}

}  // namespace kad
