// The OpenCL headers, configured once for kad: OpenCL 1.2 API (what PoCL and
// every ICD implement), plus the ICD dispatch table.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <CL/cl_icd.h>
