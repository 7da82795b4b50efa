// What a worker may answer on a lent channel without kad (served_channel.h):
// a synchronous launch like the plan's in all but its tag and its scalars'
// values. Anything kad checked — the kernel, the shape, the arguments'
// kinds, the buffers, the local sizes — must be the plan's, or kad serves it.
#include "server/worker/served_channel.h"

#include "gtest/gtest.h"

namespace kad::server::worker {
namespace {

using shm::v1::ArgKind;
using shm::v1::SubmitRecord;

SubmitRecord saxpy_like() {
  SubmitRecord r{};
  r.op = static_cast<uint32_t>(shm::v1::Op::kRun);
  r.flags = shm::v1::kHasNdrange | shm::v1::kHasWorkgroup;
  r.tag = 1;
  r.kernel = 3;
  r.rank = 1;
  r.extents[0] = 1024;
  r.workgroup_rank = 1;
  r.workgroup[0] = 64;
  r.nargs = 3;
  r.args[0] = {static_cast<uint8_t>(ArgKind::kBuffer), 0, {}, 7};
  r.args[1] = {static_cast<uint8_t>(ArgKind::kScalar), 10, {}, 0x40000000};
  r.args[2] = {static_cast<uint8_t>(ArgKind::kLocal), 0, {}, 256};
  return r;
}

TEST(SamePlan, ATagAndAScalarsValueMayDiffer) {
  const SubmitRecord key = saxpy_like();
  SubmitRecord r = key;
  r.tag = 99;
  r.args[1].value = 0x3f800000;
  r.args[5].value = 12345;  // past nargs: not the launch's
  r.extents[3] = 9;         // past the rank: not the launch's
  EXPECT_TRUE(same_plan(key, r));
}

TEST(SamePlan, ARunAndAPipelinedLaunchShareAPlanAndNothingElseDoes) {
  const SubmitRecord run = saxpy_like();
  SubmitRecord submit = run;
  submit.op = static_cast<uint32_t>(shm::v1::Op::kSubmit);
  EXPECT_TRUE(same_plan(run, submit));
  EXPECT_TRUE(same_plan(submit, run));
  for (const shm::v1::Op op : {shm::v1::Op::kLaunch, shm::v1::Op::kWait, shm::v1::Op::kPing,
                               shm::v1::Op::kCopyIn, shm::v1::Op::kCopyOut}) {
    SubmitRecord other = run;
    other.op = static_cast<uint32_t>(op);
    EXPECT_FALSE(same_plan(run, other)) << static_cast<int>(op);
    EXPECT_FALSE(same_plan(other, other)) << static_cast<int>(op);
  }
}

TEST(SamePlan, AnythingKadCheckedMustBeThePlans) {
  const SubmitRecord key = saxpy_like();
  auto differs = [&](auto change) {
    SubmitRecord r = key;
    change(r);
    return !same_plan(key, r);
  };
  EXPECT_TRUE(differs([](SubmitRecord& r) { r.op = static_cast<uint32_t>(shm::v1::Op::kLaunch); }));
  EXPECT_TRUE(differs([](SubmitRecord& r) { r.kernel = 4; }));
  EXPECT_TRUE(differs([](SubmitRecord& r) { r.flags |= shm::v1::kHasOffsets; }));
  EXPECT_TRUE(differs([](SubmitRecord& r) { r.extents[0] = 1025; }));
  EXPECT_TRUE(differs([](SubmitRecord& r) { r.workgroup[0] = 32; }));
  EXPECT_TRUE(differs([](SubmitRecord& r) { r.rank = 2; }));
  EXPECT_TRUE(differs([](SubmitRecord& r) { r.nargs = 2; }));
  EXPECT_TRUE(differs([](SubmitRecord& r) { r.args[0].value = 8; }));    // another buffer
  EXPECT_TRUE(differs([](SubmitRecord& r) { r.args[1].scalar = 9; }));   // another type
  EXPECT_TRUE(differs([](SubmitRecord& r) { r.args[2].value = 512; }));  // more local memory
  EXPECT_TRUE(
      differs([](SubmitRecord& r) { r.args[1].kind = static_cast<uint8_t>(ArgKind::kBuffer); }));
}

TEST(SamePlan, OffsetsCountOnlyWhereTheLaunchGivesThem) {
  SubmitRecord key = saxpy_like();
  SubmitRecord r = key;
  r.offsets[0] = 5;
  EXPECT_TRUE(same_plan(key, r));
  key.flags |= shm::v1::kHasOffsets;
  r.flags |= shm::v1::kHasOffsets;
  EXPECT_FALSE(same_plan(key, r));
}

}  // namespace
}  // namespace kad::server::worker
