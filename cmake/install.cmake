# Install rules for kolo; included at the end of the top-level CMakeLists.txt.
#
# Installs:
#   lib/libkolo.so.<version> + SONAME link + dev link      (target kolo, export set koloTargets)
#   lib/libkolo_mpi.so                                     (the MPI plugin libkolo.so opens)
#   include/kolo/kolo.h, include/kolo/config.h             (public header + generated config)
#   lib/cmake/kolo/kolo{Config,ConfigVersion,Targets*}.cmake  -> find_package(kolo), kolo::kolo
#   lib/pkgconfig/kolo.pc                                  -> pkg-config --cflags --libs kolo
# Everything is relocatable: `cmake --install build --prefix /any/where` works after the fact.
include(CMakePackageConfigHelpers)

set(KOLO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kolo)

install(TARGETS kolo
  EXPORT koloTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# (kolo's INTERFACE_INCLUDE_DIRECTORIES already carries $<INSTALL_INTERFACE:include>.)
# libkolo_mpi.so, beside libkolo.so, where libkolo.so opens it when a process starts over MPI
# (runtime/world/mpi_plugin.h); nothing links it, so it is not in the export set.
install(TARGETS kolo_mpi_plugin LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/bindings/c/include/kolo/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kolo
  FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/generated/kolo/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kolo)

install(EXPORT koloTargets
  NAMESPACE kolo::
  FILE koloTargets.cmake
  DESTINATION ${KOLO_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/koloConfig.cmake.in
  ${PROJECT_BINARY_DIR}/koloConfig.cmake
  INSTALL_DESTINATION ${KOLO_INSTALL_CMAKEDIR})
# SameMajorVersion follows the SONAME (libkolo.so.<major>).
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/koloConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/koloConfig.cmake
  ${PROJECT_BINARY_DIR}/koloConfigVersion.cmake
  DESTINATION ${KOLO_INSTALL_CMAKEDIR})

# kolo.pc finds its prefix from its own location (${pcfiledir}), so it stays right whatever
# --prefix or DESTDIR the install gets.
file(RELATIVE_PATH KOLO_PC_TO_PREFIX
  /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" KOLO_PC_TO_PREFIX "${KOLO_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/kolo.pc.in ${PROJECT_BINARY_DIR}/kolo.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kolo.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
