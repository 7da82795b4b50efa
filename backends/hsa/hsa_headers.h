// The HSA headers as Debian's libhsa-runtime-dev (ROCm 5.2) installs them:
// the core API and AMD's extensions (memory pools, async copies, ISA info).
// Only the declarations are used; the functions come from HsaApi.
#pragma once

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
