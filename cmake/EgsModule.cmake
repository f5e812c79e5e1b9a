# egs_module(NAME <name> SRCS <files...> [DEPS <targets...>] [TEST_DEPS <targets...>])
#
# Builds library egs_<name> (alias egs::<name>) from SRCS with src/ as the include root.
# Every *_test.cc in the module folder is compiled into one test binary <name>_test,
# registered with CTest under the label "unit". The DEPS lists are the architecture:
# keep them to the arrows in docs/ARCHITECTURE.md.
include_guard(GLOBAL)

function(egs_module)
  cmake_parse_arguments(M "" "NAME" "SRCS;DEPS;TEST_DEPS" ${ARGN})
  set(lib egs_${M_NAME})
  if(M_SRCS)
    add_library(${lib} STATIC ${M_SRCS})
    target_include_directories(${lib} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${lib} PUBLIC ${M_DEPS})
  else()
    add_library(${lib} INTERFACE)
    target_include_directories(${lib} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${lib} INTERFACE ${M_DEPS})
  endif()
  add_library(egs::${M_NAME} ALIAS ${lib})

  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
  if(tests AND EGS_BUILD_TESTS)
    add_executable(${M_NAME}_test ${tests})
    target_link_libraries(${M_NAME}_test PRIVATE ${lib} ${M_TEST_DEPS} egs_testing
                          GTest::gmock GTest::gtest_main)
    add_test(NAME ${M_NAME}_test COMMAND ${M_NAME}_test)
    set_tests_properties(${M_NAME}_test PROPERTIES LABELS unit TIMEOUT 300)
  endif()
endfunction()
