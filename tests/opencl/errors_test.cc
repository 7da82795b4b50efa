// Every misuse of DESIGN §3 and the issue's list returns a status whose
// message names the kernel, the values and the limit. Real kernels on PoCL.
#include <limits>
#include <string>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/pocl.h"

namespace kad {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::PoclTest;

constexpr char kFill[] = R"(
kernel void fill(KAD_CONTEXT, global int* out, int value) {
  if (kad_active()) out[kad_global_linear()] = value;
}
)";

KernelSignature fill_signature() {
  return {"fill",
          std::nullopt,
          std::nullopt,
          {ArgSpec::buffer(), ArgSpec::scalar_of(ScalarType::kI32)},
          ""};
}

class Errors : public PoclTest {
 protected:
  void SetUp() override {
    PoclTest::SetUp();
    out_ = make_buffer<int32_t>(1024, 0);
    args_[0] = KernelArg::of_buffer(*out_);
    args_[1] = KernelArg::of_scalar(int32_t{5});
  }
  absl::Status launch_fill(const KernelSignature& sig, const NdRange* range, const Dims* wg) {
    auto kernel = make_kernel(kFill, sig);
    return run(*kernel, range, wg, args_).status();
  }
  std::unique_ptr<Buffer> out_;
  KernelArg args_[2];
};

TEST_F(Errors, MismatchedStaticNdrangeNamesBoth) {
  KernelSignature sig = fill_signature();
  sig.static_ndrange = NdRange(Dims{16});
  const NdRange given(Dims{17});
  absl::Status s = launch_fill(sig, &given, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "kernel `fill`: static ndrange (16) and launch ndrange (17) differ");
}

TEST_F(Errors, MismatchedStaticWorkgroupNamesBoth) {
  KernelSignature sig = fill_signature();
  sig.static_workgroup = Dims{8};
  const NdRange range(Dims{16});
  const Dims wg{4};
  absl::Status s = launch_fill(sig, &range, &wg);
  EXPECT_EQ(s.message(),
            "kernel `fill`: static workgroup size (8) and launch workgroup size (4) differ");
}

TEST_F(Errors, MissingDynamicNdrangeIsNamed) {
  absl::Status s = launch_fill(fill_signature(), nullptr, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "cannot partition kernel `fill`: its ndrange is dynamic and the launch gave none");
}

TEST_F(Errors, WorkgroupLargerThanTheDeviceAllowsNamesTheLimit) {
  const uint64_t max = device().info().limits.max_workgroup_size;
  const NdRange range(Dims{static_cast<int64_t>(4 * max)});
  const Dims wg{static_cast<int64_t>(2 * max)};
  absl::Status s = launch_fill(fill_signature(), &range, &wg);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("kernel `fill`"), HasSubstr("(" + std::to_string(2 * max) + ")"),
                    HasSubstr(std::to_string(max))));
}

TEST_F(Errors, WorkgroupOverTheTotalButWithinEachDimensionNamesTheSizeGiven) {
  const uint64_t max = device().info().limits.max_workgroup_size;
  const NdRange range(Dims{64, 256});
  const Dims wg{64, static_cast<int64_t>(max / 32)};  // 2x the maximum in total
  absl::Status s = launch_fill(fill_signature(), &range, &wg);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()),
            absl::StrFormat("kernel `fill`: workgroup size (64, %d) has %d work-items, more than "
                            "%d, the device's maximum",
                            max / 32, 2 * max, max));
}

TEST_F(Errors, ThreeDimensionalWorkgroupOverTheMaximumIsReportedAsGiven) {
  // Reported once as (8192, 1, 1): the padded hardware shape, not the client's.
  const NdRange range(Dims{64, 64, 2});
  const Dims wg{64, 64, 2};
  absl::Status s = launch_fill(fill_signature(), &range, &wg);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("workgroup size (64, 64, 2) has 8192 work-items, more than"));
}

TEST_F(Errors, MoreThanTwoToTheSixtyThreeWorkItemsIsRejectedBeforeCompiling) {
  const NdRange range(Dims{int64_t{1} << 40, int64_t{1} << 40});
  absl::Status s = launch_fill(fill_signature(), &range, nullptr);
  EXPECT_EQ(s.message(),
            "kernel `fill`: iteration space (1099511627776, 1099511627776) has more than "
            "2^63-1 work-items");
  EXPECT_EQ(cache().stats().compilations, 0u);
}

TEST_F(Errors, WrongArgumentCountNamesBothCounts) {
  auto kernel = make_kernel(kFill, fill_signature());
  const NdRange range(Dims{16});
  auto r = run(*kernel, &range, nullptr, std::span<const KernelArg>(args_, 1));
  EXPECT_EQ(r.status().message(), "kernel `fill` takes 2 arguments, the launch gave 1");
}

TEST_F(Errors, WrongArgumentKindNamesTheArgument) {
  auto kernel = make_kernel(kFill, fill_signature());
  const NdRange range(Dims{16});
  const KernelArg swapped[] = {args_[1], args_[0]};
  auto r = run(*kernel, &range, nullptr, swapped);
  EXPECT_EQ(r.status().message(),
            "kernel `fill`: argument 0 must be a buffer, the launch gave a int");
  const KernelArg wrong_type[] = {args_[0], KernelArg::of_scalar(5.0f)};
  r = run(*kernel, &range, nullptr, wrong_type);
  EXPECT_EQ(r.status().message(),
            "kernel `fill`: argument 1 must be a int, the launch gave a float");
}

TEST_F(Errors, ConstBufferAliasedByAWrittenOneIsRejected) {
  constexpr char kCopy[] = R"(
kernel void copy(KAD_CONTEXT, global int* dst, const global int* restrict src) {
  if (kad_active()) dst[kad_global_linear()] = src[kad_global_linear()];
}
)";
  auto kernel = make_kernel(
      kCopy,
      {"copy", std::nullopt, std::nullopt, {ArgSpec::buffer(), ArgSpec::const_buffer()}, ""});
  const NdRange range(Dims{16});
  const KernelArg args[] = {KernelArg::of_buffer(*out_), KernelArg::of_buffer(*out_)};
  auto r = run(*kernel, &range, nullptr, args);
  EXPECT_EQ(r.status().message(),
            "kernel `copy`: const buffer argument 1 is also passed as written argument 0");
}

TEST_F(Errors, SignatureThatDisagreesWithTheSourceFailsAtCompileTime) {
  KernelSignature sig = fill_signature();
  sig.args[1] = ArgSpec::scalar_of(ScalarType::kF32);
  const NdRange range(Dims{16});
  auto kernel = make_kernel(kFill, sig);
  const KernelArg args[] = {args_[0], KernelArg::of_scalar(1.0f)};
  auto r = run(*kernel, &range, nullptr, args);
  EXPECT_EQ(r.status().message(),
            "kernel `fill`: argument 1 is declared a float but the kernel's parameter `value` "
            "has type `int`");
  sig.args.pop_back();
  kernel = make_kernel(kFill, sig);
  r = run(*kernel, &range, nullptr, std::span<const KernelArg>(args_, 1));
  EXPECT_EQ(r.status().message(),
            "kernel `fill` has 2 parameters after KAD_CONTEXT, its signature declares 1");
  EXPECT_EQ(cache().stats().failures, 2u);
}

TEST_F(Errors, KernelThatDoesNotCompileReturnsTheCompilerLog) {
  constexpr char kBroken[] = R"(
kernel void fill(KAD_CONTEXT, global int* out, int value) {
  out[kad_global_linear()] = undeclared_name + value;
}
)";
  auto kernel = make_kernel(kBroken, fill_signature());
  const NdRange range(Dims{16});
  auto r = run(*kernel, &range, nullptr, args_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              AllOf(HasSubstr("kernel `fill` did not compile for device opencl:pocl:0"),
                    HasSubstr("undeclared identifier 'undeclared_name'"),
                    HasSubstr("kernel.cl:3:")));  // the user's own line number
  EXPECT_THAT(std::string(r.status().message()), Not(HasSubstr("/tmp/")));
  // A failed compile is not cached: the fixed source compiles.
  EXPECT_TRUE(launch_fill(fill_signature(), &range, nullptr).ok());
}

TEST_F(Errors, MissingEntryPointIsNotFound) {
  KernelSignature sig = fill_signature();
  sig.entry = "fil";
  const NdRange range(Dims{16});
  absl::Status s = launch_fill(sig, &range, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "module has no kernel named `fil`");
}

TEST_F(Errors, BufferAccessOutsideItsSizeIsOutOfRange) {
  std::vector<std::byte> data(16);
  absl::Status s = queue().write_buffer(*out_, 4090, data);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "range of 16 bytes at offset 4090 does not fit in a buffer of 4096 bytes");
  s = queue().read_buffer(*out_, std::numeric_limits<uint64_t>::max(), data);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
}

TEST_F(Errors, WaitingForAnEventNeverIssuedIsAnError) {
  absl::Status s = queue().wait(12345);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("event 12345 was never issued"));
}

TEST_F(Errors, ZeroByteAndOversizedAllocationsAreRefused) {
  EXPECT_EQ(device().allocate(0).status().code(), absl::StatusCode::kInvalidArgument);
  auto huge = device().allocate(std::numeric_limits<uint64_t>::max() / 2);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("largest allocation"));
}

TEST_F(Errors, AMalformedModuleIsRefusedNamingItsFormat) {
  auto m = Module::create(ModuleFormat::kSpirv, "\x03\x02\x23\x07");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("SPIR-V module"));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("header"));
}

TEST_F(Errors, DeviceCodeForAnotherKindOfDeviceIsRefusedAtCompile) {
  auto module = Module::create(ModuleFormat::kPtx, ".version 7.8\n.target sm_80\n");
  ASSERT_TRUE(module.ok()) << module.status();
  auto kernel = Kernel::create(*module, fill_signature());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const NdRange range(Dims{16});
  auto r = run(**kernel, &range, nullptr, args_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("cannot run a PTX module"));
}

TEST_F(Errors, InvalidSignaturesAreRejectedWhenTheKernelIsCreated) {
  auto module = Module::create(ModuleFormat::kOpenClC, kFill);
  ASSERT_TRUE(module.ok());
  KernelSignature sig = fill_signature();
  sig.entry = "not a name";
  EXPECT_THAT(std::string(Kernel::create(*module, sig).status().message()),
              HasSubstr("not a valid identifier"));
  sig = fill_signature();
  sig.static_ndrange = NdRange(Dims{4});
  sig.static_workgroup = Dims{2, 2};
  EXPECT_THAT(std::string(Kernel::create(*module, sig).status().message()),
              HasSubstr("workgroup size (2, 2) has 2 dimensions, more than the ndrange (4)"));
  sig = fill_signature();
  sig.args.assign(kMaxKernelArgs + 1, ArgSpec::buffer());
  EXPECT_THAT(std::string(Kernel::create(*module, sig).status().message()),
              HasSubstr("more than the maximum"));
}

}  // namespace
}  // namespace kad
