#include "backends/opencl/opencl_backend.h"

#include <cstdlib>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/opencl/opencl_api.h"
#include "backends/opencl/opencl_device.h"
#include "backends/opencl/opencl_info.h"
#include "backends/opencl/opencl_status.h"

namespace kad::opencl {
namespace {

// Adds every device of `platform`; ids are "opencl:<platform>:<index>".
void add_platform(std::shared_ptr<const OpenClApi> api, cl_platform_id platform,
                  const std::string& short_name, bool timed_queues, Discovery* out) {
  const std::string name = query_string(api->clGetPlatformInfo, platform, CL_PLATFORM_NAME);
  cl_uint count = 0;
  cl_int err = api->clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count);
  if (err != CL_SUCCESS || count == 0) {
    out->log.push_back(
        absl::StrCat("opencl: platform \"", name, "\" has no device (", error_name(err), ")"));
    return;
  }
  std::vector<cl_device_id> ids(count);
  api->clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr);
  for (cl_uint i = 0; i < count; ++i) {
    absl::StatusOr<std::unique_ptr<OpenClDevice>> dev = OpenClDevice::create(
        api, platform, ids[i], absl::StrCat("opencl:", short_name, ":", i), timed_queues);
    if (!dev.ok()) {
      out->log.push_back(absl::StrCat("opencl: platform \"", name, "\" device ", i,
                                      " unusable: ", dev.status().message()));
      continue;
    }
    out->log.push_back(absl::StrCat("opencl: ", (*dev)->info().id, " \"", (*dev)->info().name,
                                    "\" on \"", name, "\" via ", api->origin));
    out->devices.push_back(std::move(*dev));
  }
}

// A short, stable platform tag for device ids: "pocl" or the lower-cased
// first word of the platform name, numbered when two platforms share it.
std::string short_platform_name(const std::string& name, std::map<std::string, int>* seen) {
  std::string tag;
  if (name == kPoclPlatformName) {
    tag = "pocl";
  } else {
    for (char c : name) {
      if (c == ' ') break;
      tag += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (tag.empty()) tag = "platform";
  }
  const int n = (*seen)[tag]++;
  return n == 0 ? tag : absl::StrCat(tag, n);
}

}  // namespace

Discovery discover(const DiscoveryOptions& options) {
  Discovery out;
  std::map<std::string, int> seen;
  bool have_pocl = false;

  absl::StatusOr<OpenClApi> loader = load_icd_loader(options.icd_loader);
  if (!loader.ok()) {
    out.log.push_back(absl::StrCat("opencl: ICD loader unavailable: ", loader.status().message()));
  } else {
    auto api = std::make_shared<const OpenClApi>(*std::move(loader));
    cl_uint count = 0;
    cl_int err = api->clGetPlatformIDs(0, nullptr, &count);
    if (err != CL_SUCCESS || count == 0) {
      out.log.push_back(
          absl::StrCat("opencl: the ICD loader lists no platform (", error_name(err), ")"));
    } else {
      std::vector<cl_platform_id> platforms(count);
      api->clGetPlatformIDs(count, platforms.data(), nullptr);
      for (cl_platform_id p : platforms) {
        const std::string name = query_string(api->clGetPlatformInfo, p, CL_PLATFORM_NAME);
        have_pocl |= name == kPoclPlatformName;
        add_platform(api, p, short_platform_name(name, &seen), options.timed_queues, &out);
      }
    }
  }

  if (have_pocl || options.embedded_pocl == nullptr) return out;
  absl::StatusOr<EmbeddedPlatform> pocl = load_embedded_pocl(options.embedded_pocl);
  if (!pocl.ok()) {
    out.log.push_back(absl::StrCat("opencl: embedded PoCL unavailable: ", pocl.status().message()));
    return out;
  }
  auto api = std::make_shared<const OpenClApi>(std::move(pocl->api));
  add_platform(api, pocl->platform, short_platform_name(kPoclPlatformName, &seen),
               options.timed_queues, &out);
  return out;
}

std::string pocl_cache_folder() {
  if (const char* dir = std::getenv("POCL_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return absl::StrCat(xdg, "/pocl/kcache");
  if (const char* home = std::getenv("HOME"); home && *home)
    return absl::StrCat(home, "/.cache/pocl/kcache");
  return {};
}

void keep_pocl_cache_in(const std::string& folder, bool specialize) {
  setenv("POCL_CACHE_DIR", folder.c_str(), 1);
  setenv("POCL_WORK_GROUP_SPECIALIZATION", specialize ? "1" : "0", 1);
}

void default_pocl_cache_to(const std::string& folder) {
  setenv("POCL_CACHE_DIR", folder.c_str(), /*overwrite=*/0);
}

}  // namespace kad::opencl
