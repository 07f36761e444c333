# write_if_changed(PATH CONTENT): writes only when the content differs, so a build that
# changes nothing recompiles nothing.
function(write_if_changed path content)
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL content)
    file(WRITE "${path}" "${content}")
  endif()
endfunction()
