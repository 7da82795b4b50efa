# The kad.v1 API fuzz test (api_fuzz_test.cc): random but well-formed
# sequences of every kad.v1 call against a real kad process, each reply's code
# checked against the table in kad.proto's comments. Included from
# tests/CMakeLists.txt: this folder's CMakeLists.txt is the standalone clang
# build of the shared-memory record fuzzer (run_fuzzer.sh).
#
# One bounded run of about 45 s. A longer one while developing:
#   KAD_API_FUZZ_SECONDS=600 build/tests/kad_api_fuzz_tests
# and a failure's replay: KAD_API_FUZZ_SEED=<the seed it printed>.
add_executable(kad_api_fuzz_tests
  ${CMAKE_CURRENT_LIST_DIR}/api_fuzz_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/api_fuzz_fuzzer.cc
  ${CMAKE_CURRENT_LIST_DIR}/api_fuzz_submit.cc
  ${CMAKE_CURRENT_LIST_DIR}/api_fuzz_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/api_fuzz_spec.cc
  ${CMAKE_CURRENT_LIST_DIR}/api_fuzz_wire.cc
  ${CMAKE_CURRENT_LIST_DIR}/api_fuzz_kernels.cc)
target_compile_definitions(kad_api_fuzz_tests PRIVATE
  KAD_API_FUZZ_PRELUDE="${PROJECT_SOURCE_DIR}/core/prelude/kad_prelude.cl")
target_link_libraries(kad_api_fuzz_tests PRIVATE kad_test_daemon kad_proto GTest::gtest_main)
add_test(NAME api_fuzz_bounded_run COMMAND kad_api_fuzz_tests)
set_tests_properties(api_fuzz_bounded_run PROPERTIES TIMEOUT 240)
# The same, shorter, against Submit streams served as reactors.
add_test(NAME api_fuzz_bounded_run_submit_reactors COMMAND kad_api_fuzz_tests)
set_tests_properties(api_fuzz_bounded_run_submit_reactors PROPERTIES TIMEOUT 240
  ENVIRONMENT "KAD_API_FUZZ_SUBMIT_STREAMS=reactors;KAD_API_FUZZ_SECONDS=20")
