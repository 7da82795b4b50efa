# Turns prelude/kad_prelude.cl into a C++ source defining kad::kPreludeSource.
# Run at build time (cmake -P) so that the generated file lives in the build tree.
file(READ "${INPUT}" content)
file(WRITE "${OUTPUT}.tmp"
  "// Generated from core/prelude/kad_prelude.cl; do not edit.\n"
  "namespace kad {\nextern const char kPreludeSource[];\n"
  "const char kPreludeSource[] = R\"kadprelude(${content})kadprelude\";\n}\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
