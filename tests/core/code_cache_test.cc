// The on-disk half of the kernel cache (DESIGN §5): entries found again by a
// new cache on the same folder, corrupt or mismatched entries discarded and
// never trusted, stores atomic, the folder bounded with LRU eviction.
#include "core/code_cache.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"

namespace kad {
namespace {

namespace fs = std::filesystem;

class CodeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() /
              ("kad-code-cache-" + std::to_string(getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    if (!fs::exists(folder_)) return out;
    for (const auto& e : fs::directory_iterator(folder_)) out.push_back(e.path());
    return out;
  }
  fs::path folder_;
};

TEST_F(CodeCacheTest, StoredCodeIsFoundByANewCacheOnTheSameFolder) {
  {
    CodeCache cache(folder_.string(), 1 << 20);
    EXPECT_FALSE(cache.load("key a").has_value());
    cache.store("key a", std::string("PTX\0with nul", 12));
    EXPECT_EQ(cache.stats().stores, 1u);
  }
  CodeCache restarted(folder_.string(), 1 << 20);
  std::optional<std::string> code = restarted.load("key a");
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, std::string("PTX\0with nul", 12));
  EXPECT_FALSE(restarted.load("key b").has_value());
  EXPECT_EQ(restarted.stats().hits, 1u);
  EXPECT_EQ(restarted.stats().misses, 1u);
  // No temporary file is left behind.
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_EQ(entries()[0].extension(), ".kadc");
}

TEST_F(CodeCacheTest, CorruptPayloadIsDiscardedNotTrusted) {
  CodeCache cache(folder_.string(), 1 << 20);
  cache.store("key", "the lowered code");
  ASSERT_EQ(entries().size(), 1u);
  {
    std::fstream f(entries()[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.write("XYZ", 3);  // same size, different bytes: only the digest can tell
  }
  EXPECT_FALSE(cache.load("key").has_value());
  EXPECT_EQ(cache.stats().discarded, 1u);
  EXPECT_TRUE(entries().empty());  // deleted, to be rebuilt
  cache.store("key", "the lowered code");
  EXPECT_EQ(cache.load("key").value_or(""), "the lowered code");
}

TEST_F(CodeCacheTest, TruncatedOrForeignFilesAreDiscarded) {
  CodeCache cache(folder_.string(), 1 << 20);
  cache.store("key", "0123456789");
  ASSERT_EQ(entries().size(), 1u);
  fs::resize_file(entries()[0], fs::file_size(entries()[0]) - 4);
  EXPECT_FALSE(cache.load("key").has_value());
  cache.store("key", "0123456789");
  std::ofstream(entries()[0], std::ios::trunc) << "not a kad cache entry";
  EXPECT_FALSE(cache.load("key").has_value());
  EXPECT_EQ(cache.stats().discarded, 2u);
}

// The file is named by the key's hash; the key inside must match as well.
TEST_F(CodeCacheTest, EntryCopiedUnderAnotherKeysNameIsNotServed) {
  CodeCache cache(folder_.string(), 1 << 20);
  cache.store("key one", "code one");
  cache.store("key two", "code two");
  ASSERT_EQ(entries().size(), 2u);
  const fs::path a = entries()[0], b = entries()[1];
  fs::copy_file(a, b, fs::copy_options::overwrite_existing);
  int served = 0;
  for (const char* key : {"key one", "key two"}) {
    std::optional<std::string> code = cache.load(key);
    if (code) {
      ++served;
      EXPECT_EQ(*code, std::string(key) == "key one" ? "code one" : "code two");
    }
  }
  EXPECT_EQ(served, 1);
  EXPECT_EQ(cache.stats().discarded, 1u);
}

TEST_F(CodeCacheTest, OverTheBoundTheLeastRecentlyUsedEntriesAreEvicted) {
  const std::string code(1000, 'x');
  CodeCache cache(folder_.string(), 3500);  // room for three entries of ~1.1 kB
  cache.store("a", code);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cache.store("b", code);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cache.store("c", code);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(cache.load("a").has_value());  // a is now the most recently used
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cache.store("d", code);
  EXPECT_EQ(cache.stats().evicted, 1u);
  EXPECT_TRUE(cache.load("a").has_value());
  EXPECT_FALSE(cache.load("b").has_value());  // the least recently used
  EXPECT_TRUE(cache.load("c").has_value());
  EXPECT_TRUE(cache.load("d").has_value());
}

TEST_F(CodeCacheTest, EmptyFolderDisablesTheCache) {
  CodeCache cache("", 1 << 20);
  EXPECT_FALSE(cache.enabled());
  cache.store("key", "code");
  EXPECT_FALSE(cache.load("key").has_value());
  EXPECT_EQ(cache.stats().stores, 0u);
}

TEST_F(CodeCacheTest, EnvironmentNamesTheFolderAndOffDisablesIt) {
  setenv("KAD_CACHE_DIR", folder_.c_str(), 1);
  EXPECT_EQ(CodeCache::from_environment().folder(), folder_.string());
  setenv("KAD_CACHE_DIR", "off", 1);
  EXPECT_FALSE(CodeCache::from_environment().enabled());
  unsetenv("KAD_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/somewhere", 1);
  EXPECT_EQ(CodeCache::from_environment().folder(), "/somewhere/kad");
  unsetenv("XDG_CACHE_HOME");
}

// systemd's CacheDirectory=kad: kad's own folder, before the user's.
TEST_F(CodeCacheTest, AServiceManagersCacheDirectoryIsTheFolderBeforeTheUsers) {
  setenv("XDG_CACHE_HOME", "/somewhere", 1);
  setenv("CACHE_DIRECTORY", "/var/cache/kad:/var/cache/other", 1);
  EXPECT_EQ(CodeCache::from_environment().folder(), "/var/cache/kad");
  setenv("KAD_CACHE_DIR", folder_.c_str(), 1);  // kad's own variable still wins
  EXPECT_EQ(CodeCache::from_environment().folder(), folder_.string());
  unsetenv("KAD_CACHE_DIR");
  unsetenv("CACHE_DIRECTORY");
  unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace kad
