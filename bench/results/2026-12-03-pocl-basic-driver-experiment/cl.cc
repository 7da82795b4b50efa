#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <chrono>
#include <cstdio>
#include <vector>
int main(int argc, char** argv) {
  int items = atoi(argv[1]), loops = atoi(argv[2]);
  cl_platform_id p;
  clGetPlatformIDs(1, &p, nullptr);
  cl_device_id d;
  clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, nullptr);
  char name[256];
  clGetDeviceInfo(d, CL_DEVICE_NAME, 256, name, nullptr);
  cl_context c = clCreateContext(nullptr, 1, &d, nullptr, nullptr, nullptr);
  cl_command_queue q = clCreateCommandQueueWithProperties(c, d, nullptr, nullptr);
  const char* src =
      "kernel void k(global float* o, int n){ float x=o[get_global_id(0)]; for(int i=0;i<n;++i) "
      "x=x*0.999f+1.0f; o[get_global_id(0)]=x; }";
  cl_program pr = clCreateProgramWithSource(c, 1, &src, nullptr, nullptr);
  clBuildProgram(pr, 1, &d, "", nullptr, nullptr);
  cl_kernel k = clCreateKernel(pr, "k", nullptr);
  cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, items * 4, nullptr, nullptr);
  std::vector<float> z(items);
  clEnqueueWriteBuffer(q, b, CL_TRUE, 0, items * 4, z.data(), 0, nullptr, nullptr);
  clSetKernelArg(k, 0, sizeof(b), &b);
  clSetKernelArg(k, 1, sizeof(int), &loops);
  size_t g = items;
  clEnqueueNDRangeKernel(q, k, 1, nullptr, &g, nullptr, 0, nullptr, nullptr);
  clFinish(q);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    clEnqueueNDRangeKernel(q, k, 1, nullptr, &g, nullptr, 0, nullptr, nullptr);
    clFinish(q);
  }
  auto t1 = std::chrono::steady_clock::now();
  printf("%s items %d loops %d: %.2f ms per launch\n", name, items, loops,
         std::chrono::duration<double, std::milli>(t1 - t0).count() / 5);
}
