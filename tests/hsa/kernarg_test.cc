// The kernarg layout and packer: where the context and each argument of a
// launch land, checked against the metadata of real code objects (and of
// hand-written code object v5 metadata, which LLVM 15 does not emit).
#include <cstring>
#include <vector>

#include "backends/hsa/hsa_kernarg.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hsa/amdgcn_code_objects.h"

namespace kad::hsa {
namespace {

using ::testing::HasSubstr;

constexpr std::byte kFill{0xAB};  // what the segment held before packing

// The packer hands buffer pointers to the BufferAddress it is given and
// never dereferences them: stand-in pointers carry the addresses here.
Buffer* buffer_at(uintptr_t address) { return reinterpret_cast<Buffer*>(address); }
uint64_t address_of(const Buffer* buffer) { return reinterpret_cast<uint64_t>(buffer); }

KernelArg buffer_arg(uintptr_t address, ArgKind kind = ArgKind::kBuffer) {
  KernelArg a;
  a.kind = kind;
  a.buffer = buffer_at(address);
  return a;
}

LaunchContext sample_context() {
  LaunchContext c;
  int64_t* words = reinterpret_cast<int64_t*>(&c);
  for (size_t i = 0; i < sizeof(c) / sizeof(int64_t); ++i)
    words[i] = 0x1111111111111111 * (i % 15 + 1);
  return c;
}

template <typename T>
T at(const std::vector<std::byte>& segment, size_t offset) {
  T value;
  std::memcpy(&value, segment.data() + offset, sizeof(T));
  return value;
}

void expect_zero(const std::vector<std::byte>& segment, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) EXPECT_EQ(segment[i], std::byte{0}) << "byte " << i;
}

class KernargTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<std::string>& code = testing::many_args_code_object();
    ASSERT_TRUE(code.ok()) << code.status();
    absl::StatusOr<CodeObjectMetadata> md = read_code_object_metadata(*code);
    ASSERT_TRUE(md.ok()) << md.status();
    metadata_ = *std::move(md);
  }
  const KernelMetadata& kernel(absl::string_view name) { return *metadata_.find_kernel(name); }

  CodeObjectMetadata metadata_;
  std::vector<std::byte> segment_ = std::vector<std::byte>(4096, kFill);
};

TEST_F(KernargTest, LayoutTakesEveryArgumentFromTheMetadata) {
  absl::StatusOr<KernargLayout> layout =
      make_kernarg_layout(kernel("many_args"), testing::many_args_signature());
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->size, 304u);
  EXPECT_EQ(layout->context_offset, 0u);
  EXPECT_EQ(layout->group_segment_fixed, 256u);
  EXPECT_TRUE(layout->hidden.empty());
  const uint32_t offsets[] = {256, 264, 272, 276, 280, 288, 296, 300};
  const uint32_t sizes[] = {8, 8, 4, 1, 4, 8, 2, 4};
  ASSERT_EQ(layout->args.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(layout->args[i].offset, offsets[i]) << "argument " << i;
    EXPECT_EQ(layout->args[i].size, sizes[i]) << "argument " << i;
    EXPECT_EQ(layout->args[i].kind, testing::many_args_signature().args[i].kind);
  }
  EXPECT_EQ(layout->args[4].align, kLocalAlignment);  // int: 4, raised to 16
  EXPECT_EQ(layout->args[7].align, 16u);              // float4
}

TEST_F(KernargTest, PackingPlacesTheContextAndEveryArgumentAtItsOffset) {
  absl::StatusOr<KernargLayout> layout =
      make_kernarg_layout(kernel("many_args"), testing::many_args_signature());
  ASSERT_TRUE(layout.ok()) << layout.status();
  const KernelArg args[] = {
      buffer_arg(0x7f0000001000),        buffer_arg(0x7f0000002000, ArgKind::kConstBuffer),
      KernelArg::of_scalar(2.5f),        KernelArg::of_scalar<uint8_t>(200),
      KernelArg::of_local(100),          KernelArg::of_scalar<uint64_t>(0x123456789abcdef0),
      KernelArg::of_scalar<int16_t>(-3), KernelArg::of_local(64)};
  const LaunchContext context = sample_context();
  absl::StatusOr<uint32_t> group =
      pack_kernargs(*layout, context, args, LaunchGeometry{}, &address_of, segment_);
  ASSERT_TRUE(group.ok()) << group.status();

  EXPECT_EQ(std::memcmp(segment_.data(), &context, sizeof(context)), 0);
  EXPECT_EQ(at<uint64_t>(segment_, 256), 0x7f0000001000u);
  EXPECT_EQ(at<uint64_t>(segment_, 264), 0x7f0000002000u);
  EXPECT_EQ(at<float>(segment_, 272), 2.5f);
  EXPECT_EQ(at<uint8_t>(segment_, 276), 200);
  // Local memory follows the kernel's 256 static bytes, each argument's at
  // a multiple of 16: [256, 356) and [368, 432).
  EXPECT_EQ(at<uint32_t>(segment_, 280), 256u);
  EXPECT_EQ(at<uint64_t>(segment_, 288), 0x123456789abcdef0u);
  EXPECT_EQ(at<int16_t>(segment_, 296), -3);
  EXPECT_EQ(at<uint32_t>(segment_, 300), 368u);
  EXPECT_EQ(*group, 432u);
  // Padding between arguments is zero; bytes past the segment are untouched.
  expect_zero(segment_, 277, 280);
  expect_zero(segment_, 284, 288);
  expect_zero(segment_, 298, 300);
  for (size_t i = 304; i < segment_.size(); ++i) ASSERT_EQ(segment_[i], kFill) << "byte " << i;
}

TEST_F(KernargTest, HiddenArgumentsAreZeroNotLeftOver) {
  KernelSignature sig;
  sig.entry = "wide";
  sig.args = {ArgSpec::buffer()};
  absl::StatusOr<KernargLayout> layout = make_kernarg_layout(kernel("wide"), sig);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->size, 320u);
  const KernelArg args[] = {buffer_arg(0x7f0000003000)};
  LaunchGeometry geometry;
  geometry.groups = {4, 1, 1};
  geometry.items = {256, 1, 1};
  absl::StatusOr<uint32_t> group =
      pack_kernargs(*layout, sample_context(), args, geometry, &address_of, segment_);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(*group, 0u);
  EXPECT_EQ(at<uint64_t>(segment_, 256), 0x7f0000003000u);
  // hidden_global_offset_{x,y,z} at 264..288, then hidden_none up to 320.
  expect_zero(segment_, 264, 320);
  EXPECT_EQ(segment_[320], kFill);
}

TEST_F(KernargTest, ASignatureWithTooFewArgumentsIsRejected) {
  KernelSignature sig = testing::many_args_signature();
  sig.args.pop_back();
  absl::StatusOr<KernargLayout> layout = make_kernarg_layout(kernel("many_args"), sig);
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layout.status().message()),
              HasSubstr("kernel `many_args` has 8 parameters after KAD_CONTEXT, its signature "
                        "declares 7"));
}

TEST_F(KernargTest, AScalarOfAnotherTypeIsRejectedNamingTheParameter) {
  KernelSignature sig = testing::many_args_signature();
  sig.args[3] = ArgSpec::scalar_of(ScalarType::kF32);  // the kernel's is uchar
  absl::StatusOr<KernargLayout> layout = make_kernarg_layout(kernel("many_args"), sig);
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layout.status().message()),
              HasSubstr("argument 3 is declared a float but the kernel's parameter is `uchar`"));
}

TEST_F(KernargTest, AConstBufferNeedsAConstParameter) {
  KernelSignature sig = testing::many_args_signature();
  sig.args[0] = ArgSpec::const_buffer();  // `global float* out` is written
  absl::StatusOr<KernargLayout> layout = make_kernarg_layout(kernel("many_args"), sig);
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layout.status().message()),
              HasSubstr("argument 0 is declared a const buffer"));
}

TEST_F(KernargTest, ALocalParameterIsNotABuffer) {
  KernelSignature sig = testing::many_args_signature();
  sig.args[4] = ArgSpec::buffer();
  absl::StatusOr<KernargLayout> layout = make_kernarg_layout(kernel("many_args"), sig);
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layout.status().message()),
              HasSubstr("argument 4 is declared a buffer but the kernel's parameter is `int*` "
                        "(dynamic_shared_pointer"));
}

TEST_F(KernargTest, PackingTheWrongNumberOfArgumentsIsAnError) {
  absl::StatusOr<KernargLayout> layout =
      make_kernarg_layout(kernel("many_args"), testing::many_args_signature());
  ASSERT_TRUE(layout.ok()) << layout.status();
  const KernelArg args[] = {buffer_arg(0x1000)};
  absl::StatusOr<uint32_t> group =
      pack_kernargs(*layout, sample_context(), args, LaunchGeometry{}, &address_of, segment_);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(group.status().message()),
              HasSubstr("takes 8 arguments, the launch gave 1"));
}

TEST_F(KernargTest, ASegmentThatDoesNotFitIsAnError) {
  absl::StatusOr<KernargLayout> layout =
      make_kernarg_layout(kernel("many_args"), testing::many_args_signature());
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::span<std::byte> small(segment_.data(), 100);
  absl::StatusOr<uint32_t> group =
      pack_kernargs(*layout, sample_context(), {}, LaunchGeometry{}, &address_of, small);
  EXPECT_FALSE(group.ok());
  EXPECT_EQ(segment_[0], kFill);
}

// Hand-written metadata in the shape of code object v5 (LLVM 16 and later).
ArgMetadata arg(const char* kind, uint32_t offset, uint32_t size) {
  ArgMetadata a;
  a.value_kind = kind;
  a.kind = arg_value_kind(kind);
  a.offset = offset;
  a.size = size;
  return a;
}

KernelMetadata v5_kernel() {
  KernelMetadata k;
  k.name = k.symbol = "v5";
  k.kernarg_segment_align = 8;
  k.max_flat_workgroup_size = 1024;
  k.wavefront_size = 64;
  k.args = {arg("by_value", 0, 256),
            arg("global_buffer", 256, 8),
            arg("dynamic_shared_pointer", 264, 4),
            arg("hidden_block_count_x", 272, 4),
            arg("hidden_block_count_y", 276, 4),
            arg("hidden_block_count_z", 280, 4),
            arg("hidden_group_size_x", 284, 2),
            arg("hidden_group_size_y", 286, 2),
            arg("hidden_group_size_z", 288, 2),
            arg("hidden_remainder_x", 290, 2),
            arg("hidden_grid_dims", 296, 2),
            arg("hidden_dynamic_lds_size", 300, 4),
            arg("hidden_queue_ptr", 304, 8)};
  k.args[2].pointee_align = 8;
  k.kernarg_segment_size = 312;
  return k;
}

TEST(KernargV5, HiddenGeometryIsFilledAndTheRestZeroed) {
  KernelSignature sig;
  sig.entry = "v5";
  sig.args = {ArgSpec::buffer(), ArgSpec::local()};
  absl::StatusOr<KernargLayout> layout = make_kernarg_layout(v5_kernel(), sig);
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<std::byte> segment(512, kFill);
  LaunchGeometry geometry;
  geometry.groups = {10, 2, 1};
  geometry.items = {64, 4, 1};
  const KernelArg args[] = {buffer_arg(0x2000), KernelArg::of_local(100)};
  absl::StatusOr<uint32_t> group =
      pack_kernargs(*layout, sample_context(), args, geometry, &address_of, segment);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(*group, 100u);
  EXPECT_EQ(at<uint32_t>(segment, 264), 0u);  // the local memory's offset
  EXPECT_EQ(at<uint32_t>(segment, 272), 10u);
  EXPECT_EQ(at<uint32_t>(segment, 276), 2u);
  EXPECT_EQ(at<uint32_t>(segment, 280), 1u);
  EXPECT_EQ(at<uint16_t>(segment, 284), 64u);
  EXPECT_EQ(at<uint16_t>(segment, 286), 4u);
  EXPECT_EQ(at<uint16_t>(segment, 288), 1u);
  EXPECT_EQ(at<uint16_t>(segment, 290), 0u);  // whole groups: no remainder
  EXPECT_EQ(at<uint16_t>(segment, 296), 3u);
  EXPECT_EQ(at<uint32_t>(segment, 300), 100u);
  EXPECT_EQ(at<uint64_t>(segment, 304), 0u);  // no queue pointer
  EXPECT_EQ(segment[312], kFill);
}

TEST(KernargV5, AKernelThatCallsPrintfIsRejected) {
  KernelMetadata k = v5_kernel();
  k.args.back() = arg("hidden_printf_buffer", 304, 8);
  KernelSignature sig;
  sig.entry = "v5";
  sig.args = {ArgSpec::buffer(), ArgSpec::local()};
  absl::StatusOr<KernargLayout> layout = make_kernarg_layout(k, sig);
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layout.status().message()), HasSubstr("printf"));
}

TEST(KernargV5, TheFirstParameterMustBeTheContext) {
  KernelMetadata k = v5_kernel();
  k.args[0] = arg("global_buffer", 0, 8);
  KernelSignature sig;
  sig.entry = "v5";
  sig.args = {ArgSpec::buffer(), ArgSpec::local()};
  absl::StatusOr<KernargLayout> layout = make_kernarg_layout(k, sig);
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layout.status().message()),
              HasSubstr("the first parameter must be KAD_CONTEXT"));
}

TEST(KernargV5, AnImageParameterIsRejected) {
  KernelMetadata k = v5_kernel();
  k.args[1] = arg("image", 256, 8);
  KernelSignature sig;
  sig.entry = "v5";
  sig.args = {ArgSpec::buffer(), ArgSpec::local()};
  absl::StatusOr<KernargLayout> layout = make_kernarg_layout(k, sig);
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layout.status().message()), HasSubstr("argument 0 is of kind `image`"));
}

}  // namespace
}  // namespace kad::hsa
