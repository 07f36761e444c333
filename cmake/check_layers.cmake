# Fails when a source file includes a header of a layer above its own (docs/architecture.md,
# "Layers"), naming the file, the line and the rule. Run at every build: cmake -DSOURCE_DIR=... -P.
#
# Layer: the include prefixes its files may use. The base (backends/*.h at the top of backends/,
# and backends/ops/, the ops' own declarations) is open to every layer; a concrete backend (backends/<name>/) only to backends/, workloads/
# (the CPU reference probes) and bench/ (inventory); models/ reaches the f64 reference through
# backends/registry.h. Inside backends/, the CPU rooms depend one way: host/ (the inventory,
# peaks, host plan) <- cpu_kernels/ (the shared kernels) <- reference/ (the f64 reference: its
# products are what an f64 step runs) <- cpu/ (the CPU backend base); a file is held to its most
# specific folder's rule.
set(base "backends/[a-z_]+\\.h;backends/ops/")
set(rules_backends/host "${base};backends/host/")
set(rules_backends/cpu_kernels "${base};backends/host/;backends/cpu_kernels/")
set(rules_backends/reference "${base};backends/host/;backends/cpu_kernels/;backends/reference/")
set(rules_backends/cpu 
    "${base};backends/host/;backends/cpu_kernels/;backends/reference/;backends/cpu/")
set(rules_backends "backends/")
set(rules_data "${base};data/")
set(rules_dist "${base};dist/")
set(rules_models "${base};data/;models/")
set(rules_workloads "backends/;data/;models/;workloads/")
set(rules_reports "${base};models/;workloads/;reports/")
set(rules_bench "backends/;dist/;data/;models/;workloads/;reports/;bench/")

# Headers private to their folder: the executor's inside, which only models/ may see.
set(private_models "models/training_step_impl\\.h")

set(violations "")
set(checked "")
foreach(layer backends/host backends/cpu_kernels backends/reference backends/cpu backends dist data
              models workloads reports bench)
  file(GLOB_RECURSE sources "${SOURCE_DIR}/${layer}/*.h" "${SOURCE_DIR}/${layer}/*.cpp"
       "${SOURCE_DIR}/${layer}/*.cu" "${SOURCE_DIR}/${layer}/*.cuh" "${SOURCE_DIR}/${layer}/*.inc")
  list(REMOVE_ITEM sources ${checked})  # held to a more specific folder's rule already
  list(APPEND checked ${sources})
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" includes REGEX "^#include \"[a-z_]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" header "${line}")
      set(allowed FALSE)
      foreach(prefix IN LISTS rules_${layer})
        if(header MATCHES "^${prefix}")
          set(allowed TRUE)
        endif()
      endforeach()
      if(NOT layer STREQUAL "models" AND header MATCHES "^${private_models}$")
        set(allowed FALSE)
      endif()
      if(NOT allowed)
        file(RELATIVE_PATH where "${SOURCE_DIR}" "${source}")
        string(APPEND violations "  ${where}: #include \"${header}\" (${layer}/ may include: ${rules_${layer}})\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "An #include reaches up a layer, into a concrete backend or into another folder's private header:\n${violations}")
endif()
