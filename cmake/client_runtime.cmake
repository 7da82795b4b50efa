# How a client program links gRPC, protobuf and abseil.
#
# Debian ships them as about sixty shared objects. A program that loads them
# spends 10-15 ms in the dynamic loader before main() (mapping each one and
# resolving C++ symbols across all of them), which is most of a new client's
# first launch through kad (DESIGN §9, time_to_load). A program that sets
# the target property KAD_STATIC_RUNTIME links their static archives instead
# and starts in a few milliseconds: kactl, kad-demo and the benchmark's client
# do, and so may a user's program (find_package(kad), then
# set_target_properties(app PROPERTIES KAD_STATIC_RUNTIME ON)).
#
# A program that also links kad's server or another gRPC user keeps the
# shared objects: two copies of protobuf in one process would register the
# same descriptors twice.
#
# kad_link_runtime(<target> <PUBLIC|PRIVATE|INTERFACE> <gRPC/protobuf/absl targets>...)
# links the given imported targets unless the program being linked sets
# KAD_STATIC_RUNTIME, and then kad_static_runtime in their place.

set(_kad_static_names grpc++ grpc upb address_sorting gpr re2 cares protobuf ssl crypto z)
set(_kad_static_archives)
set(KAD_STATIC_RUNTIME_FOUND ON)
foreach(name IN LISTS _kad_static_names)
  find_library(KAD_STATIC_${name}_ARCHIVE NAMES lib${name}.a)
  if(KAD_STATIC_${name}_ARCHIVE)
    list(APPEND _kad_static_archives ${KAD_STATIC_${name}_ARCHIVE})
  else()
    set(KAD_STATIC_RUNTIME_FOUND OFF)
  endif()
endforeach()
find_library(KAD_STATIC_absl_base_ARCHIVE NAMES libabsl_base.a)
if(KAD_STATIC_absl_base_ARCHIVE)
  get_filename_component(_kad_absl_dir ${KAD_STATIC_absl_base_ARCHIVE} DIRECTORY)
  file(GLOB _kad_absl_archives ${_kad_absl_dir}/libabsl_*.a)
  list(SORT _kad_absl_archives)
  list(APPEND _kad_static_archives ${_kad_absl_archives})
else()
  set(KAD_STATIC_RUNTIME_FOUND OFF)
endif()

add_library(kad_static_runtime INTERFACE)
if(KAD_STATIC_RUNTIME_FOUND)
  # The archives depend on each other in cycles (gRPC <-> abseil): one
  # group, searched until nothing more resolves.
  string(JOIN "," _kad_group ${_kad_static_archives})
  target_link_libraries(kad_static_runtime INTERFACE "$<LINK_GROUP:RESCAN,${_kad_group}>"
                        Threads::Threads ${CMAKE_DL_LIBS} m rt)
  # Only the code the program reaches: about a third of the archives' size.
  target_link_options(kad_static_runtime INTERFACE -Wl,--gc-sections)
else()
  message(STATUS "kad: static archives of gRPC, protobuf or abseil missing: "
                 "client programs link the shared objects")
endif()

function(kad_link_runtime target scope)
  set(static "$<AND:$<BOOL:${KAD_STATIC_RUNTIME_FOUND}>,$<BOOL:$<TARGET_PROPERTY:KAD_STATIC_RUNTIME>>>")
  foreach(lib IN LISTS ARGN)
    target_link_libraries(${target} ${scope} "$<$<NOT:${static}>:${lib}>")
  endforeach()
  target_link_libraries(${target} ${scope} "$<${static}:$<TARGET_NAME:kad_static_runtime>>")
endfunction()
