// The code object metadata reader on code objects the real toolchain lowers
// for gfx90a, and on damaged or foreign bytes.
#include <elf.h>

#include <cstring>

#include "backends/hsa/hsa_code_object.h"
#include "backends/hsa/hsa_device.h"
#include "core/specialization.h"
#include "core/toolchain.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hsa/amdgcn_code_objects.h"

namespace kad::hsa {
namespace {

using ::testing::HasSubstr;

class CodeObjectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<std::string>& code = testing::many_args_code_object();
    ASSERT_TRUE(code.ok()) << code.status();
    code_ = *code;
    absl::StatusOr<CodeObjectMetadata> md = read_code_object_metadata(code_);
    ASSERT_TRUE(md.ok()) << md.status();
    metadata_ = *std::move(md);
    kernel_ = metadata_.find_kernel("many_args");
    ASSERT_NE(kernel_, nullptr);
  }

  std::string code_;
  CodeObjectMetadata metadata_;
  const KernelMetadata* kernel_ = nullptr;
};

TEST_F(CodeObjectTest, NamesTheTargetAndEveryKernelWithItsDescriptorSymbol) {
  EXPECT_EQ(metadata_.target, "amdgcn-amd-amdhsa--gfx90a");
  EXPECT_EQ(target_processor(metadata_.target), "gfx90a");
  EXPECT_EQ(metadata_.version_major, 1u);
  ASSERT_EQ(metadata_.kernels.size(), 3u);
  for (const char* name : {"many_args", "wide", "fixed"}) {
    const KernelMetadata* k = metadata_.find_kernel(name);
    ASSERT_NE(k, nullptr) << name;
    EXPECT_EQ(k->symbol, std::string(name) + ".kd");
    EXPECT_EQ(k->wavefront_size, 64u) << name;
  }
  EXPECT_EQ(metadata_.find_kernel("absent"), nullptr);
}

TEST_F(CodeObjectTest, ExplicitArgumentsFollowTheContextAtTheirAbiOffsets) {
  struct Expected {
    ArgValueKind kind;
    uint32_t offset;
    uint32_t size;
    const char* type;
  };
  // kad_context (256 bytes by value), then each parameter at its natural alignment.
  const Expected expected[] = {
      {ArgValueKind::kByValue, 0, 256, "kad_context"},
      {ArgValueKind::kGlobalBuffer, 256, 8, "float*"},
      {ArgValueKind::kGlobalBuffer, 264, 8, "float*"},
      {ArgValueKind::kByValue, 272, 4, "float"},
      {ArgValueKind::kByValue, 276, 1, "uchar"},
      {ArgValueKind::kDynamicSharedPointer, 280, 4, "int*"},
      {ArgValueKind::kByValue, 288, 8, "ulong"},
      {ArgValueKind::kByValue, 296, 2, "short"},
      {ArgValueKind::kDynamicSharedPointer, 300, 4, "float4*"},
  };
  ASSERT_GE(kernel_->args.size(), std::size(expected));
  for (size_t i = 0; i < std::size(expected); ++i) {
    const ArgMetadata& a = kernel_->args[i];
    EXPECT_EQ(a.kind, expected[i].kind) << "argument " << i << ": " << a.value_kind;
    EXPECT_EQ(a.offset, expected[i].offset) << "argument " << i;
    EXPECT_EQ(a.size, expected[i].size) << "argument " << i;
    EXPECT_EQ(a.type_name, expected[i].type) << "argument " << i;
  }
  EXPECT_FALSE(kernel_->args[1].is_const);
  EXPECT_TRUE(kernel_->args[2].is_const);  // const global float* restrict
  EXPECT_EQ(kernel_->args[5].pointee_align, 4u);
  EXPECT_EQ(kernel_->args[8].pointee_align, 16u);
}

TEST_F(CodeObjectTest, HiddenArgumentsFollowTheExplicitOnesInsideTheSegment) {
  // `wide` calls get_global_id and get_global_offset, which read them.
  const KernelMetadata* wide = metadata_.find_kernel("wide");
  ASSERT_NE(wide, nullptr);
  ASSERT_GE(wide->args.size(), 5u);
  EXPECT_EQ(wide->args[0].size, 256u);
  EXPECT_EQ(wide->args[1].kind, ArgValueKind::kGlobalBuffer);
  const ArgValueKind offsets[] = {ArgValueKind::kHiddenGlobalOffsetX,
                                  ArgValueKind::kHiddenGlobalOffsetY,
                                  ArgValueKind::kHiddenGlobalOffsetZ};
  for (int d = 0; d < 3; ++d) {
    const ArgMetadata& a = wide->args[2 + d];
    EXPECT_EQ(a.kind, offsets[d]) << a.value_kind;
    EXPECT_EQ(a.offset, 264u + 8 * d);
    EXPECT_EQ(a.size, 8u);
  }
  uint32_t end = 0;
  for (size_t i = 2; i < wide->args.size(); ++i) {
    EXPECT_TRUE(is_hidden(wide->args[i].kind)) << wide->args[i].value_kind;
    end = std::max(end, wide->args[i].offset + wide->args[i].size);
  }
  EXPECT_EQ(wide->kernarg_segment_size, end);
  EXPECT_GE(wide->kernarg_segment_align, 8u);
}

TEST_F(CodeObjectTest, AKernelThatReadsNoHiddenArgumentHasNone) {
  // kad's prelude takes offsets and sizes from the context, not from OpenCL.
  ASSERT_EQ(kernel_->args.size(), 9u);
  for (const ArgMetadata& a : kernel_->args) EXPECT_FALSE(is_hidden(a.kind)) << a.value_kind;
  EXPECT_EQ(kernel_->kernarg_segment_size, 304u);  // ends with `tile` at 300
}

TEST_F(CodeObjectTest, OpenClKernelsDefaultToAMaximumFlatWorkgroupOf256) {
  EXPECT_EQ(kernel_->max_flat_workgroup_size, 256u);
}

TEST_F(CodeObjectTest, WorkgroupAttributesSetTheMaximumFlatWorkgroupSize) {
  EXPECT_EQ(metadata_.find_kernel("wide")->max_flat_workgroup_size, 1024u);
  EXPECT_EQ(metadata_.find_kernel("fixed")->max_flat_workgroup_size, 64u);
}

// A static workgroup of 32 x 32 = 1024 items, past AMDGPU's default of 256:
// the HSA backend's compiler option makes the prelude declare it, and the
// code object's metadata allows it.
TEST(StaticWorkgroupOnAmdgpu, RequiredSizeRaisesTheMaximumFlatWorkgroup) {
  Specialization spec;
  spec.choice.rank = 2;
  spec.static_workgroup = Dims{32, 32};
  const std::string option = required_workgroup_option(spec);
  EXPECT_EQ(option, "-DKAD_REQD_WORK_GROUP_SIZE=32,32,1");
  absl::StatusOr<Toolchain> toolchain = Toolchain::find();
  ASSERT_TRUE(toolchain.ok()) << toolchain.status();
  constexpr char kTile[] = R"(
kernel void tile(KAD_CONTEXT, global int* out) {
  if (kad_active()) out[kad_global_linear()] = (int)kad_local_linear();
})";
  absl::StatusOr<std::string> code =
      toolchain->lower(CodeTarget::kAmdgcn, specialised_source(spec, kTile), "gfx90a", option);
  ASSERT_TRUE(code.ok()) << code.status();
  absl::StatusOr<CodeObjectMetadata> metadata = read_code_object_metadata(*code);
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  ASSERT_NE(metadata->find_kernel("tile"), nullptr);
  EXPECT_EQ(metadata->find_kernel("tile")->max_flat_workgroup_size, 1024u);

  Specialization linear = spec;
  linear.choice.linear = true;
  EXPECT_EQ(required_workgroup_option(linear), "-DKAD_REQD_WORK_GROUP_SIZE=1024,1,1");
  Specialization dynamic;
  dynamic.choice.rank = 1;
  EXPECT_EQ(required_workgroup_option(dynamic), "");
}

TEST_F(CodeObjectTest, StaticLocalMemoryIsTheFixedGroupSegment) {
  EXPECT_EQ(kernel_->group_segment_fixed_size, 64 * sizeof(int));
  EXPECT_EQ(metadata_.find_kernel("wide")->group_segment_fixed_size, 0u);
}

TEST(CodeObjectReader, BytesThatAreNotAnElfAreInvalidArgument) {
  absl::StatusOr<CodeObjectMetadata> md = read_code_object_metadata(
      "not a code object at all, "
      "just text of some length");
  EXPECT_EQ(md.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(md.status().message()), HasSubstr("no ELF header"));
  EXPECT_EQ(read_code_object_metadata("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CodeObjectTest, AnElfForAnotherMachineIsRejected) {
  std::string elf = code_;
  const Elf64_Half machine = EM_X86_64;
  std::memcpy(elf.data() + offsetof(Elf64_Ehdr, e_machine), &machine, sizeof(machine));
  absl::StatusOr<CodeObjectMetadata> md = read_code_object_metadata(elf);
  EXPECT_EQ(md.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(md.status().message()), HasSubstr("not EM_AMDGPU"));
}

TEST_F(CodeObjectTest, ACodeObjectWithoutTheMetadataNoteIsRejected) {
  // Renames the note's owner, so that no AMDGPU note remains.
  std::string elf = code_;
  const std::string owner("AMDGPU\0", 7);
  for (size_t at = elf.find(owner); at != std::string::npos; at = elf.find(owner, at + 1)) {
    elf[at] = 'X';
  }
  absl::StatusOr<CodeObjectMetadata> md = read_code_object_metadata(elf);
  EXPECT_EQ(md.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(md.status().message()), HasSubstr("no NT_AMDGPU_METADATA note"));
}

TEST_F(CodeObjectTest, TruncatedAndCorruptedCodeObjectsFailCleanly) {
  // Code objects can come from clients: no prefix and no flipped byte may
  // crash the reader; every failure is INVALID_ARGUMENT.
  for (size_t n = 0; n < code_.size(); n += 61) {
    absl::StatusOr<CodeObjectMetadata> md =
        read_code_object_metadata(absl::string_view(code_).substr(0, n));
    if (!md.ok()) {
      EXPECT_EQ(md.status().code(), absl::StatusCode::kInvalidArgument) << n;
    }
  }
  int failures = 0;
  for (size_t at = 0; at < code_.size(); at += 7) {
    std::string damaged = code_;
    damaged[at] = static_cast<char>(damaged[at] ^ 0xA5);
    absl::StatusOr<CodeObjectMetadata> md = read_code_object_metadata(damaged);
    if (!md.ok()) {
      ++failures;
      EXPECT_EQ(md.status().code(), absl::StatusCode::kInvalidArgument) << at;
    }
  }
  EXPECT_GT(failures, 0);
}

TEST(TargetProcessor, DropsTheTripleAndTheTargetFeatures) {
  EXPECT_EQ(target_processor("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"), "gfx90a");
  EXPECT_EQ(target_processor("amdgcn-amd-amdhsa--gfx1030"), "gfx1030");
  EXPECT_EQ(target_processor("gfx908:xnack+"), "gfx908");
}

}  // namespace
}  // namespace kad::hsa
