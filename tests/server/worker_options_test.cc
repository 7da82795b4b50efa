// WorkerOptions describe the workers they start: where a test (or an
// embedder) builds them without naming PoCL's driver, the worker runs kad's
// default one, and the options must say what that driver needs (a binary
// built for one driver never loads into another: build_variant).
#include <gtest/gtest.h>

#include "server/worker/worker_pool.h"

namespace kad::server::worker {
namespace {

TEST(WorkerOptions, DefaultsAreThoseOfThePoclDriverAWorkerRunsWhenNoneIsNamed) {
  const WorkerOptions unnamed;
  WorkerOptions named;
  set_pocl_worker_driver(named, kDefaultPoclWorkerDriver);
  EXPECT_EQ(unnamed.kernels_hold_requests, named.kernels_hold_requests);
  EXPECT_EQ(unnamed.build_variant, named.build_variant);
}

TEST(WorkerOptions, EachPoclDriverHasABuildVariantOfItsOwn) {
  WorkerOptions basic, pthread;
  set_pocl_worker_driver(basic, "basic");
  set_pocl_worker_driver(pthread, "pthread");
  EXPECT_NE(basic.build_variant, pthread.build_variant);
  EXPECT_TRUE(basic.kernels_hold_requests);
  EXPECT_FALSE(pthread.kernels_hold_requests);
  EXPECT_EQ(basic.command.args.back(), "--pocl-worker-driver=basic");
  EXPECT_EQ(pthread.command.args.back(), "--pocl-worker-driver=pthread");
}

}  // namespace
}  // namespace kad::server::worker
