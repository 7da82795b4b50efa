// DESIGN §3 conformance: static sizes that divide evenly leave no bounds
// check in the compiled code. Reads the LLVM IR that PoCL itself built for
// the kernel (program.bc in its kernel cache) — the generated program, not
// only its result.
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/pocl.h"
#include "tests/support/pocl_ir.h"

namespace kad {
namespace {

namespace fs = std::filesystem;
using testing::PoclTest;

// Set by main() before PoCL starts: a fresh kernel cache for this process.
const char* g_pocl_cache = nullptr;

// The IR of kernel `entry` as PoCL compiled it for this process.
std::string kernel_ir(const std::string& entry) {
  return testing::pocl_kernel_ir(KAD_LLVM_DIS, g_pocl_cache, entry);
}

class BoundsCheck : public PoclTest {
 protected:
  // Compiles and runs `entry` (the same body under another name), returns its IR.
  std::string compile(const std::string& entry, std::optional<NdRange> static_ndrange,
                      std::optional<Dims> static_workgroup, const NdRange& range,
                      const Dims* workgroup) {
    const std::string source = "kernel void " + entry + R"((KAD_CONTEXT, global long* out) {
  if (kad_active()) out[kad_global_linear()] = kad_global_index(0);
})";
    auto kernel =
        make_kernel(source, {entry, static_ndrange, static_workgroup, {ArgSpec::buffer()}, ""});
    int64_t n = 1;
    checked_product(range.extents, &n);
    auto out = make_buffer<int64_t>(static_cast<size_t>(n), -1);
    const KernelArg args[] = {KernelArg::of_buffer(*out)};
    auto r = run(*kernel, static_ndrange ? nullptr : &range, static_workgroup ? nullptr : workgroup,
                 args);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<int64_t> got = download<int64_t>(*out);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i], i % range.extents[0]);
    const std::string ir = kernel_ir(entry);
    EXPECT_FALSE(ir.empty()) << "no IR for " << entry << " under " << g_pocl_cache;
    return ir;
  }
};

TEST_F(BoundsCheck, StaticSizesThatDivideEvenlyLeaveNoCheck) {
  const NdRange range(Dims{64});
  const std::string ir = compile("even_1d", range, Dims{16}, range, nullptr);
  EXPECT_EQ(testing::count_of(ir, "br i1"), 0) << ir;
  EXPECT_EQ(testing::count_of(ir, "icmp"), 0) << ir;

  const NdRange range2(Dims{16, 8});
  const std::string ir2 = compile("even_2d", range2, Dims{4, 4}, range2, nullptr);
  EXPECT_EQ(testing::count_of(ir2, "br i1"), 0) << ir2;
  EXPECT_EQ(testing::count_of(ir2, "icmp"), 0) << ir2;
}

TEST_F(BoundsCheck, StaticSizesThatDoNotDivideKeepTheCheck) {
  const NdRange range(Dims{60});
  const std::string ir = compile("uneven_1d", range, Dims{16}, range, nullptr);
  EXPECT_GT(testing::count_of(ir, "icmp"), 0) << ir;
}

TEST_F(BoundsCheck, ADynamicNdrangeKeepsTheCheck) {
  const NdRange range(Dims{64});
  const Dims wg{16};
  const std::string ir = compile("dynamic_1d", std::nullopt, Dims{16}, range, &wg);
  EXPECT_GT(testing::count_of(ir, "icmp"), 0) << ir;
}

}  // namespace
}  // namespace kad

int main(int argc, char** argv) {
  // A private PoCL kernel cache, so that the IR read back is this run's.
  static char dir[] = "/tmp/kad-codegen-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 2;
  setenv("POCL_CACHE_DIR", dir, 1);
  kad::g_pocl_cache = dir;
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  std::filesystem::remove_all(dir);
  return result;
}
