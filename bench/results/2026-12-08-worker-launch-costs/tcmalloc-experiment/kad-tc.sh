#!/bin/sh
LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 exec /work/main/build/server/kad "$@"
