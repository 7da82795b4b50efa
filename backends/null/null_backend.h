// The null device (`null:0`): kernels that do nothing, buffers in host
// memory. Off by default (kad --null-device). It is the floor of kad's own
// cost with no driver work under it — the bench runs every mode on it with
// --device null:0 — and the smallest complete backend: the template for
// writing a new one (README.md here walks through it).
#pragma once

#include "core/backend.h"

namespace kad::null_backend {

// One null device. Never fails: there is no library to load.
BackendDiscovery discover();

}  // namespace kad::null_backend
