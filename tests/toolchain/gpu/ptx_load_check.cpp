// Loads each PTX file with the CUDA driver (JIT for this GPU), launches the
// conformance kernel `indices` over a small ndrange and checks the global
// linear index of every work-item. Built and run on the GPU machine.
#include <cuda.h>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#define CHECK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* n; cuGetErrorName(r, &n); std::printf("FAIL %s: %s\n", #x, n); return 1; } } while (0)

struct Ctx { long extent[8], offset[8], groupsize[8], ngroups[8]; };

int main(int argc, char** argv) {
  CHECK(cuInit(0));
  CUdevice dev; CHECK(cuDeviceGet(&dev, 0));
  char name[256]; cuDeviceGetName(name, sizeof(name), dev);
  int major, minor; cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  std::printf("device: %s (sm_%d%d)\n", name, major, minor);
  CUcontext ctx; CHECK(cuDevicePrimaryCtxRetain(&ctx, dev)); CHECK(cuCtxSetCurrent(ctx));
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i]); std::stringstream ss; ss << in.rdbuf(); std::string ptx = ss.str();
    const bool nd1 = std::strstr(argv[i], "-r1-nd-32") != nullptr;
    CUmodule mod; char log[4096] = {};
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* vals[] = {log, (void*)(size_t)sizeof(log)};
    CUresult r = cuModuleLoadDataEx(&mod, ptx.c_str(), 2, opts, vals);
    if (r != CUDA_SUCCESS) { std::printf("FAIL JIT %s: %s\n", argv[i], log); ++failures; continue; }
    CUfunction f; CHECK(cuModuleGetFunction(&f, mod, "indices"));
    int regs = 0; cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
    std::printf("ok: %s JIT-compiled for sm_%d%d (%d registers)\n", argv[i], major, minor, regs);
    if (!nd1) continue;
    // Rank 1, N-d, 32-bit, dynamic: 1000 items in groups of 128.
    const long n = 1000, wg = 128, groups = (n + wg - 1) / wg;
    Ctx c{}; for (int d = 0; d < 8; ++d) { c.extent[d] = 1; c.groupsize[d] = 1; c.ngroups[d] = 1; }
    c.extent[0] = n; c.groupsize[0] = wg; c.ngroups[0] = groups;
    CUdeviceptr out; CHECK(cuMemAlloc(&out, n * 32 * sizeof(long)));
    CHECK(cuMemsetD8(out, 0xff, n * 32 * sizeof(long)));
    void* args[] = {&c, &out};
    CHECK(cuLaunchKernel(f, groups, 1, 1, wg, 1, 1, 0, nullptr, args, nullptr));
    CHECK(cuCtxSynchronize());
    std::vector<long> host(n * 32); CHECK(cuMemcpyDtoH(host.data(), out, host.size() * sizeof(long)));
    int wrong = 0;
    for (long i2 = 0; i2 < n; ++i2) {
      const long* rec = &host[i2 * 32];
      if (rec[0] != i2 || rec[1] != i2 || rec[5] != i2 % wg || rec[10] != i2 / wg || rec[15] != wg || rec[19] != groups || rec[23] != n) ++wrong;
    }
    std::printf("launch: indices over (1000) in groups of 128 on the GPU: %d of 1000 records wrong -> %s\n", wrong, wrong ? "FAILED" : "OK");
    failures += wrong != 0;
    cuMemFree(out);
  }
  std::printf(failures ? "RESULT: FAILED\n" : "RESULT: OK\n");
  return failures != 0;
}
