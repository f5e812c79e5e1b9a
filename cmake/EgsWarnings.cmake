include_guard(GLOBAL)
option(EGS_WERROR "Treat warnings as errors" OFF)
set(EGS_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
    -Wold-style-cast -Wimplicit-fallthrough)
if(EGS_WERROR)
  list(APPEND EGS_WARNINGS -Werror)
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${EGS_WARNINGS}>")

option(EGS_SANITIZE "Build with ASan and UBSan" OFF)
if(EGS_SANITIZE)
  # UBSan's null and alignment checks instrument every member access and pointer use: without
  # them (and with line tables only, -g1, in the asan preset) the whole asan build took 948 s
  # instead of 1,359 s on 2 cores, and its tests 185 s instead of 304 s, which keeps CI inside
  # its time budget. A null dereference still stops the run (ASan reports
  # the SEGV with its stack), and x86 tolerates misaligned loads. Every other UBSan check stays.
  add_compile_options(-fsanitize=address,undefined -fno-sanitize=null,alignment
                      -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()
option(EGS_TSAN "Build with TSan" OFF)
if(EGS_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# lld links the large sanitizer test binaries about 3x faster than GNU ld (12.4 s -> 3.9 s for
# daemon_test under asan); used when installed (scripts/install-deps.sh installs it).
option(EGS_USE_LLD "Link with lld when it is installed" ON)
if(EGS_USE_LLD)
  find_program(EGS_LLD_PROGRAM ld.lld)
  if(EGS_LLD_PROGRAM)
    add_link_options(-fuse-ld=lld)
  endif()
endif()
