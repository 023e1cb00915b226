# Helpers shared by every module's CMakeLists.txt.

# Adds every direct subfolder of DIR that has a CMakeLists.txt, in sorted order.
function(ds4_add_children dir)
  file(GLOB children LIST_DIRECTORIES true RELATIVE ${dir} ${dir}/*)
  list(SORT children)
  foreach(child ${children})
    if(IS_DIRECTORY ${dir}/${child} AND EXISTS ${dir}/${child}/CMakeLists.txt)
      add_subdirectory(${dir}/${child})
    endif()
  endforeach()
endfunction()

# ds4_library(NAME [DEPS ...]): a static library ds4_NAME from every .cpp in this folder
# (recursively), include root = src/.
function(ds4_library name)
  cmake_parse_arguments(ARG "" "" "DEPS;SOURCES" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/*.c)
  if(NOT srcs AND NOT ARG_SOURCES)
    # Header-only so far: an INTERFACE library keeps dependents building.
    add_library(ds4_${name} INTERFACE)
    target_include_directories(ds4_${name} INTERFACE ${DS4_ROOT}/src)
    target_link_libraries(ds4_${name} INTERFACE ${ARG_DEPS} Threads::Threads)
    return()
  endif()
  add_library(ds4_${name} STATIC ${srcs} ${ARG_SOURCES})
  target_include_directories(ds4_${name} PUBLIC ${DS4_ROOT}/src)
  target_link_libraries(ds4_${name} PUBLIC ${ARG_DEPS} Threads::Threads)
endfunction()

# ds4_test(NAME [DEPS ...]): one GoogleTest binary test_NAME from every .cpp in this folder,
# registered with ctest (one ctest entry per binary keeps 2-core CI fast to schedule).
function(ds4_test name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_executable(test_${name} ${srcs})
  target_link_libraries(test_${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  # tests/unit/common: headers shared by the tests of several modules (no binary of its own).
  target_include_directories(test_${name} PRIVATE ${DS4_ROOT}/tests/unit/common)
  target_compile_definitions(test_${name} PRIVATE DS4_TEST_DATA="${DS4_TEST_DATA}" DS4_ROOT="${DS4_ROOT}")
  add_test(NAME ${name} COMMAND test_${name} --gtest_brief=1 WORKING_DIRECTORY ${DS4_ROOT})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "DS4_ROOT=${DS4_ROOT};DS4_BIN=${CMAKE_BINARY_DIR}/bin")
endfunction()

# ds4_pytest(NAME PATH): a pytest suite run through ctest with the project venv.
function(ds4_pytest name path)
  add_test(NAME ${name} COMMAND ${DS4_ROOT}/.venv/bin/python -m pytest -q -x ${path}
           WORKING_DIRECTORY ${DS4_ROOT})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "DS4_ROOT=${DS4_ROOT};DS4_BIN=${CMAKE_BINARY_DIR}/bin")
endfunction()
