# Helpers shared by every CMakeLists.txt.

set(DPLEDGER_WARNINGS -Wall -Wextra -Wno-unused-parameter)

# dpl_library(NAME GLOB_PATTERN... DEPS dep...): a static library from the non-test
# sources matching the patterns in the current directory. Globbing keeps each
# component's file list in one place: its folder.
function(dpl_library name)
  cmake_parse_arguments(ARG "" "" "PATTERNS;DEPS" ${ARGN})
  set(srcs)
  foreach(p ${ARG_PATTERNS})
    file(GLOB found CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${p})
    list(APPEND srcs ${found})
  endforeach()
  list(FILTER srcs EXCLUDE REGEX "_test\\.cc$")
  list(FILTER srcs EXCLUDE REGEX "_bench\\.cc$")
  if(srcs)
    add_library(${name} STATIC ${srcs})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${DPLEDGER_WARNINGS}>)
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  endif()
endfunction()

# dpl_tests(PATTERN DEPS dep...): one gtest binary per matching *_test.cc file, so a
# component's tests build and link only against what that component needs.
function(dpl_tests pattern)
  if(NOT DPLEDGER_BUILD_TESTS)
    return()
  endif()
  if(NOT DPLEDGER_BUILD_CORE_TESTS AND CMAKE_CURRENT_SOURCE_DIR MATCHES "/core/")
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${pattern})
  foreach(t ${tests})
    get_filename_component(tname ${t} NAME_WE)
    add_executable(${tname} ${t})
    target_link_libraries(${tname} PRIVATE ${ARG_DEPS} dpl_test_support GTest::gmock GTest::gtest_main)
    target_compile_options(${tname} PRIVATE ${DPLEDGER_WARNINGS})
    gtest_discover_tests(${tname} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
  endforeach()
endfunction()
