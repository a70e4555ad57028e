# `cmake --install`: the binary, the systemd units (a hardened system
# tally.service, Type=notify, and a user unit), an example config, the man
# page, bash completion and the docs. Units and the man page name the
# installed paths, so they are written at install time for the prefix being
# installed to: `cmake --install build/release` gives /usr/local paths,
# `--prefix /usr` (scripts/build-deb.sh) /usr paths, from the same build.
include(GNUInstallDirs)

# /etc whatever the prefix: the binary reads /etc/tally/tally.toml by default (cli/cmd_daemon.h).
set(TALLY_SYSCONFDIR /etc CACHE PATH "where the units look for tally/tally.toml")
# systemd looks in /usr/lib/systemd and /usr/local/lib/systemd: the prefix's lib/, never lib64/.
set(TALLY_UNITDIR lib/systemd/system CACHE STRING "system unit directory, relative to the prefix")
set(TALLY_USERUNITDIR lib/systemd/user CACHE STRING "user unit directory, relative to the prefix")

set(dist ${PROJECT_SOURCE_DIR}/dist)
set(gen ${PROJECT_BINARY_DIR}/dist)
install(CODE "
  set(PROJECT_VERSION ${PROJECT_VERSION})
  set(TALLY_SYSCONFDIR ${TALLY_SYSCONFDIR})
  set(TALLY_BINDIR \${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR})
  set(TALLY_DOCDIR \${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR})
  configure_file(${dist}/tally.service.in ${gen}/tally.service @ONLY)
  configure_file(${dist}/tally-user.service.in ${gen}/user/tally.service @ONLY)
  configure_file(${gen}/tally.1.in ${gen}/tally.1 @ONLY)")

install(TARGETS tally RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The Slurm plugin goes where Slurm looks (TALLY_SLURM_PLUGINDIR, set in the
# top-level CMakeLists.txt: `tally doctor --slurm` looks there too).
if(TARGET tally_spank)
  install(TARGETS tally_spank LIBRARY DESTINATION ${TALLY_SLURM_PLUGINDIR} COMPONENT slurm)
endif()
# The installed binary is stripped (the build tree keeps its symbols).
install(CODE "execute_process(COMMAND ${CMAKE_STRIP} --strip-unneeded
  \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/tally\")")
# bash, zsh and fish completion come from the binary's own command-line model.
# So is the man page: its prose is dist/tally.1.in, its commands, options
# and exit codes the binary's (tally completion man).
add_custom_command(OUTPUT ${gen}/tally.bash ${gen}/_tally ${gen}/tally.fish ${gen}/tally.1.in
  COMMAND tally completion bash ${gen}/tally.bash
  COMMAND tally completion zsh ${gen}/_tally
  COMMAND tally completion fish ${gen}/tally.fish
  COMMAND tally completion man ${gen}/tally.1.in --template ${dist}/tally.1.in
  DEPENDS tally ${dist}/tally.1.in COMMENT "Writing bash, zsh and fish completion and tally(1)" VERBATIM)
add_custom_target(tally_completions ALL
  DEPENDS ${gen}/tally.bash ${gen}/_tally ${gen}/tally.fish ${gen}/tally.1.in)

# Everything the install rules below name, and nothing else (no tests): what
# scripts/setup.sh and scripts/build-deb.sh build before `cmake --install`.
add_custom_target(tally_installable)
add_dependencies(tally_installable tally tally_completions)
if(TARGET tally_spank)
  add_dependencies(tally_installable tally_spank)
endif()
install(FILES ${gen}/_tally DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
install(FILES ${gen}/tally.fish DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d)
install(FILES ${gen}/tally.service DESTINATION ${TALLY_UNITDIR})
install(FILES ${gen}/user/tally.service DESTINATION ${TALLY_USERUNITDIR})
install(FILES ${gen}/tally.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# The `tally` group owning the socket, and the state directory. systemd reads
# both from /usr/lib and /usr/local/lib (systemd-sysusers, systemd-tmpfiles --create).
install(FILES ${dist}/tally.sysusers DESTINATION lib/sysusers.d RENAME tally.conf)
install(FILES ${dist}/tally.tmpfiles DESTINATION lib/tmpfiles.d RENAME tally.conf)
install(FILES ${gen}/tally.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME tally)
install(FILES ${dist}/tally.toml DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(FILES ${dist}/grafana/tally.json DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/grafana)
install(FILES ${dist}/prometheus/tally.rules.yml DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/prometheus)
install(FILES ${dist}/slurm/slurm.conf ${dist}/slurm/gres.conf ${dist}/slurm/cgroup.conf
  ${dist}/slurm/plugstack.conf ${dist}/slurm/tally.toml DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/slurm)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Operators' docs only: the guide and the reference it links to; the
# developers' (testing, the VM harness, performance) stay in the source tree.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/guide DESTINATION ${CMAKE_INSTALL_DOCDIR}
  FILES_MATCHING PATTERN "*.md")
install(FILES ${PROJECT_SOURCE_DIR}/docs/run.md ${PROJECT_SOURCE_DIR}/docs/daemon.md
  ${PROJECT_SOURCE_DIR}/docs/gpu.md ${PROJECT_SOURCE_DIR}/docs/coverage.md
  ${PROJECT_SOURCE_DIR}/docs/enforcement.md ${PROJECT_SOURCE_DIR}/docs/doctor.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The staging root tests check (tests/cli/package_test.cpp, and in the VM
# tests/vm/package_test.cpp with systemd-analyze verify): exactly what
# `cmake --install --prefix /usr/local` puts on a machine, under build/stage.
set(TALLY_STAGE_DIR ${PROJECT_BINARY_DIR}/stage)
add_custom_target(tally_stage
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${TALLY_STAGE_DIR}
  COMMAND ${CMAKE_COMMAND} -E env DESTDIR=${TALLY_STAGE_DIR} ${CMAKE_COMMAND} --install ${PROJECT_BINARY_DIR} --prefix /usr/local
          > ${PROJECT_BINARY_DIR}/stage.log
  COMMENT "Installing into the staging root ${TALLY_STAGE_DIR}"
  VERBATIM)
add_dependencies(tally_stage tally_installable)
