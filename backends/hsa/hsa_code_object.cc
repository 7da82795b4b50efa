#include "backends/hsa/hsa_code_object.h"

#include <elf.h>

#include <cstring>
#include <exception>
#include <msgpack.hpp>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kad::hsa {
namespace {

// The note type of the msgpack metadata (code object v3 and later), from
// LLVM's AMDGPU usage documentation; glibc's <elf.h> does not name it.
constexpr uint32_t kNtAmdgpuMetadata = 32;
constexpr char kNoteOwner[] = "AMDGPU";  // with its NUL: n_namesz 7

absl::Status invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("not a valid AMDGCN code object: ", what));
}

template <typename T>
bool read_at(absl::string_view bytes, uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

uint64_t align4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

// The AMDGPU metadata note among the notes in [begin, end), if any.
std::optional<absl::string_view> find_note(absl::string_view elf, uint64_t begin, uint64_t end) {
  uint64_t pos = begin;
  while (pos < end) {
    Elf64_Nhdr note;
    if (end - pos < sizeof(note) || !read_at(elf, pos, &note)) return std::nullopt;
    const uint64_t name = pos + sizeof(note);
    const uint64_t desc = name + align4(note.n_namesz);
    const uint64_t next = desc + align4(note.n_descsz);
    if (next > end) return std::nullopt;
    if (note.n_type == kNtAmdgpuMetadata && note.n_namesz == sizeof(kNoteOwner) &&
        std::memcmp(elf.data() + name, kNoteOwner, sizeof(kNoteOwner)) == 0) {
      return elf.substr(desc, note.n_descsz);
    }
    pos = next;
  }
  return std::nullopt;
}

// The metadata note, found through the program headers (what a loader
// reads), else through the section headers (a relocatable object).
absl::StatusOr<absl::string_view> metadata_note(absl::string_view elf) {
  Elf64_Ehdr header;
  if (!read_at(elf, 0, &header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    return invalid("no ELF header");
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB) {
    return invalid("not a 64-bit little-endian ELF");
  }
  if (header.e_machine != EM_AMDGPU) {
    return invalid(
        absl::StrCat("ELF machine ", header.e_machine, ", not EM_AMDGPU (", EM_AMDGPU, ")"));
  }
  for (uint64_t i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    if (!read_at(elf, header.e_phoff + i * header.e_phentsize, &segment) ||
        header.e_phentsize < sizeof(segment)) {
      return invalid("program header outside the file");
    }
    if (segment.p_type != PT_NOTE) continue;
    if (segment.p_offset > elf.size() || elf.size() - segment.p_offset < segment.p_filesz) {
      return invalid("note segment outside the file");
    }
    if (auto note = find_note(elf, segment.p_offset, segment.p_offset + segment.p_filesz)) {
      return *note;
    }
  }
  for (uint64_t i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr section;
    if (!read_at(elf, header.e_shoff + i * header.e_shentsize, &section) ||
        header.e_shentsize < sizeof(section)) {
      return invalid("section header outside the file");
    }
    if (section.sh_type != SHT_NOTE) continue;
    if (section.sh_offset > elf.size() || elf.size() - section.sh_offset < section.sh_size) {
      return invalid("note section outside the file");
    }
    if (auto note = find_note(elf, section.sh_offset, section.sh_offset + section.sh_size)) {
      return *note;
    }
  }
  return invalid("no NT_AMDGPU_METADATA note (code object v2, or not linked by ld.lld?)");
}

// --- The msgpack document ---------------------------------------------------

const msgpack::object* field(const msgpack::object& map, absl::string_view key) {
  if (map.type != msgpack::type::MAP) return nullptr;
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    const msgpack::object_kv& kv = map.via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR &&
        absl::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key) {
      return &kv.val;
    }
  }
  return nullptr;
}

// Reads one field into `out`: absent is an error when `required`, the wrong
// type always is. `where` names the map in messages.
class FieldReader {
 public:
  FieldReader(const msgpack::object& map, std::string where)
      : map_(map), where_(std::move(where)) {}

  absl::Status string(absl::string_view key, std::string* out, bool required = true) const {
    const msgpack::object* value = field(map_, key);
    if (value == nullptr) return required ? missing(key) : absl::OkStatus();
    if (value->type != msgpack::type::STR) return wrong(key, "a string");
    out->assign(value->via.str.ptr, value->via.str.size);
    return absl::OkStatus();
  }

  absl::Status u32(absl::string_view key, uint32_t* out, bool required = true) const {
    const msgpack::object* value = field(map_, key);
    if (value == nullptr) return required ? missing(key) : absl::OkStatus();
    if (value->type != msgpack::type::POSITIVE_INTEGER || value->via.u64 > UINT32_MAX) {
      return wrong(key, "an unsigned 32-bit integer");
    }
    *out = static_cast<uint32_t>(value->via.u64);
    return absl::OkStatus();
  }

  absl::Status boolean(absl::string_view key, bool* out) const {
    const msgpack::object* value = field(map_, key);
    if (value == nullptr) return absl::OkStatus();
    if (value->type != msgpack::type::BOOLEAN) return wrong(key, "a boolean");
    *out = value->via.boolean;
    return absl::OkStatus();
  }

 private:
  absl::Status missing(absl::string_view key) const {
    return invalid(absl::StrCat(where_, " has no ", key));
  }
  absl::Status wrong(absl::string_view key, absl::string_view type) const {
    return invalid(absl::StrCat(where_, "'s ", key, " is not ", type));
  }

  const msgpack::object& map_;
  std::string where_;
};

absl::Status read_arg(const msgpack::object& map, const KernelMetadata& kernel, size_t index,
                      ArgMetadata* arg) {
  if (map.type != msgpack::type::MAP) {
    return invalid(absl::StrFormat("kernel `%s` argument %d is not a map", kernel.name, index));
  }
  FieldReader f(map, absl::StrFormat("kernel `%s` argument %d", kernel.name, index));
  for (absl::Status s :
       {f.string(".value_kind", &arg->value_kind), f.u32(".offset", &arg->offset),
        f.u32(".size", &arg->size), f.u32(".pointee_align", &arg->pointee_align, false),
        f.string(".type_name", &arg->type_name, false),
        f.string(".address_space", &arg->address_space, false),
        f.boolean(".is_const", &arg->is_const)}) {
    if (!s.ok()) return s;
  }
  arg->kind = arg_value_kind(arg->value_kind);
  // Checked here once, so that packing arguments can trust it.
  if (uint64_t{arg->offset} + arg->size > kernel.kernarg_segment_size) {
    return invalid(absl::StrFormat(
        "kernel `%s` argument %d (%s) at offset %d, %d bytes, lies outside its kernarg segment "
        "of %d bytes",
        kernel.name, index, arg->value_kind, arg->offset, arg->size, kernel.kernarg_segment_size));
  }
  return absl::OkStatus();
}

absl::Status read_kernel(const msgpack::object& map, size_t index, KernelMetadata* kernel) {
  if (map.type != msgpack::type::MAP) {
    return invalid(absl::StrCat("amdhsa.kernels[", index, "] is not a map"));
  }
  FieldReader first(map, absl::StrCat("amdhsa.kernels[", index, "]"));
  if (absl::Status s = first.string(".name", &kernel->name); !s.ok()) return s;
  FieldReader f(map, absl::StrCat("kernel `", kernel->name, "`"));
  for (absl::Status s : {f.string(".symbol", &kernel->symbol),
                         f.u32(".kernarg_segment_size", &kernel->kernarg_segment_size),
                         f.u32(".kernarg_segment_align", &kernel->kernarg_segment_align),
                         f.u32(".group_segment_fixed_size", &kernel->group_segment_fixed_size),
                         f.u32(".private_segment_fixed_size", &kernel->private_segment_fixed_size),
                         f.u32(".max_flat_workgroup_size", &kernel->max_flat_workgroup_size),
                         f.u32(".wavefront_size", &kernel->wavefront_size),
                         f.boolean(".uses_dynamic_stack", &kernel->uses_dynamic_stack)}) {
    if (!s.ok()) return s;
  }
  const msgpack::object* args = field(map, ".args");
  if (args == nullptr) return absl::OkStatus();  // a kernel without parameters
  if (args->type != msgpack::type::ARRAY) {
    return invalid(absl::StrCat("kernel `", kernel->name, "`'s .args is not an array"));
  }
  kernel->args.resize(args->via.array.size);
  for (uint32_t i = 0; i < args->via.array.size; ++i) {
    if (absl::Status s = read_arg(args->via.array.ptr[i], *kernel, i, &kernel->args[i]); !s.ok())
      return s;
  }
  return absl::OkStatus();
}

absl::Status read_document(const msgpack::object& root, CodeObjectMetadata* out) {
  if (root.type != msgpack::type::MAP) return invalid("the metadata is not a msgpack map");
  FieldReader f(root, "the metadata");
  if (absl::Status s = f.string("amdhsa.target", &out->target); !s.ok()) return s;
  if (const msgpack::object* version = field(root, "amdhsa.version")) {
    if (version->type != msgpack::type::ARRAY || version->via.array.size < 2 ||
        version->via.array.ptr[0].type != msgpack::type::POSITIVE_INTEGER ||
        version->via.array.ptr[1].type != msgpack::type::POSITIVE_INTEGER) {
      return invalid("amdhsa.version is not [major, minor]");
    }
    out->version_major = static_cast<uint32_t>(version->via.array.ptr[0].via.u64);
    out->version_minor = static_cast<uint32_t>(version->via.array.ptr[1].via.u64);
  }
  const msgpack::object* kernels = field(root, "amdhsa.kernels");
  if (kernels == nullptr || kernels->type != msgpack::type::ARRAY) {
    return invalid("the metadata has no amdhsa.kernels array");
  }
  out->kernels.resize(kernels->via.array.size);
  for (uint32_t i = 0; i < kernels->via.array.size; ++i) {
    if (absl::Status s = read_kernel(kernels->via.array.ptr[i], i, &out->kernels[i]); !s.ok())
      return s;
  }
  return absl::OkStatus();
}

}  // namespace

ArgValueKind arg_value_kind(absl::string_view v) {
  static constexpr std::pair<absl::string_view, ArgValueKind> kKinds[] = {
      {"by_value", ArgValueKind::kByValue},
      {"global_buffer", ArgValueKind::kGlobalBuffer},
      {"dynamic_shared_pointer", ArgValueKind::kDynamicSharedPointer},
      {"hidden_global_offset_x", ArgValueKind::kHiddenGlobalOffsetX},
      {"hidden_global_offset_y", ArgValueKind::kHiddenGlobalOffsetY},
      {"hidden_global_offset_z", ArgValueKind::kHiddenGlobalOffsetZ},
      {"hidden_block_count_x", ArgValueKind::kHiddenBlockCountX},
      {"hidden_block_count_y", ArgValueKind::kHiddenBlockCountY},
      {"hidden_block_count_z", ArgValueKind::kHiddenBlockCountZ},
      {"hidden_group_size_x", ArgValueKind::kHiddenGroupSizeX},
      {"hidden_group_size_y", ArgValueKind::kHiddenGroupSizeY},
      {"hidden_group_size_z", ArgValueKind::kHiddenGroupSizeZ},
      {"hidden_remainder_x", ArgValueKind::kHiddenRemainderX},
      {"hidden_remainder_y", ArgValueKind::kHiddenRemainderY},
      {"hidden_remainder_z", ArgValueKind::kHiddenRemainderZ},
      {"hidden_grid_dims", ArgValueKind::kHiddenGridDims},
      {"hidden_dynamic_lds_size", ArgValueKind::kHiddenDynamicLdsSize},
      {"hidden_printf_buffer", ArgValueKind::kHiddenPrintfBuffer},
  };
  for (const auto& [name, kind] : kKinds) {
    if (v == name) return kind;
  }
  return absl::StartsWith(v, "hidden_") ? ArgValueKind::kHiddenOther : ArgValueKind::kOther;
}

bool is_hidden(ArgValueKind kind) {
  return kind != ArgValueKind::kByValue && kind != ArgValueKind::kGlobalBuffer &&
         kind != ArgValueKind::kDynamicSharedPointer && kind != ArgValueKind::kOther;
}

const KernelMetadata* CodeObjectMetadata::find_kernel(absl::string_view name) const {
  for (const KernelMetadata& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

absl::StatusOr<CodeObjectMetadata> read_code_object_metadata(absl::string_view code_object) {
  absl::StatusOr<absl::string_view> note = metadata_note(code_object);
  if (!note.ok()) return note.status();
  // Every msgpack element takes at least one byte: no count may exceed the
  // note's size, so hostile counts cannot make the unpacker allocate much.
  const size_t n = note->size();
  const msgpack::unpack_limit limit(n, n, n, n, n, 64);
  CodeObjectMetadata out;
  // msgpack-c reports malformed input by exceptions; none leaves this function.
  try {
    msgpack::object_handle document =
        msgpack::unpack(note->data(), note->size(), nullptr, nullptr, limit);
    if (absl::Status s = read_document(document.get(), &out); !s.ok()) return s;
  } catch (const std::exception& e) {
    return invalid(absl::StrCat("malformed metadata note (", e.what(), ")"));
  }
  return out;
}

absl::string_view target_processor(absl::string_view target) {
  const size_t dashes = target.find("--");
  absl::string_view processor =
      dashes == absl::string_view::npos ? target : target.substr(dashes + 2);
  return processor.substr(0, processor.find(':'));
}

}  // namespace kad::hsa
