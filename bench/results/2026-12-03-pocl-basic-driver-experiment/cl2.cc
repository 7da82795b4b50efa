#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <chrono>
#include <cstdio>
#include <vector>
using C = std::chrono::steady_clock;
double ms(C::time_point a, C::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
int main() {
  int items = 65536, loops = 2000;
  cl_platform_id p;
  clGetPlatformIDs(1, &p, nullptr);
  cl_device_id d;
  clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, nullptr);
  cl_context c = clCreateContext(nullptr, 1, &d, nullptr, nullptr, nullptr);
  cl_command_queue q = clCreateCommandQueueWithProperties(c, d, nullptr, nullptr);
  const char* src =
      "kernel void k(global float* o, int n){ float x=o[get_global_id(0)]; for(int i=0;i<n;++i) "
      "x=x*0.999f+1.0f; o[get_global_id(0)]=x; }";
  cl_program pr = clCreateProgramWithSource(c, 1, &src, nullptr, nullptr);
  clBuildProgram(pr, 1, &d, "", nullptr, nullptr);
  cl_kernel k = clCreateKernel(pr, "k", nullptr);
  cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, items * 4, nullptr, nullptr);
  clSetKernelArg(k, 0, sizeof(b), &b);
  clSetKernelArg(k, 1, sizeof(int), &loops);
  size_t g = items;
  cl_event e;
  auto t0 = C::now();
  clEnqueueNDRangeKernel(q, k, 1, nullptr, &g, nullptr, 0, nullptr, &e);
  auto t1 = C::now();
  clFlush(q);
  auto t2 = C::now();
  cl_int st;
  clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, nullptr);
  auto t3 = C::now();
  clWaitForEvents(1, &e);
  auto t4 = C::now();
  printf("enqueue %.2f flush %.2f status(%d) %.2f wait %.2f ms\n", ms(t0, t1), ms(t1, t2), st,
         ms(t2, t3), ms(t3, t4));
}
